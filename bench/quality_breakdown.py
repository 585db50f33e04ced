"""Where the Korean quality filter's CPU time goes, per genre: Kiwi's analysis, the statistics computed from it, and
the rest (mojibake check, the cheap rule families, the surface cascade, the Python between them) (issue 48).

    python bench/quality_breakdown.py                                  # each ko_real_dev file (one genre each)
    python bench/quality_breakdown.py --corpus a.jsonl b.jsonl --rounds 5

One `QualityFilter` without a thread pool (one core, as bench/quality_cost.py times it) judges each file's texts in
this process, in rounds (the median is reported). Kiwi's `tokenize` and `korean.prose_statistics` are wrapped to add
up their own process CPU time; everything else in `judge_batch` is "the rest". Kiwi's model load and first call are
timed apart: every process that filters pays them once (each spawned worker too). Each genre is judged as shipped and
with `kiwi_cascade: false` (Kiwi reads every Korean document's sample, as it does where the surface statistics cannot
decide): text the surface cannot vouch for costs what the second row says.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))

DEV = REPO.parent / "shared" / "corpora" / "ko_real_dev"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, nargs="+", default=sorted(DEV.glob("*.jsonl")),
                        help="JSONL files of {text}, one genre each (default: ko_real_dev's)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    missing = [str(path) for path in args.corpus if not path.is_file()]
    if missing:
        parser.error(f"--corpus: no such file: {', '.join(missing)}")

    from rankzero.data.quality import QualityFilter, korean

    started = time.process_time()
    quality = QualityFilter()  # builds Kiwi and makes its first call (the lazy model load)
    load_s = time.process_time() - started
    spent = defaultdict(float)
    kiwi_chars = defaultdict(int)
    tokenize, prose_statistics = quality._kiwi.tokenize, korean.prose_statistics

    def timed_tokenize(text, *rest, **options):
        begin = time.process_time()
        try:
            return tokenize(text, *rest, **options)
        finally:
            spent["kiwi"] += time.process_time() - begin
            kiwi_chars["now"] += len(text)

    def timed_statistics(*values, **options):
        begin = time.process_time()
        try:
            return prose_statistics(*values, **options)
        finally:
            spent["statistics"] += time.process_time() - begin

    quality._kiwi.tokenize, korean.prose_statistics = timed_tokenize, timed_statistics
    filters = {"as shipped": quality,
               "kiwi_cascade: false": quality.with_config(dataclasses.replace(quality.config, kiwi_cascade=False))}
    rows = []
    for path in args.corpus:
        texts = [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        size = sum(len(text.encode("utf-8")) for text in texts)
        chars = sum(map(len, texts))
        for setting, judge in filters.items():
            measured = []
            for _ in range(args.rounds):
                spent.clear()
                kiwi_chars.clear()
                begin = time.process_time()
                verdicts = judge.judge_batch(texts)
                total = time.process_time() - begin
                measured.append((total, spent["kiwi"], spent["statistics"], kiwi_chars["now"]))
            total, kiwi, stats = (statistics.median(m[i] for m in measured) for i in range(3))
            rows.append((path.stem, setting, len(texts), size, total, kiwi, stats, measured[0][3] / chars,
                         sum(v is not None for v in verdicts), kiwi / max(measured[0][3], 1) * 1e6))
            print(f"{path.stem}, {setting}: {total:.2f} CPU-s", file=sys.stderr)
    print(f"Kiwi's build and first call: {load_s:.2f} CPU-s, once per filtering process.\n")
    print("| genre | filter | docs | MB | CPU-s per GB | Kiwi | statistics from Kiwi | the rest | characters Kiwi "
          "reads | Kiwi µs per character read | dropped |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, setting, docs, size, total, kiwi, stats, share, dropped, per_char in rows:
        print(f"| {name} | {setting} | {docs} | {size / 1e6:.2f} | {total / size * 1e9:,.0f} | "
              f"{kiwi / size * 1e9:,.0f} | {stats / size * 1e9:,.0f} | {(total - kiwi - stats) / size * 1e9:,.0f} | "
              f"{share:.0%} | {per_char:.1f} | {dropped} |")
    for setting in filters:
        mine = [row for row in rows if row[1] == setting]
        size, total, kiwi, stats = (sum(row[i] for row in mine) for i in (3, 4, 5, 6))
        print(f"| **all** | {setting} | {sum(row[2] for row in mine)} | {size / 1e6:.2f} | "
              f"**{total / size * 1e9:,.0f}** | {kiwi / size * 1e9:,.0f} | {stats / size * 1e9:,.0f} | "
              f"{(total - kiwi - stats) / size * 1e9:,.0f} | | | {sum(row[8] for row in mine)} |")


if __name__ == "__main__":
    main()
