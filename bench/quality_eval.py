"""Scores the Korean quality filter: keep rates on real Korean per genre, drop rates per junk kind,
mojibake repair, agreement of Kiwi's sampled reading with whole documents, and throughput.

    python bench/quality_eval.py                 # labelled sample per kind, real Korean per genre, mojibake
    python bench/quality_eval.py --errors        # also print every misjudged document
    python bench/quality_eval.py --stats         # per-label spread of every statistic (for tuning)
    python bench/quality_eval.py --agreement     # sampled Kiwi reading vs whole documents (sample, dev, bench corpus)
    python bench/quality_eval.py --throughput --real ../real_ko ../statutes --against ../base-bec9da6
        # CPU-s per GB of the quality stage and of the whole prepare with and without the filter, and the
        # verdicts against another checkout's filter, on every real corpus (bench/quality_cost.py)
    python bench/quality_eval.py --breakdown [JSONL ...]  # CPU per GB by genre (default --dev's files): Kiwi / rules
    python bench/quality_eval.py --kiwi_options  # Kiwi's own speed settings: chars/s, and do verdicts change
    python bench/quality_eval.py --files "src/**/*.py" "docs/*.md"   # local code and prose, per extension
    python bench/quality_eval.py --prepare_against ../base --size_mb 20 --rounds 3
        # the filtered prepare (train.py --tokenize_only --quality_filter ko) of this checkout against
        # another one (a worktree of an older commit), same corpus and tokenizer, alternating in each round

`--dev DIR` is the real Korean development corpus, JSONL files with `text` (and `genre`), read where it
lies (default ../shared/corpora/ko_real_dev beside the repository) and never copied. The bench corpus
is scripts/make_corpus.py's (seeded), as bench/prep_bench.py uses it. Mojibake is made here from the
clean Korean documents (UTF-8 read as Latin-1, as cp1252 the way browsers decode it, twice, or in one
line only): repair must give back the original exactly, and with `repair_mojibake: false` all of it
must go. Timings alternate the systems within each round; ratios are medians of per-round ratios.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(REPO))

from rankzero.data.quality import QualityConfig, QualityFilter  # noqa: E402
from rankzero.data.quality import korean, words  # noqa: E402

SAMPLE = REPO / "data" / "quality_sample.jsonl"
DEV = REPO.parent / "shared" / "corpora" / "ko_real_dev"
# Junk that reads as fluent Korean sentence by sentence (an ad, shuffled words); reported apart.
FLUENT_JUNK = ("ad_copy", "shuffled_words")
MACHINE_KINDS = ("base64", "hex", "uuencode", "long_tokens", "minified", "mojibake_euckr")


def load_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def load_dev(directory: Path) -> list[dict]:
    records = []
    for path in sorted(directory.glob("*.jsonl")):
        records += [{"genre": record.get("genre", path.stem), "text": record["text"]} for record in load_jsonl(path)]
    return records


def bench_corpus(size_mb: float, seed: int, workdir: Path) -> Path:
    from scripts.make_corpus import generate

    path = workdir / f"corpus-{size_mb:g}mb-seed{seed}.jsonl"
    generate(int(size_mb * 2**20), path, seed)
    return path


def whole_document(quality: QualityFilter) -> QualityFilter:
    """The same thresholds, Kiwi reading every document whole."""
    return quality.with_config(dataclasses.replace(quality.config, kiwi_max_chars=10**9, kiwi_recheck_max_chars=10**9))


def rate(part: int, whole: int) -> str:
    return f"{part / whole:.1%} ({part}/{whole})" if whole else "—"


# --- keep and drop rates -------------------------------------------------------------------------------


def report_sample(quality: QualityFilter, records: list[dict], show_errors: bool) -> None:
    reasons = quality.judge_batch([record["text"] for record in records])
    per_kind = defaultdict(Counter)
    for record, reason in zip(records, reasons):
        per_kind[(record["label"], record["kind"])][reason or "kept"] += 1
    print("## Labelled sample (data/quality_sample.jsonl)\n")
    print("| label | kind | docs | kept | reasons |\n|---|---|---:|---:|---|")
    for (label, kind), counts in sorted(per_kind.items()):
        reasons_text = ", ".join(f"{reason} {count}" for reason, count in counts.most_common() if reason != "kept")
        print(f"| {label} | {kind} | {sum(counts.values())} | {counts.get('kept', 0)} | {reasons_text} |")
    labelled = list(zip(records, reasons))

    def dropped(kinds) -> str:
        chosen = [reason for record, reason in labelled if record["label"] == "junk" and kinds(record["kind"])]
        return rate(sum(reason is not None for reason in chosen), len(chosen))

    clean = [reason for record, reason in labelled if record["label"] == "clean"]
    print(f"\nclean kept: {rate(sum(reason is None for reason in clean), len(clean))}; junk dropped: "
          f"{dropped(lambda kind: True)} — machine text {dropped(lambda kind: kind in MACHINE_KINDS)}, fluent junk "
          f"({', '.join(FLUENT_JUNK)}) {dropped(lambda kind: kind in FLUENT_JUNK)}\n")
    if show_errors:
        for record, reason in labelled:
            if (record["label"] == "clean") == (reason is not None):
                print(f"[{record['label']}/{record['kind']}] -> {reason or 'kept'}: "
                      f"{record['text'][:160]!r}")


def report_dev(quality: QualityFilter, records: list[dict], show_errors: bool, where: Path) -> None:
    reasons = quality.judge_batch([record["text"] for record in records])
    per_genre = defaultdict(Counter)
    for record, reason in zip(records, reasons):
        per_genre[record["genre"]][reason or "kept"] += 1
    print(f"## Real Korean, {where}\n")
    print("| genre | docs | kept | dropped, by reason |\n|---|---:|---:|---|")
    for genre, counts in sorted(per_genre.items()):
        total = sum(counts.values())
        dropped = ", ".join(f"{reason} {count}" for reason, count in counts.most_common() if reason != "kept")
        print(f"| {genre} | {total} | {rate(counts.get('kept', 0), total)} | {dropped or '—'} |")
    kept = sum(reason is None for reason in reasons)
    shapes = [words.statistics(record["text"], quality.config) for record in records]
    means = [shape["mean_word_chars"] for shape in shapes]
    print(f"\nall genres: kept {rate(kept, len(records))}; word shape: mean word chars {min(means):.1f}-{max(means):.1f}, "
          f"long-word share max {max(shape['long_word_char_share'] for shape in shapes):.2f}, encoded share max "
          f"{max(shape['encoded_char_share'] for shape in shapes):.2f}\n")
    if show_errors:
        for record, reason in zip(records, reasons):
            if reason:
                print(f"[{record['genre']}] -> {reason}: {record['text'][:200]!r}")


# --- mojibake ------------------------------------------------------------------------------------------


def _cp1252_as_browsers(data: bytes) -> str:
    return "".join(chr(byte) if byte in (0x81, 0x8D, 0x8F, 0x90, 0x9D) else bytes([byte]).decode("cp1252")
                   for byte in data)


def _first_line_only(text: str) -> str:
    head, newline, rest = text.partition("\n")
    return head.encode("utf-8").decode("latin-1") + newline + rest


MOJIBAKE = {
    "UTF-8 read as Latin-1": lambda text: text.encode("utf-8").decode("latin-1"),
    "UTF-8 read as cp1252 (browsers)": lambda text: _cp1252_as_browsers(text.encode("utf-8")),
    "UTF-8 read as Latin-1 twice": lambda text: (text.encode("utf-8").decode("latin-1")
                                                 .encode("utf-8").decode("latin-1")),
    "one line read as Latin-1": _first_line_only,
    "EUC-KR read as Latin-1 (not repairable)": lambda text: text.encode("cp949", errors="replace").decode("latin-1"),
}


def report_mojibake(quality: QualityFilter, texts: list[str]) -> None:
    dropping = quality.with_config(dataclasses.replace(quality.config, repair_mojibake=False))
    expected = quality.judge_batch(texts)
    print(f"## Mojibake made from {len(texts)} clean Korean documents\n")
    print("| mojibake | repaired to the exact original, same verdict | dropped (`repair_mojibake: false`) | "
          "dropped (default) |\n|---|---:|---:|---:|")
    for name, make in MOJIBAKE.items():
        # Documents whose first line is ASCII have no "one line" mojibake: only broken ones count.
        pairs = [(make(text), text, want) for text, want in zip(texts, expected) if make(text) != text]
        broken = [pair[0] for pair in pairs]
        reasons, repaired = quality.judge_and_repair(broken)
        exact = sum(after == before and reason == want
                    for after, (_, before, want), reason in zip(repaired, pairs, reasons))
        dropped_off = sum(reason == "mojibake" for reason in dropping.judge_batch(broken))
        dropped_on = sum(reason == "mojibake" for reason in reasons)
        print(f"| {name} | {rate(exact, len(pairs))} | {rate(dropped_off, len(pairs))} | "
              f"{rate(dropped_on, len(pairs))} |")
    changed = sum(after is not before for after, before in zip(quality.judge_and_repair(texts)[1], texts))
    print(f"\nclean documents the repair changed: {changed} of {len(texts)}\n")


# --- agreement -----------------------------------------------------------------------------------------


def report_agreement(quality: QualityFilter, sets: dict[str, list[str]]) -> None:
    whole = whole_document(quality)
    config = quality.config
    print(f"## Kiwi's sampled reading ({config.kiwi_windows} windows, {config.kiwi_max_chars} chars; the whole, up "
          f"to {config.kiwi_recheck_max_chars}, near a threshold) against whole documents\n")
    print("| documents | docs | same keep/drop | same reason | differing |\n|---|---:|---:|---:|---|")
    for name, texts in sets.items():
        sampled, reference = quality.judge_batch(texts), whole.judge_batch(texts)
        same_verdict = sum((a is None) == (b is None) for a, b in zip(sampled, reference))
        same_reason = sum(a == b for a, b in zip(sampled, reference))
        differing = Counter(f"{b or 'kept'} → {a or 'kept'}" for a, b in zip(sampled, reference) if a != b)
        print(f"| {name} | {len(texts)} | {rate(same_verdict, len(texts))} | {rate(same_reason, len(texts))} | "
              f"{', '.join(f'{k} ({v})' for k, v in differing.most_common()) or '—'} |")
    # What korean.SAMPLE_MARGINS rest on: how far a sample's statistics fall from the whole document's.
    names = list(korean.SAMPLE_MARGINS)
    deviations, reread, sampled_docs = defaultdict(list), 0, 0
    for text in (text.strip() for texts in sets.values() for text in texts):
        if len(text) <= config.kiwi_max_chars:
            continue
        part = quality.statistics(text)
        if not part["korean"] or "prose_share" not in part:
            continue
        full = whole.statistics(text)
        sampled_docs += 1
        reread += bool(korean.kiwi_reason(part, config) or korean.near_threshold(part, config))
        for name in names:
            deviations[name].append(abs(part[name] - full[name]))
    print(f"\n{sampled_docs} Korean documents longer than the sample; the filter re-reads {rate(reread, sampled_docs)} "
          f"of them whole. |sample - whole|, and the margin korean.SAMPLE_MARGINS keeps from each threshold:\n")
    print("| statistic | p90 | p99 | max | margin |\n|---|---:|---:|---:|---:|")
    for name in names:
        values = sorted(deviations[name])
        if values:
            pick = lambda share: values[min(len(values) - 1, int(share * len(values)))]  # noqa: E731
            print(f"| {name} | {pick(0.9):.3f} | {pick(0.99):.3f} | {values[-1]:.3f} | {korean.SAMPLE_MARGINS[name]} |")
    print()


# --- throughput ----------------------------------------------------------------------------------------


def file_documents(patterns: list[str]) -> dict[str, list[str]]:
    """Local files cut at line breaks into documents of 200-5000 characters (as the development corpus
    is), grouped by file extension: real source code and prose the filter must keep, read in place."""
    import glob

    groups = defaultdict(list)
    for pattern in patterns:
        for path in sorted(glob.glob(pattern, recursive=True)):
            try:
                text = Path(path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            piece: list[str] = []
            size = 0
            for line in text.splitlines(keepends=True):
                piece.append(line)
                size += len(line)
                if size >= 5000 - 200 or (size >= 2000 and not line.strip()):
                    groups[Path(path).suffix or Path(path).name].append("".join(piece))
                    piece, size = [], 0
            if size >= 200:
                groups[Path(path).suffix or Path(path).name].append("".join(piece))
    return groups


def report_files(quality: QualityFilter, groups: dict[str, list[str]]) -> None:
    print("## Local files (--files), per extension\n")
    print("| extension | docs | kept | dropped, by reason | mean word chars min / p99 / max | long-word share max | "
          "encoded share max |\n|---|---:|---:|---|---|---:|---:|")
    for extension, texts in sorted(groups.items()):
        reasons = quality.judge_batch(texts)
        counts = Counter(reason for reason in reasons if reason)
        stats = [words.statistics(text, quality.config) for text in texts]
        means = sorted(stat["mean_word_chars"] for stat in stats)
        print(f"| {extension} | {len(texts)} | {rate(reasons.count(None), len(texts))} | "
              f"{', '.join(f'{k} {v}' for k, v in counts.most_common()) or '—'} | "
              f"{means[0]:.1f} / {means[int(0.99 * (len(means) - 1))]:.1f} / {means[-1]:.1f} | "
              f"{max(stat['long_word_char_share'] for stat in stats):.2f} | "
              f"{max(stat['encoded_char_share'] for stat in stats):.2f} |")
    print()


def report_kiwi_options(quality: QualityFilter, texts: list[str], rounds: int) -> None:
    """Kiwi's own speed settings on the samples the filter reads: chars/s of one Kiwi without a pool,
    alternating settings within each round, and whether the filter's verdicts change."""
    from kiwipiepy import Kiwi

    config = quality.config
    samples = [korean.kiwi_sample(text.strip(), config.kiwi_max_chars, config.kiwi_windows) for text in texts]
    characters = sum(map(len, samples))
    kiwis = {"default (CoNg)": quality._kiwi}
    for name, options in {"no typo, default, multi dictionaries": dict(load_typo_dict=False, load_default_dict=False,
                                                                        load_multi_dict=False),
                          "model_type cong-global": dict(model_type="cong-global")}.items():
        kiwis[name] = Kiwi(num_workers=0, **options)
    settings = [(name, kiwi, {}, None) for name, kiwi in kiwis.items()]
    settings += [("z_coda=False", quality._kiwi, {"z_coda": False}, None),
                 ("cutoff_threshold 4 (default 8)", quality._kiwi, {}, 4.0),
                 ("cutoff_threshold 2", quality._kiwi, {}, 2.0)]
    seconds = defaultdict(list)
    verdicts = {}
    reference = quality.judge_batch(texts)
    for round_index in range(rounds):
        for name, kiwi, options, cutoff in (settings if round_index % 2 == 0 else settings[::-1]):
            kiwi.global_config.cutoff_threshold = cutoff or 8.0
            start = time.perf_counter()
            for sample in samples:
                kiwi.tokenize(sample, **options)
            seconds[name].append(time.perf_counter() - start)
            if cutoff and name not in verdicts:
                verdicts[name] = quality.judge_batch(texts)
            kiwi.global_config.cutoff_threshold = 8.0
    print(f"## Kiwi settings, {len(samples)} samples ({characters:,} chars) of the bench corpus, one thread, "
          f"{rounds} rounds\n")
    print("| setting | chars/s | ÷ default (median of per-round) | keep/drop as the default |\n|---|---:|---:|---:|")
    for name, _, _, _ in settings:
        ratio = statistics.median(d / s for d, s in zip(seconds["default (CoNg)"], seconds[name]))
        same = (rate(sum((a is None) == (b is None) for a, b in zip(verdicts[name], reference)), len(texts))
                if name in verdicts else "—")
        print(f"| {name} | {characters / statistics.median(seconds[name]):,.0f} | {ratio:.2f} | {same} |")
    print()


