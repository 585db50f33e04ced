"""The per-character passes (rankzero/data/native/passes.c, the extension setup.py builds) against their numpy
references, the path of an install without a C compiler: what a process pays to start them, their speed on real
Korean, equal outputs.

    python bench/kernels_bench.py --rounds 5 /work/shared/corpora/ko_real_dev/*.jsonl
    python bench/kernels_bench.py --rounds 3 --against ../main-before FILES...   # also another checkout's compiled

The passes: near dedup's word 5-gram hashes (dedup/kernel.shingle_hashes; numpy: dedup/shingles.py),
decontamination's scan of `prepare`d text (scan.scan; numpy: reference.scan_reference), the same from
the text as read (scan.scan_texts) and the masker's marks alone (scan.marks_of); the numpy path runs the references
of all four (RANKZERO_PASSES=numpy).
Each measurement is a fresh process with its checkout's rankzero on PYTHONPATH (the costs paid once per process
are the point), the paths in alternating order each round:
  - start: CPU seconds from after `import numpy` to the end of each pass's first call on one text (the imports,
    the tables, the extension loaded), and the process's max RSS then;
  - compiled, cold cache: the same with an empty RANKZERO_TABLE_CACHE (the tables built);
  - MB/s per core of process time, best of --repeat passes over the texts in batches of --batch (as the stage
    hands them over); MB are the texts' UTF-8 bytes. Decontamination's bitmap holds 10,000 random keys.
Every path's outputs are hashed: the line above the table says whether they are the same bit for bit.
Figures are medians over the rounds; "x numpy" is the median of the per-round ratios (the machine's load drifts).
The markdown printed at the end is ready for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

from _measure import machine_info  # noqa: E402

PASSES = ("shingles", "scan", "scan_texts", "marks_of")

MEASURE = r"""
import hashlib, json, os, resource, sys, time
import numpy as np
path, batch, repeat, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
before = time.process_time()
from rankzero.data.dedup import kernel, shingles
from rankzero.data.screen import scan as n, reference
if path == "numpy":
    os.environ["RANKZERO_PASSES"] = "numpy"  # as where the install built no extension: every pass's reference
    hashes, scan = shingles.numpy_shingle_hashes, reference.scan_reference
else:
    hashes, scan = kernel.shingle_hashes, n.scan
