"""The tables of bench/dedup_bench.py: planted near-copies (per kind, the S-curve, false removals, agreement
between tools, normalisation), and the timing rounds. Pure functions of the measured sets and timings.
"""

from __future__ import annotations

import collections
import statistics

from dedup_planted import KINDS, best_earlier_match, jaccard, reference_shingles

J_BUCKETS = [0.0, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95]


def normalisation_report(pairs, labels, pair_jaccard, threshold) -> str:
    """How far the tools' normal forms move a pair's true Jaccard, and how many pairs cross the threshold."""
    pair_jaccard = {name: values for name, values in pair_jaccard.items() if values is not None}
    if "rankzero" not in pair_jaccard:
        return ""
    lines = ["", f"True Jaccard of the {len(pairs)} planted pairs on each tool's own shingles (normalisation and "
             f"words), against rankzero's:", ""]
    base = pair_jaccard["rankzero"]
    for name, values in pair_jaccard.items():
        if name == "rankzero":
            continue
        gaps = [abs(a - b) for a, b in zip(base, values)]
        crossed = collections.Counter(labels[pair[0]]["kind"] for pair, a, b in zip(pairs, base, values)
                                      if (a >= threshold) != (b >= threshold))
        lines.append(f"- {name}: mean |dJ| {statistics.mean(gaps):.4f}, max {max(gaps):.3f}; pairs on different "
                     f"sides of {threshold}: {sum(crossed.values())} ("
                     + ", ".join(f"{kind} {count}" for kind, count in sorted(crossed.items())) + ")")
    return "\n".join(lines)