# --- tuning --------------------------------------------------------------------------------------------


def print_statistics(quality: QualityFilter, records: list[dict]) -> None:
    """Min / 5th percentile / median / 95th percentile / max of every statistic, per label and language."""
    groups = defaultdict(lambda: defaultdict(list))
    for record in records:
        stats = quality.statistics(record["text"])
        group = f"{record['label']}-{'ko' if stats['korean'] else 'other'}"
        for name, value in stats.items():
            if name != "korean":
                groups[group][name].append(float(value))
    for group, table in sorted(groups.items()):
        print(f"\n== {group} ({len(table['chars'])} docs)")
        for name, values in table.items():
            values.sort()
            pick = lambda share: values[min(len(values) - 1, int(share * len(values)))]  # noqa: E731
            print(f"  {name:30} min {values[0]:9.3f}  p5 {pick(0.05):9.3f}  median {statistics.median(values):9.3f}"
                  f"  p95 {pick(0.95):9.3f}  max {values[-1]:9.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sample", type=Path, default=SAMPLE)
    parser.add_argument("--dev", type=Path, default=DEV, help="real Korean JSONL files (text, genre)")
    parser.add_argument("--config", help="YAML thresholds (default: the dataclass defaults)")
    parser.add_argument("--errors", action="store_true", help="print every misjudged document")
    parser.add_argument("--stats", action="store_true", help="print the spread of every statistic")
    parser.add_argument("--agreement", action="store_true", help="sampled Kiwi reading against whole documents")
    parser.add_argument("--throughput", action="store_true",
                        help="CPU-s per GB of the quality stage and of the whole prepare; verdicts --against")
    parser.add_argument("--real", type=Path, nargs="*", default=[],
                        help="more real Korean: directories of JSONL files (scripts/real_korean_sets.py, korean_statutes.py)")
    parser.add_argument("--against", type=Path, help="--throughput: a checkout whose filter's verdicts to compare")
    parser.add_argument("--prepare_against", type=Path, help="another checkout to time the filtered prepare against")
    parser.add_argument("--files", nargs="+", metavar="GLOB", help="also judge these local files (code, prose)")
    parser.add_argument("--breakdown", type=Path, nargs="*", metavar="JSONL", help="only CPU by genre: Kiwi/rules")
    parser.add_argument("--kiwi_options", action="store_true", help="time Kiwi's own settings on the filter's samples")
    parser.add_argument("--size_mb", type=float, default=5, help="bench corpus size for --agreement/--throughput")
    parser.add_argument("--seed", type=int, default=0, help="bench corpus seed")
    parser.add_argument("--rounds", type=int, default=3, help="rounds for --throughput and --prepare_against")
    parser.add_argument("--workdir", type=Path, default=BENCH / "out" / "quality")
    parser.add_argument("--timeout_s", type=float, default=3600)
    args = parser.parse_args()
    for checkout, flag in ((args.prepare_against, "--prepare_against"), (args.against, "--against")):
        if checkout and not (checkout / "train.py").is_file():
            parser.error(f"{flag} {checkout}: no train.py there (give a checkout of rankzero)")
    if args.breakdown is not None:
        import quality_cost

        return quality_cost.report_breakdown(args.breakdown or sorted(args.dev.glob("*.jsonl")), args.rounds,
                                             parser.error)

    config = QualityConfig.from_yaml(args.config) if args.config else QualityConfig()
    quality = QualityFilter(config)
    records = load_jsonl(args.sample)
    dev = load_dev(args.dev) if args.dev.is_dir() else []
    if not dev:
        print(f"(no development corpus at {args.dev}: pass --dev DIR)\n")
    report_sample(quality, records, args.errors)
    if dev:
        report_dev(quality, dev, args.errors, args.dev)
    clean_korean = [record["text"] for record in records
                    if record["label"] == "clean" and not record["kind"].startswith(("english", "code"))]
    report_mojibake(quality, clean_korean + [record["text"] for record in dev])
    if args.stats:
        print_statistics(quality, records)
    if args.files:
        report_files(quality, file_documents(args.files))
    corpus = None
    if args.agreement or args.throughput or args.prepare_against or args.kiwi_options:
        args.workdir.mkdir(parents=True, exist_ok=True)
        corpus = bench_corpus(args.size_mb, args.seed, args.workdir)
    if args.agreement:
        sets = {"labelled sample": [r["text"] for r in records]}
        if dev:
            sets["ko_real_dev"] = [r["text"] for r in dev]
        sets[f"bench corpus {args.size_mb:g} MiB"] = [r["text"] for r in load_jsonl(corpus)]
        report_agreement(quality, sets)
    if args.throughput:
        import quality_cost

        sets = quality_cost.corpora(args.sample, args.dev, args.real, corpus)
        quality_cost.report_verdicts(sets, args.against, args.workdir, args.rounds, args.timeout_s)
        quality_cost.report_prepare(sets, args.workdir, args.rounds, args.timeout_s)
    if args.kiwi_options:
        report_kiwi_options(quality, [r["text"] for r in load_jsonl(corpus)], args.rounds)
    if args.prepare_against:
        import quality_cost

        quality_cost.compare_prepare(args.prepare_against, corpus, args.workdir, args.rounds, args.timeout_s)


if __name__ == "__main__":
    main()
