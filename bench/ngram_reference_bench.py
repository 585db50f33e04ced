"""Decontamination's pass in numpy (ngram_reference.scan_reference) against the compiled pass (ngram_scan.scan: passes.c).

    python bench/ngram_reference_bench.py --rounds 5 /work/shared/corpora/ko_real_dev/*.jsonl

One process. The texts are read, `prepare`d and turned into code points in batches of --batch texts first (not
counted); the library's load is paid by a first call on one text (not counted). Each round then times, in CPU seconds
of this process (time.process_time: the pass is single-threaded), --repeat passes of each path over every batch,
the paths in alternating order, and checks that both give the same hashes, marks and runs. MB are the texts' UTF-8 bytes.
Printed: per round both rates and their ratio, then the medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from rankzero.data.ngram_reference import scan_reference
from rankzero.data.ngram_scan import Bitmap, code_points, prepare, scan


def passes(function, batches, bitmap, repeat: int) -> tuple[float, list]:
    """CPU seconds per pass over all batches (the mean of `repeat`), and the last pass's results."""
    before = time.process_time()
    for _ in range(repeat):
        results = [function(codes, offsets, 8, 8, 4, bitmap) for codes, offsets in batches]
    return (time.process_time() - before) / repeat, results


def same(left, right) -> bool:
    return all(np.array_equal(a, b) for x, y in zip(left, right)
               for a, b in zip((*x[0], *x[1], *x[2:]), (*y[0], *y[1], *y[2:])))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=10, help="passes per path per round (a pass is ms)")
    parser.add_argument("--batch", type=int, default=1000, help="texts per call (the stage hands chunks over)")
    parser.add_argument("--bitmap", choices=["everything", "sparse"], default="sparse",
                        help="sparse: a bitmap of 10,000 random keys, as an index of benchmark items gives")
    args = parser.parse_args()
    texts = [json.loads(line)["text"] for path in args.files for line in open(path, encoding="utf-8") if line.strip()]
    megabytes = sum(len(text.encode("utf-8")) for text in texts) / 1e6
    batches = [code_points([prepare(text) for text in texts[start:start + args.batch]])
               for start in range(0, len(texts), args.batch)]
    bitmap = (Bitmap.everything() if args.bitmap == "everything"
              else Bitmap.of(np.random.default_rng(0).integers(0, 2**63, 10_000, dtype=np.uint64)))
    scan(*code_points(["하나 둘 셋"]), 8, 8, 4, bitmap)  # the compiled library and the tables: paid once per process
    scan_reference(*code_points(["하나 둘 셋"]), 8, 8, 4, bitmap)
    print(f"{len(texts)} texts, {megabytes:.2f} MB, batches of {args.batch}, bitmap {args.bitmap}")
    rates = {"kernel": [], "numpy": [], "ratio": []}
    for round_ in range(args.rounds):
        order = [("kernel", scan), ("numpy", scan_reference)][::1 if round_ % 2 == 0 else -1]
        seconds, results = {}, {}
        for name, function in order:
            seconds[name], results[name] = passes(function, batches, bitmap, args.repeat)
        assert same(results["kernel"], results["numpy"]), "the paths differ"
        for name in ("kernel", "numpy"):
            rates[name].append(megabytes / seconds[name])
        rates["ratio"].append(rates["numpy"][-1] / rates["kernel"][-1])
        print(f"round {round_}: kernel {rates['kernel'][-1]:.1f} MB/s, numpy {rates['numpy'][-1]:.1f} MB/s, "
              f"numpy/kernel {rates['ratio'][-1]:.2f}")
    print(f"median: kernel {statistics.median(rates['kernel']):.1f} MB/s, numpy {statistics.median(rates['numpy']):.1f}"
          f" MB/s, numpy/kernel {statistics.median(rates['ratio']):.2f} (CPU-s of one process, equal results)")


if __name__ == "__main__":
    main()
