"""Scores the Korean quality filter on the labelled sample; the tool its thresholds were tuned with.

    python bench/quality_eval.py                          # per-kind kept/dropped + the two headline rates
    python bench/quality_eval.py --errors                 # also print every misjudged document
    python bench/quality_eval.py --stats                  # per-label spread of every statistic (for tuning)
    python bench/quality_eval.py --config my.yaml         # thresholds from a YAML file
    python bench/quality_eval.py --throughput             # judge_batch vs raw Kiwi on the Korean documents

Headline rates: clean kept = clean documents with no reason / all clean; junk dropped = junk documents
with a reason / all junk. The throughput baseline is one `kiwi.split_into_sents(text, return_tokens=True)`
per Korean document on a Kiwi built the same way (num_workers=0), single process, same documents.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rankzero.data.quality import QualityConfig, QualityFilter  # noqa: E402

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "quality_sample.jsonl"


def load_sample(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def evaluate(quality: QualityFilter, records: list[dict]) -> dict:
    """Reasons per record, per-kind tallies and the two headline rates."""
    reasons = quality.judge_batch([record["text"] for record in records])
    per_kind = defaultdict(Counter)
    for record, reason in zip(records, reasons):
        per_kind[(record["label"], record["kind"])][reason or "kept"] += 1
    clean = [reason for record, reason in zip(records, reasons) if record["label"] == "clean"]
    junk = [reason for record, reason in zip(records, reasons) if record["label"] == "junk"]
    return {
        "reasons": reasons,
        "per_kind": per_kind,
        "clean_kept": sum(reason is None for reason in clean) / len(clean),
        "junk_dropped": sum(reason is not None for reason in junk) / len(junk),
        "clean_total": len(clean),
        "junk_total": len(junk),
    }


def print_report(result: dict) -> None:
    print(f"{'label':6} {'kind':18} {'docs':>5} {'kept':>5} {'dropped':>7}  reasons")
    for (label, kind), counts in sorted(result["per_kind"].items()):
        total = sum(counts.values())
        kept = counts.get("kept", 0)
        reasons = ", ".join(f"{reason} {count}" for reason, count in counts.most_common() if reason != "kept")
        print(f"{label:6} {kind:18} {total:5d} {kept:5d} {total - kept:7d}  {reasons}")
    print(f"clean kept: {result['clean_kept']:.1%} of {result['clean_total']}   "
          f"junk dropped: {result['junk_dropped']:.1%} of {result['junk_total']}")


def print_errors(records: list[dict], reasons: list) -> None:
    for record, reason in zip(records, reasons):
        wrong = (record["label"] == "clean") == (reason is not None)
        if wrong:
            preview = record["text"][:160].replace("\n", " / ")
            print(f"[{record['label']}/{record['kind']}] -> {reason or 'kept'}: {preview}")


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


def measure_throughput(quality: QualityFilter, records: list[dict], repeats: int) -> None:
    """Characters per second of judge_batch vs raw Kiwi on Korean documents (single process).

    Two document sets: the clean Korean ones (every one reaches Kiwi, so the difference is our own
    per-token work plus the cheap checks) and all Korean ones (junk that the cheap checks drop never
    reaches Kiwi, which is where the filter saves time).
    """
    korean = [record for record in records if quality.statistics(record["text"])["korean"]]
    sets = {"clean korean": [record["text"] for record in korean if record["label"] == "clean"],
            "all korean": [record["text"] for record in korean]}
    kiwi = quality._kiwi  # the same Kiwi object: the baseline differs only in what we do around it

    def best_of_three(work) -> float:
        timings = []
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(repeats):
                work()
            timings.append(time.perf_counter() - start)
        return min(timings)

    for name, texts in sets.items():
        characters = sum(len(text) for text in texts) * repeats
        raw_s = best_of_three(lambda: [kiwi.split_into_sents(text, return_tokens=True) for text in texts])
        stats_s = best_of_three(lambda: [quality.kiwi_statistics(text) for text in texts])
        judge_s = best_of_three(lambda: quality.judge_batch(texts))
        print(f"{name}: {len(texts)} docs x {repeats}, {characters} chars (best of 3)")
        print(f"  raw kiwi.split_into_sents : {raw_s:6.2f} s {characters / raw_s:9.0f} chars/s")
        print(f"  kiwi_statistics           : {stats_s:6.2f} s {characters / stats_s:9.0f} chars/s "
              f"({stats_s / raw_s:.2f}x raw)")
        print(f"  judge_batch (all checks)  : {judge_s:6.2f} s {characters / judge_s:9.0f} chars/s "
              f"({judge_s / raw_s:.2f}x raw)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sample", type=Path, default=SAMPLE)
    parser.add_argument("--config", help="YAML thresholds (default: the dataclass defaults)")
    parser.add_argument("--errors", action="store_true", help="print every misjudged document")
    parser.add_argument("--stats", action="store_true", help="print the spread of every statistic")
    parser.add_argument("--throughput", action="store_true", help="time judge_batch against raw Kiwi")
    parser.add_argument("--repeats", type=int, default=3, help="passes over the documents per throughput timing")
    args = parser.parse_args()

    config = QualityConfig.from_yaml(args.config) if args.config else QualityConfig()
    quality = QualityFilter(config)
    records = load_sample(args.sample)
    result = evaluate(quality, records)
    print_report(result)
    if args.errors:
        print_errors(records, result["reasons"])
    if args.stats:
        print_statistics(quality, records)
    if args.throughput:
        measure_throughput(quality, records, args.repeats)


if __name__ == "__main__":
    main()