def planted_report(texts, labels, removed, seconds, threshold, bands, rows, args, rankzero_threshold=None) -> str:
    shingles = [reference_shingles(text) for text in texts]
    # The closest earlier and the closest later document of each, by true Jaccard on the reference shingles.
    earlier = best_earlier_match(shingles)
    later = [(value, len(texts) - 1 - other if other >= 0 else -1)
             for value, other in reversed(best_earlier_match(shingles[::-1]))]
    originals = [index for index, label in enumerate(labels) if label["kind"] == "original"]
    originals_only = best_earlier_match([shingles[index] for index in originals])
    genuine = {originals[position] for position, (value, _) in enumerate(originals_only) if value >= threshold}
    true_similarity = {index: jaccard(shingles[index], shingles[label["of"]])
                       for index, label in enumerate(labels) if label["kind"] != "original"}
    real = sum(1 for index in originals if labels[index]["from"].startswith("ko_real_dev"))
    names = list(removed)
    shape_note = " (rankzero's)" if any(name.startswith("rankzero") for name in removed) else ""
    threshold_note = f"threshold {threshold}"
    if rankzero_threshold is not None and rankzero_threshold != threshold:
        shape_note = f" (rankzero's at --dedup_threshold {rankzero_threshold:g})"
        threshold_note = f"threshold t = {threshold} (rankzero's default, kept as the near-copy line)"
    lines = [f"Corpus: {len(texts):,} documents = {len(originals):,} originals ({real:,} ko_real_dev, the rest a "
             f"{args.bench_mib:g} MiB bench corpus, seed {args.seed}) + planted copies; 5-word shingles, "
             f"{bands} bands x {rows} rows{shape_note}, "
             f"{threshold_note}. {len(genuine)} originals genuinely near-copy an "
             f"earlier original (true Jaccard >= {threshold}). Cells: removed (all copies / copies with true J >= t).",
             "", "| kind | copies | true J >= t | " + " | ".join(names) + " |", "|---|---|---|" + "---|" * len(names)]
    for kind in KINDS:
        members = [index for index, label in enumerate(labels) if label["kind"] == kind]
        above = [index for index in members if true_similarity[index] >= threshold]
        median = statistics.median(true_similarity[index] for index in members)
        lines.append(f"| {kind} | {len(members)} | {len(above)} (median J {median:.2f}) | "
                     + " | ".join(f"{share(members, removed[n])} / {share(above, removed[n])}" for n in names) + " |")
    copies = [index for index, label in enumerate(labels) if label["kind"] != "original"]
    above = [index for index in copies if true_similarity[index] >= threshold]
    lines.append(f"| all kinds | {len(copies)} | {len(above)} | "
                 + " | ".join(f"{share(copies, removed[n])} / {share(above, removed[n])}" for n in names) + " |")
    distinct = [index for index in originals if index not in genuine]
    lines.append(f"| distinct originals removed | {len(distinct)} | | "
                 + " | ".join(share(distinct, removed[n], 2) for n in names) + " |")
    lines.append(f"| genuine near-copies among originals | {len(genuine)} | | "
                 + " | ".join(share(sorted(genuine), removed[n]) for n in names) + " |")
    lines += ["", "Planted copies removed by true Jaccard with their original (the measured S-curve):", "",
              "| true J | copies | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for low, high in zip(J_BUCKETS, J_BUCKETS[1:] + [1.01]):
        members = [index for index in copies if low <= true_similarity[index] < high]
        if members:
            label = f"{low:.2f}-{min(high, 1.0):.2f}" if low else f"< {high:.2f}"
            cells = " | ".join(share(members, removed[name]) for name in names)
            lines.append(f"| {label} | {len(members)} | {cells} |")
    lines += ["", "Distinct originals removed, by their closest document anywhere (true J; 'later' = the earlier "
              "one was removed and a later near-copy kept):", ""]
    for name in names:
        kinds = collections.Counter(why_removed(index, earlier, later, removed[name], threshold)
                                    for index in distinct if index in removed[name])
        lines.append(f"- {name}: " + (", ".join(f"{count} {why}" for why, count in sorted(kinds.items())) or "none"))
    swapped = {name: sum(1 for index, label in enumerate(labels) if label["kind"] != "original"
                         and label["of"] in removed[name] and index not in removed[name]) for name in names}
    lines += ["", "Planted pairs where the original was removed and the copy kept (not first-wins): "
              + ", ".join(f"{name} {count}" for name, count in swapped.items())]
    lines += ["", "Seconds (rankzero: its function in-process; datatrove: its four stages as a subprocess, one task): "
              + ", ".join(f"{name} {value:.1f}" for name, value in seconds.items())]
    for name in names[1:]:
        lines += agreement(names[0], name, removed, labels, genuine, earlier, later)
    lines += false_removals(names, removed, distinct, labels, texts, earlier, later)
    return "\n".join(lines)


def why_removed(index: int, earlier, later, removed_set: set[int], threshold: float) -> str:
    before, after = earlier[index], later[index]
    if before[0] >= threshold:
        return f"earlier J >= {threshold}"
    if after[0] >= threshold:
        return f"later J >= {threshold} ({'also removed' if after[1] in removed_set else 'kept'})"
    best = max(before[0], after[0])
    return "best J < 0.5" if best < 0.5 else f"best J {0.1 * int(best * 10):.1f}-{0.1 * int(best * 10) + 0.1:.1f}"


def share(members, removed_set: set[int], digits: int = 1) -> str:
    if not members:
        return "-"
    hits = sum(1 for index in members if index in removed_set)
    return f"{hits}/{len(members)} = {100 * hits / len(members):.{digits}f}%"


def category(index: int, labels: list[dict], genuine: set[int]) -> str:
    kind = labels[index]["kind"]
    return kind if kind != "original" else "original (genuine near-copy)" if index in genuine else "original (distinct)"


def agreement(left: str, right: str, removed, labels, genuine, earlier, later) -> list[str]:
    a, b = removed[left], removed[right]
    both = a & b
    lines = ["", f"Agreement {left} vs {right}: {len(both)} removed by both, {len(a - b)} only by {left}, "
             f"{len(b - a)} only by {right}; Jaccard of the removed sets = {len(both) / max(1, len(a | b)):.3f}.", "",
             f"| document | both | only {left} | only {right} |", "|---|---|---|---|"]
    counts = collections.defaultdict(lambda: [0, 0, 0])
    for index in a | b:
        counts[category(index, labels, genuine)][0 if index in both else 1 if index in a else 2] += 1
    for key in sorted(counts):
        lines.append(f"| {key} | " + " | ".join(str(value) for value in counts[key]) + " |")
    for name, lone in ((left, a - b), (right, b - a)):
        if lone:
            similarity = sorted(earlier[index][0] for index in lone)
            kept_later = sum(1 for index in lone
                             if earlier[index][0] < later[index][0] and later[index][1] not in removed[name])
            lines.append(f"\nOnly {name} ({len(lone)}): true Jaccard with the closest earlier document min "
                         f"{similarity[0]:.2f}, median {statistics.median(similarity):.2f}, max {similarity[-1]:.2f}; "
                         f"{sum(value < 0.8 for value in similarity)} below 0.8; {kept_later} closer to a later "
                         f"document that {name} kept.")
    return lines


def false_removals(names, removed, distinct, labels, texts, earlier, later) -> list[str]:
    lines = []
    for name in names:
        for index in [index for index in distinct if index in removed[name]][:5]:
            lines.append(f"- {name} removed {labels[index]['from']} (closest earlier: line {earlier[index][1]}, J "
                         f"{earlier[index][0]:.2f}; closest later: line {later[index][1]}, J {later[index][0]:.2f}): "
                         f"{texts[index][:60]!r}")
    return ["", "Distinct originals removed (first 5 per tool):"] + lines if lines else []


def timing_report(results, corpus, bands, rows, args) -> str:
    size = corpus.stat().st_size / 2**20
    lines = [f"Corpus {corpus.name} ({size:.1f} MiB), {args.rounds} paired rounds (order alternating), 5-word "
             "shingles, "
             f"{bands} bands x {rows} rows; datatrove on {args.datatrove_shards} shards, tasks = workers = "
             f"{args.datatrove_shards}.", "", "| run | wall s (per round) | peak PSS MiB | removed |",
             "|---|---|---|---|"]
    for mode, entries in results.items():
        walls = ", ".join(f"{entry['wall_s']:.1f}" for entry in entries)
        peak = max(entry["peak_pss_mb"] for entry in entries)
        removed = entries[0].get("removed")
        if removed is None:
            removed = ", ".join(f"{count} {why}" for why, count in (entries[0].get("dropped") or {}).items()) or "0"
        label = {"none": "rankzero --dedup none", "near": "rankzero --dedup near",
                 "datatrove": "datatrove MinHash, 4 stages"}[mode]
        lines.append(f"| {label} | {walls} | {peak:.0f} | {removed} |")
    def paired(numerator: str, denominator: str, key: str) -> str:
        if numerator not in results or denominator not in results:
            return "-"
        values = [n[key] / d[key] for n, d in zip(results[numerator], results[denominator])]
        return f"{statistics.median(values):.2f} (rounds: {', '.join(f'{v:.2f}' for v in values)})"
    lines += ["", f"- near / none, wall: {paired('near', 'none', 'wall_s')}; peak PSS: "
              f"{paired('near', 'none', 'peak_pss_mb')}",
              f"- datatrove / near, wall: {paired('datatrove', 'near', 'wall_s')}; peak PSS: "
              f"{paired('datatrove', 'near', 'peak_pss_mb')}"]
    if "datatrove" in results:
        stages = {key: statistics.median(entry["stages"][key] for entry in results["datatrove"])
                  for key in results["datatrove"][0]["stages"]}
        lines.append("- datatrove stage seconds (median): " + ", ".join(f"{k} {v:.1f}" for k, v in stages.items()))
    return "\n".join(lines)