hashes(["하나 둘 셋 넷 다섯 여섯"])
scan(*n.code_points([n.prepare("하나 둘 셋")]), 8, 8, 4, n.Bitmap.everything())
n.scan_texts(["하나 둘 셋"], 8, 8, 4, n.Bitmap.everything())
n.marks_of(["하나 둘 셋"])
result = {"start_cpu_s": time.process_time() - before,
          "start_max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
texts = [json.loads(line)["text"] for name in files for line in open(name, encoding="utf-8") if line.strip()]
megabytes = sum(len(text.encode()) for text in texts) / 1e6
batches = [texts[start:start + batch] for start in range(0, len(texts), batch)]
prepared = [n.code_points([n.prepare(text) for text in chunk]) for chunk in batches]
bitmap = n.Bitmap.of(np.random.default_rng(0).integers(0, 2**63, 10_000, dtype=np.uint64))
passes = {"shingles": lambda: [hashes(chunk) for chunk in batches],
          "scan": lambda: [scan(codes, offsets, 8, 8, 4, bitmap) for codes, offsets in prepared],
          "scan_texts": lambda: [n.scan_texts(chunk, 8, 8, 4, bitmap) for chunk in batches],
          "marks_of": lambda: [n.marks_of(chunk) for chunk in batches]}

def arrays(value):
    if isinstance(value, np.ndarray):
        yield value
    else:
        for item in value:
            yield from arrays(item)

for name, run in passes.items():
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        outputs = run()
        best = min(best, time.process_time() - started)
    result[f"{name}_mb_s"] = megabytes / best
    digest = hashlib.sha256()
    for array in arrays(outputs):
        digest.update(np.ascontiguousarray(array).tobytes())
    result[f"{name}_digest"] = digest.hexdigest()
result.update(texts=len(texts), megabytes=megabytes)
print(json.dumps(result))
"""


def measure(checkout: Path, path: str, args: argparse.Namespace, env: dict | None = None) -> dict:
    done = subprocess.run([sys.executable, "-c", MEASURE, path, str(args.batch), str(args.repeat), *map(str, args.files)],
                          cwd=checkout, env={**os.environ, "PYTHONPATH": str(checkout), **(env or {})},
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"kernels_bench.py: the {path} measurement in {checkout} failed (exit {done.returncode}):\n"
                         f"{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def commit_of(checkout: Path) -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True, text=True)
    return done.stdout.strip() or checkout.name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=Path, help="JSONL files with a text field (real Korean)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=5, help="passes per measurement; the best one counts")
    parser.add_argument("--batch", type=int, default=1000, help="texts per call")
    parser.add_argument("--against", type=Path, default=None,
                        help="another rankzero checkout whose compiled passes run too (a change's before)")
    args = parser.parse_args()
    missing = [str(name) for name in args.files if not name.is_file()]
    if missing:
        parser.error(f"no such file: {', '.join(missing)}")
    if args.rounds < 1 or args.repeat < 1 or args.batch < 1:
        parser.error("--rounds, --repeat and --batch must be at least 1")
    if args.against is not None and not (args.against / "rankzero" / "data" / "screen" / "scan.py").is_file():
        parser.error(f"--against {args.against}: not a rankzero checkout with data/ in rooms "
                     "(no rankzero/data/screen/scan.py there)")
    args.files = [name.resolve() for name in args.files]  # the measurements run in each checkout's directory
    started = datetime.datetime.now(datetime.timezone.utc)
    runs = {"compiled": (REPO, "compiled"), "numpy": (REPO, "numpy")}
    if args.against is not None:
        runs[f"compiled at {commit_of(args.against.resolve())}"] = (args.against.resolve(), "compiled")
    for checkout, path in set(runs.values()):
        measure(checkout, path, args)  # each checkout's tables cached: the warm runs below read them
    results = {name: [] for name in (*runs, "compiled, cold cache")}
    for round_index in range(args.rounds):
        for name in list(runs)[::1 if round_index % 2 == 0 else -1]:
            results[name].append(measure(*runs[name], args))
        with tempfile.TemporaryDirectory() as cold:
            results["compiled, cold cache"].append(measure(REPO, "compiled", args, {"RANKZERO_TABLE_CACHE": cold}))
        print(f"round {round_index}: " + "; ".join(
            f"{name} start {rows[-1]['start_cpu_s']:.3f} CPU-s, "
            + ", ".join(f"{kind} {rows[-1][f'{kind}_mb_s']:.1f}" for kind in PASSES) for name, rows in results.items()),
            file=sys.stderr)
    same = {kind: len({row[f"{kind}_digest"] for rows in results.values() for row in rows}) == 1 for kind in PASSES}
    first = results["compiled"][0]
    info = machine_info()
    print(f"\n{started:%Y-%m-%d %H:%M} UTC, {info['cpu']}, {info['cores']} usable cores, {info['ram_gb']} GB RAM; "
          f"{commit_of(REPO)}; {args.rounds} rounds, {first['texts']:,} texts, {first['megabytes']:.2f} MB, batches "
          f"of {args.batch}; the same outputs on every path: "
          + ", ".join(f"{kind} {'yes' if equal else 'NO'}" for kind, equal in same.items()) + "\n")
    print("| path | start CPU-s | start max RSS MB | " + " | ".join(f"{kind} MB/s (x numpy)" for kind in PASSES) + " |")
    print("|---|---:|---:|" + "---:|" * len(PASSES))
    for name, rows in results.items():
        cells = [f"{statistics.median(row['start_cpu_s'] for row in rows):.3f}",
                 f"{statistics.median(row['start_max_rss_mb'] for row in rows):.0f}"]
        for kind in PASSES:
            key = f"{kind}_mb_s"
            ratio = statistics.median(row[key] / base[key] for row, base in zip(rows, results["numpy"]))
            cells.append(f"{statistics.median(row[key] for row in rows):.1f} ({ratio:.2f})")
        print(f"| {name} | {' | '.join(cells)} |")
    if not all(same.values()):
        raise SystemExit("kernels_bench.py: the paths' outputs differ (see the line above the table)")


if __name__ == "__main__":
    main()
