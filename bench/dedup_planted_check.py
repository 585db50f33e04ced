"""Planted near-copies against rankzero's default alone (no datatrove venv needed): issue 30's acceptance lines.

    python bench/dedup_planted_check.py --real_dir ../shared/corpora/ko_real_dev --seeds 0 1 2

The corpus of bench/dedup_planted.py (real Korean + bench corpus originals, 300 copies of each of five kinds)
through `near_duplicate_indices` at the default `--dedup_threshold`. Reports the share of planted copies
removed (per kind) and the false removals: originals removed that share less than 0.5 of their word 5-grams
(true Jaccard, bench/dedup_planted.py's own normalisation) with every earlier document.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from dedup_planted import best_earlier_match, reference_shingles, write_planted  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--real_dir", type=Path, required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--bench_mib", type=float, default=3.0)
    parser.add_argument("--per_kind", type=int, default=300)
    args = parser.parse_args()
    from rankzero.config import DEFAULT_DEDUP_THRESHOLD
    from rankzero.data.dedup.near import near_duplicate_indices

    print(f"| seed | planted copies removed | per kind | originals removed | false removals (no earlier J >= 0.5) |")
    print("|---|---:|---|---:|---:|")
    for seed in args.seeds:
        corpus, label_path = write_planted(Path(tempfile.mkdtemp()), args.real_dir, args.bench_mib, args.per_kind, seed)
        texts = [json.loads(line)["text"] for line in open(corpus, encoding="utf-8")]
        labels = json.loads(label_path.read_text(encoding="utf-8"))
        removed = set(near_duplicate_indices(texts, DEFAULT_DEDUP_THRESHOLD))
        best = best_earlier_match([reference_shingles(text) for text in texts])
        copies = [i for i, label in enumerate(labels) if label["kind"] != "original"]
        originals = [i for i, label in enumerate(labels) if label["kind"] == "original"]
        kinds = collections.Counter(labels[i]["kind"] for i in copies)
        hit = collections.Counter(labels[i]["kind"] for i in copies if i in removed)
        false = [i for i in originals if i in removed and best[i][0] < 0.5]
        caught = len(removed.intersection(copies))
        print(f"| {seed} | {caught:,}/{len(copies):,} = {100 * caught / len(copies):.1f}% | "
              + ", ".join(f"{kind} {hit[kind]}/{count}" for kind, count in sorted(kinds.items()))
              + f" | {len(removed.intersection(originals))}/{len(originals):,} | {len(false)} = "
                f"{100 * len(false) / len(originals):.2f}% |")


if __name__ == "__main__":
    main()
