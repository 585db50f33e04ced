"""Near-duplicate removal: rankzero's `--dedup near` against datatrove's MinHash pipeline (issue 19).

    python bench/dedup_bench.py --part planted --real_dir ../shared/corpora/ko_real_dev
    python bench/dedup_bench.py --part timing --size_mb 50 --rounds 2
    python bench/dedup_bench.py --part planted --skip_rankzero        # datatrove and the generator only

--part planted: the near-copies corpus of bench/dedup_planted.py (real Korean + bench corpus, planted copies
of five kinds) through rankzero.data.neardup.near_duplicate_indices and through datatrove's four MinHash
stages (bench/baselines/datatrove_minhash.py, run by `--datatrove_python`, its own venv) at the same
shingle size, bands and rows. Reports, per planted kind, the share of copies removed (all of them, and
those whose true Jaccard with the original is >= the threshold), the share of distinct originals removed
(originals that genuinely near-copy an earlier original, true Jaccard >= threshold, are counted apart),
and the agreement of the two removed sets (Jaccard of the sets, and who removes what).
--part timing: a `--size_mb` bench corpus (bench/make_corpus.py) through rankzero's whole prepare
(train.py --tokenize_only --packing --max_seq_length 1024, no quality filter) with --dedup none and
--dedup near, and through datatrove's pipeline (the corpus cut into `--datatrove_shards` files so its
tasks run in parallel); paired rounds with the order alternating, wall time and peak PSS of the whole
process tree (bench/_measure.py). Ratios are medians of per-round ratios (the VM drifts).
The markdown printed at the end is ready for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

from _measure import machine_info, run_measured  # noqa: E402
from dedup_planted import KINDS, REAL_DIR, best_earlier_match, jaccard, reference_shingles, write_planted  # noqa: E402
from make_corpus import generate  # noqa: E402

DATATROVE_SCRIPT = BENCH / "baselines" / "datatrove_minhash.py"
DEFAULT_DATATROVE_PYTHON = Path("/work/venvs/datatrove/bin/python")
SEQUENCE_LENGTH = 1024
J_BUCKETS = [0.0, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95]


def rankzero_settings() -> dict | None:
    """Shingle size, bands, rows and threshold as rankzero's near-dedup modules define them (None: not there)."""
    try:
        from rankzero.data import neardup
    except ImportError:
        return None
    modules = [neardup]
    try:
        from rankzero.data import minhash
        modules.append(minhash)
    except ImportError:
        pass
    names = {"ngrams": ("SHINGLE_WORDS",), "bands": ("BANDS", "NUM_BANDS"), "rows": ("ROWS", "ROWS_PER_BAND"),
             "threshold": ("DEFAULT_THRESHOLD", "THRESHOLD")}
    settings = {}
    for key, candidates in names.items():
        found = [getattr(module, name) for module in modules for name in candidates if hasattr(module, name)]
        if found:
            settings[key] = found[0]
    return settings


def run_datatrove(python: Path, input_dir: Path, work: Path, bands: int, rows: int, ngrams: int,
                  tasks: int, words: str = "whitespace") -> list[str]:
    cmd = datatrove_command(python, input_dir, work, bands, rows, ngrams, tasks, words)
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"datatrove failed (exit {result.returncode}):\n{result.stderr[-3000:]}")
    return (work / "removed_ids.txt").read_text(encoding="utf-8").split()


def datatrove_command(python: Path, input_dir: Path, work: Path, bands: int, rows: int, ngrams: int,
                      tasks: int, words: str = "whitespace") -> list[str]:
    return [str(python), str(DATATROVE_SCRIPT), str(input_dir), str(work), "--bands", str(bands), "--rows",
            str(rows), "--ngrams", str(ngrams), "--tasks", str(tasks), "--workers", str(tasks), "--words", words]


# --- planted ------------------------------------------------------------------------------------------


