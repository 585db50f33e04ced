"""The per-character passes (rankzero/data/passes.c through native.py) against another checkout's, e.g. the numba
kernels they replaced: what a process pays to start them, and their speed on real Korean.

    python bench/passes_bench.py --baseline_repo <checkout of f788cdd> --rounds 3 \
        --texts /work/real_ko/petitions.jsonl /work/shared/corpora/ko_real_dev/*.jsonl

Each measurement is a fresh process of the checkout measured (its own rankzero on PYTHONPATH), the checkouts in
alternating order each round:
  - start: CPU seconds from after `import numpy` to the end of each pass's first call on one text (rankzero's
    imports, the tables, the compiled code loaded), and the process's max RSS then;
  - load: wall milliseconds of the library's load alone, where the checkout has native.py (cached build);
  - MB/s per core of process time, best of 5 over the texts in batches of 1,000: near dedup's shingle hashes
    (kernel.shingle_hashes), decontamination's scan of `prepare`d text (ngram_scan.scan), and where the checkout
    has them scan_texts (the same from the text as read) and marks_of (the masker's marks alone).
MB are the texts' UTF-8 bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

MEASURE = r"""
import json, resource, sys, time
import numpy as np
before = time.process_time()
from rankzero.data.dedup import kernel
from rankzero.data import ngram_scan as n
kernel.shingle_hashes(["하나 둘 셋 넷 다섯 여섯"])
n.scan(*n.code_points(["하나 둘 셋"]), 8, 8, 4, n.Bitmap.everything())
result = {"start_cpu_s": time.process_time() - before,
          "start_max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
try:
    from rankzero.data import native
    native.library.cache_clear()
    started = time.perf_counter()
    native.library()
    result["load_ms"] = 1000 * (time.perf_counter() - started)
except ImportError:
    pass
texts = [json.loads(line)["text"] for path in sys.argv[1:] for line in open(path, encoding="utf-8") if line.strip()]
megabytes = sum(len(text.encode()) for text in texts) / 1e6
batches = [texts[start:start + 1000] for start in range(0, len(texts), 1000)]
prepared = [n.code_points([n.prepare(text) for text in batch]) for batch in batches]
bitmap = n.Bitmap.of(np.random.default_rng(0).integers(0, 2**63, 10_000, dtype=np.uint64))
passes = {"shingles": lambda: [kernel.shingle_hashes(batch) for batch in batches],
          "scan": lambda: [n.scan(codes, offsets, 8, 8, 4, bitmap) for codes, offsets in prepared]}
if hasattr(n, "scan_texts"):
    passes["scan_texts"] = lambda: [n.scan_texts(batch, 8, 8, 4, bitmap) for batch in batches]
    passes["marks_of"] = lambda: [n.marks_of(batch) for batch in batches]
for name, run in passes.items():
    best = float("inf")
    for _ in range(5):
        started = time.process_time()
        run()
        best = min(best, time.process_time() - started)
    result[f"{name}_mb_s"] = megabytes / best
print(json.dumps(result))
"""


def measure(repo: Path, texts: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": str(repo)}
    done = subprocess.run([sys.executable, "-c", MEASURE, *texts], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=1800)
    if done.returncode:
        raise SystemExit(f"the measurement in {repo} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", nargs="+", required=True, help="JSONL files with a text field (real Korean)")
    parser.add_argument("--baseline_repo", type=Path, required=True, help="the other checkout, e.g. before a change")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    commit = {repo: subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True,
                                   text=True).stdout.strip() for repo in (REPO, args.baseline_repo)}
    rows = {REPO: [], args.baseline_repo: []}
    for round_ in range(args.rounds):
        for repo in (REPO, args.baseline_repo) if round_ % 2 == 0 else (args.baseline_repo, REPO):
            rows[repo].append(measure(repo, args.texts))
        print(f"round {round_}: " + "; ".join(f"{commit[repo]} {rows[repo][-1]}" for repo in rows), file=sys.stderr)
    keys = sorted({key for results in rows.values() for row in results for key in row})
    print(f"| checkout | {' | '.join(keys)} |")
    print("|---|" + "---:|" * len(keys))
    for repo, results in rows.items():
        cells = [f"{statistics.median(row[key] for row in results):.3f}" if key in results[0] else "—" for key in keys]
        print(f"| {commit[repo]} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
