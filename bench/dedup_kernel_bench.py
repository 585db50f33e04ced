"""Near dedup's word 5-gram hashes: the compiled pass (dedup/kernel.py) against the numpy path (dedup/shingles.py).

    python bench/dedup_kernel_bench.py --real_dir /work/real_ko --rounds 5

Each measurement is a fresh process (the costs paid once per process are the point): CPU seconds of
  - start: what a process pays before its first hash (numpy: the fold table; the kernel: the compiled library
    loaded (native.py), the tables), measured as the first call on one text;
  - first pass / second pass over the corpus's texts in batches of 1,000 (as the stage hands them over).
The kernel is measured with the library built (a run before builds it) and, once per round, cold (an empty
RANKZERO_KERNEL_CACHE: passes.c compiled and the tables built). Both paths' hashes are compared. Rounds alternate the order; the
figures are medians. The markdown printed at the end is ready for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

from _measure import machine_info, run_measured  # noqa: E402

MEASURE = """
import hashlib, json, sys, time
import numpy  # both paths need it: not counted
texts = [json.loads(line)["text"] for path in sys.argv[2:] for line in open(path, encoding="utf-8") if line.strip()]
batches = [texts[start:start + 1000] for start in range(0, len(texts), 1000)]
before = time.process_time()
if sys.argv[1] == "numpy":
    from rankzero.data.dedup.shingles import numpy_shingle_hashes as hashes
else:
    from rankzero.data.dedup.kernel import shingle_hashes as hashes
hashes(["하나 둘 셋 넷 다섯 여섯"])
start = time.process_time() - before
passes, digest = [], hashlib.sha256()
for _ in range(2):
    before = time.process_time()
    for batch in batches:
        flat, counts = hashes(batch)
        if not passes:
            digest.update(flat.tobytes())
            digest.update(counts.tobytes())
    passes.append(time.process_time() - before)
print(json.dumps({"start": start, "first": passes[0], "second": passes[1], "chars": sum(map(len, texts)),
                  "digest": digest.hexdigest()}))
"""


def measure(path: str, files: list[Path], env: dict | None = None) -> dict:
    result = run_measured([sys.executable, "-c", MEASURE, path, *map(str, files)], cwd=str(REPO),
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})
    if result["returncode"]:
        raise SystemExit(f"the measurement failed ({path}):\n{result['stderr'][-3000:]}")
    return json.loads(result["stdout"].strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--real_dir", type=Path, required=True, help="a directory of real Korean JSONL (text field)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    files = sorted(args.real_dir.glob("*.jsonl"))
    if not files:
        raise SystemExit(f"--real_dir {args.real_dir}: no *.jsonl files there")
    started = datetime.datetime.now(datetime.timezone.utc)
    measure("kernel", files)  # the library built: the warm runs below load it
    results = {"numpy": [], "kernel": [], "kernel, cold cache": []}
    for round_index in range(args.rounds):
        order = ["numpy", "kernel"] if round_index % 2 == 0 else ["kernel", "numpy"]
        for path in order:
            results[path].append(measure(path, files))
        with tempfile.TemporaryDirectory() as cold:
            results["kernel, cold cache"].append(measure("kernel", files, {"RANKZERO_KERNEL_CACHE": cold}))
        print(f"round {round_index}: " + ", ".join(f"{name} start {rows[-1]['start']:.3f} first {rows[-1]['first']:.3f} "
                                                  f"second {rows[-1]['second']:.3f}" for name, rows in results.items()),
              file=sys.stderr)
    digests = {row["digest"] for rows in results.values() for row in rows}
    chars = results["numpy"][0]["chars"]
    print(f"\n{started:%Y-%m-%d %H:%M} UTC, {machine_info()}, {args.rounds} rounds, {len(files)} files, "
          f"{chars:,} characters; the same hashes on every path: {len(digests) == 1}\n")
    print("| path | start CPU-s | first pass CPU-s | second pass CPU-s | ns / character (second pass) |")
    print("|---|---:|---:|---:|---:|")
    for name, rows in results.items():
        median = {key: statistics.median(row[key] for row in rows) for key in ("start", "first", "second")}
        print(f"| {name} | {median['start']:.3f} | {median['first']:.3f} | {median['second']:.3f} | "
              f"{1e9 * median['second'] / chars:.1f} |")


if __name__ == "__main__":
    main()