def planted_part(args: argparse.Namespace) -> str:
    work = args.workdir / "planted"
    shutil.rmtree(work, ignore_errors=True)
    corpus, label_path = write_planted(work / "input", args.real_dir, args.bench_mib, args.per_kind, args.seed)
    texts = [json.loads(line)["text"] for line in open(corpus, encoding="utf-8")]
    labels = json.loads(label_path.read_text(encoding="utf-8"))
    removed: dict[str, set[int]] = {}
    seconds: dict[str, float] = {}
    settings = rankzero_settings() if not args.skip_rankzero else None
    bands = args.bands or (settings or {}).get("bands") or 14
    rows = args.rows or (settings or {}).get("rows") or 8
    threshold = (settings or {}).get("threshold", 0.8)
    if settings is not None:
        from rankzero.data.neardup import near_duplicate_indices
        start = time.perf_counter()
        removed["rankzero"] = set(near_duplicate_indices(texts, threshold=threshold))
        seconds["rankzero"] = time.perf_counter() - start
    for run in args.datatrove_runs or [f"whitespace:{bands}x{rows}"]:
        words, shape = run.split(":")
        run_bands, run_rows = (int(value) for value in shape.split("x"))
        name = f"datatrove {shape}" + ("" if words == "whitespace" else f" {words}")
        start = time.perf_counter()
        ids = run_datatrove(args.datatrove_python, corpus.parent, work / f"datatrove-{words}-{shape}", run_bands,
                            run_rows, 5, 1, words)
        removed[name] = {int(doc_id) for doc_id in ids}
        seconds[name] = time.perf_counter() - start
    return planted_report(texts, labels, removed, seconds, threshold, bands, rows, args)


def planted_report(texts, labels, removed, seconds, threshold, bands, rows, args) -> str:
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
    lines = [f"Corpus: {len(texts):,} documents = {len(originals):,} originals ({real:,} ko_real_dev, the rest a "
             f"{args.bench_mib:g} MiB bench corpus, seed {args.seed}) + planted copies; 5-word shingles, rankzero at "
             f"{bands} bands x {rows} rows and threshold {threshold}. {len(genuine)} originals genuinely near-copy an "
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
            lines.append(f"| {label} | {len(members)} | " + " | ".join(share(members, removed[n]) for n in names) + " |")
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
            kept_later = sum(1 for index in lone if earlier[index][0] < later[index][0] and later[index][1] not in removed[name])
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


# --- timing -------------------------------------------------------------------------------------------


def timing_part(args: argparse.Namespace) -> str:
    from prep_bench import check_prepared, train_tokenizer
    corpus = args.workdir / f"corpus-{args.size_mb:g}mb-seed{args.seed}.jsonl"
    if not corpus.is_file():  # generated aside, then renamed: an interrupted run leaves no half corpus
        generate(int(args.size_mb * 2**20), corpus.with_suffix(".tmp"), seed=args.seed)
        os.replace(corpus.with_suffix(".tmp"), corpus)
    shards = args.workdir / f"corpus-{args.size_mb:g}mb-seed{args.seed}-shards{args.datatrove_shards}"
    if not shards.is_dir():
        split_corpus(corpus, shards, args.datatrove_shards)
    tokenizer = args.tokenizer or args.workdir / f"tokenizer-seed{args.seed}"
    if not (tokenizer / "tokenizer.json").is_file():
        print("training the benchmark tokenizer ...", file=sys.stderr)
        train_tokenizer(corpus, tokenizer)
    settings = rankzero_settings() or {}
    bands, rows = args.bands or settings.get("bands", 14), args.rows or settings.get("rows", 8)
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    modes = ["none", "near", "datatrove"] if not args.skip_rankzero else ["datatrove"]
    results: dict[str, list[dict]] = {mode: [] for mode in modes}
    for round_index in range(args.rounds):
        for mode in (modes if round_index % 2 == 0 else modes[::-1]):
            scratch = args.workdir / f"run-{mode}"
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.mkdir(parents=True)
            if mode == "datatrove":
                cmd = datatrove_command(args.datatrove_python, shards, scratch, bands, rows, 5, args.datatrove_shards)
            else:
                cmd = [sys.executable, "train.py", "--tokenize_only", "--dataset", str(corpus), "--tokenizer_path",
                       str(tokenizer), "--max_seq_length", str(SEQUENCE_LENGTH), "--packing", "--cache_dir",
                       str(scratch / "cache"), "--dedup", mode]
            result = run_measured(cmd, env=env, cwd=str(args.rankzero_repo.resolve()))
            if result["returncode"] != 0:
                raise SystemExit(f"{mode} failed (exit {result['returncode']}):\n{result['stderr'][-3000:]}")
            entry = {"wall_s": result["wall_s"], "peak_pss_mb": result["peak_pss_mb"]}
            if mode == "datatrove":
                entry["removed"] = len((scratch / "removed_ids.txt").read_text().split())
                entry["stages"] = json.loads((scratch / "stage_seconds.json").read_text())
            else:
                entry["dropped"] = check_prepared(result["stdout"])[1].get("dropped")
            results[mode].append(entry)
            print(f"round {round_index + 1} {mode}: {json.dumps(entry)}", file=sys.stderr)
            shutil.rmtree(scratch, ignore_errors=True)
    return timing_report(results, corpus, bands, rows, args)


def split_corpus(corpus: Path, out: Path, parts: int) -> None:
    """Cut the corpus into `parts` files of consecutive lines (datatrove parallelises over files)."""
    lines = corpus.read_bytes().splitlines(keepends=True)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    step = -(-len(lines) // parts)
    for part in range(parts):
        (tmp / f"{part:03d}.jsonl").write_bytes(b"".join(lines[part * step:(part + 1) * step]))
    os.replace(tmp, out)


def timing_report(results, corpus, bands, rows, args) -> str:
    size = corpus.stat().st_size / 2**20
    lines = [f"Corpus {corpus.name} ({size:.1f} MiB), {args.rounds} paired rounds (order alternating), 5-word shingles, "
             f"{bands} bands x {rows} rows; datatrove on {args.datatrove_shards} shards, tasks = workers = "
             f"{args.datatrove_shards}.", "", "| run | wall s (per round) | peak PSS MiB | removed |", "|---|---|---|---|"]
    for mode, entries in results.items():
        walls = ", ".join(f"{entry['wall_s']:.1f}" for entry in entries)
        peak = max(entry["peak_pss_mb"] for entry in entries)
        removed = entries[0].get("removed", entries[0].get("dropped"))
        label = {"none": "rankzero --dedup none", "near": "rankzero --dedup near",
                 "datatrove": "datatrove MinHash, 4 stages"}[mode]
        lines.append(f"| {label} | {walls} | {peak:.0f} | {removed} |")
    def paired(numerator: str, denominator: str, key: str) -> str:
        if numerator not in results or denominator not in results:
            return "-"
        values = [n[key] / d[key] for n, d in zip(results[numerator], results[denominator])]
        return f"{statistics.median(values):.2f} (rounds: {', '.join(f'{v:.2f}' for v in values)})"
    lines += ["", f"- near / none, wall: {paired('near', 'none', 'wall_s')}; peak PSS: {paired('near', 'none', 'peak_pss_mb')}",
              f"- datatrove / near, wall: {paired('datatrove', 'near', 'wall_s')}; peak PSS: "
              f"{paired('datatrove', 'near', 'peak_pss_mb')}"]
    if "datatrove" in results:
        stages = {key: statistics.median(entry["stages"][key] for entry in results["datatrove"])
                  for key in results["datatrove"][0]["stages"]}
        lines.append("- datatrove stage seconds (median): " + ", ".join(f"{k} {v:.1f}" for k, v in stages.items()))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("planted", "timing"), required=True)
    parser.add_argument("--workdir", type=Path, default=REPO / "bench" / "out" / "dedup")
    parser.add_argument("--real_dir", type=Path, default=REAL_DIR)
    parser.add_argument("--bench_mib", type=float, default=3.0, help="planted: bench-corpus share of the originals")
    parser.add_argument("--per_kind", type=int, default=300, help="planted: copies per kind")
    parser.add_argument("--size_mb", type=float, default=50.0, help="timing: corpus size")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tokenizer", type=Path, default=None, help="timing: HF tokenizer dir (default: train one)")
    parser.add_argument("--bands", type=int, default=None, help="default: rankzero's, else 14")
    parser.add_argument("--rows", type=int, default=None, help="default: rankzero's, else 8")
    parser.add_argument("--datatrove_python", type=Path, default=DEFAULT_DATATROVE_PYTHON)
    parser.add_argument("--datatrove_runs", nargs="+", default=None, metavar="WORDS:BANDSxROWS",
                        help="planted: datatrove runs, e.g. whitespace:20x6 kiwi:14x8 (words: whitespace or kiwi, "
                             "datatrove's Korean tokenizer); default: whitespace at rankzero's bands x rows")
    parser.add_argument("--datatrove_shards", type=int, default=2, help="timing: files and tasks for datatrove")
    parser.add_argument("--rankzero_repo", type=Path, default=REPO,
                        help="the rankzero checkout to measure (default: this one)")
    parser.add_argument("--skip_rankzero", action="store_true", help="datatrove and the generator only")
    args = parser.parse_args()
    sys.path.insert(0, str(args.rankzero_repo.resolve()))  # rankzero is imported (and train.py run) from there
    if not args.datatrove_python.is_file():
        raise SystemExit(f"--datatrove_python {args.datatrove_python}: not there (make the venv: see "
                         f"{DATATROVE_SCRIPT.relative_to(REPO)})")
    args.workdir.mkdir(parents=True, exist_ok=True)
    report = planted_part(args) if args.part == "planted" else timing_part(args)
    info = machine_info()
    print(f"\n{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {info['cpu']}, {info['cores']} usable "
          f"cores, {info['ram_gb']} GB RAM; command: python bench/dedup_bench.py {' '.join(sys.argv[1:])}\n")
    print(report)


if __name__ == "__main__":
    main()
