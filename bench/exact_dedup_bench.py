"""Exact dedup's state: sorted numpy runs (rankzero, dedup/exact.py) against the Python set they replace.

    python bench/exact_dedup_bench.py                                  # 2 M, 10 M, 30 M hashes, 3 paired rounds
    python bench/exact_dedup_bench.py --documents 1000000 --rounds 1   # a quick look
    python bench/exact_dedup_bench.py --documents 30000000 --rounds 1 \
        --candidates set runs runs-searchsorted runs-ratio-1                # the design's two choices

Candidates, each fed the same hashes in the same chunks, as split.py's `Holdout` feeds them:

  set                the implementation before (kept here as the baseline): a Python set of ints
  runs               rankzero.data.dedup.exact.ExactDuplicates: sorted uint64 runs with a directory each
  runs-searchsorted  the same runs looked up with np.searchsorted instead of their directories
  runs-ratio-1       the same with MERGE_RATIO 1 (merge while the older run is no larger): more runs

The hashes stand in for xxh3-64 of the texts: splitmix64 of a document's identity, a bijection, so two
documents share a hash only where planted. A share (`--repeats`, 5%) of the documents take the identity of
a uniformly drawn earlier one (in an earlier chunk or earlier in theirs), so are repeats unless that one
was itself a repeat. Hashes are made chunk by chunk (`--chunk`, 10,000), never held whole, so the memory
measured is the state's.

Every run is a fresh subprocess (a fresh heap; the set's memory is never given back to the OS). A round runs
both candidates on the same seed, the order alternating between rounds; ratios are per round (paired).
A child reports: the seconds spent in `keep` alone (hash generation not timed), its RSS before the first
chunk and its peak RSS (`resource.getrusage(RUSAGE_SELF).ru_maxrss`, read at its end), the state's bytes
per distinct hash (the set: `sys.getsizeof` of the set and of every int in it; the runs: their `nbytes`),
and how many documents it kept and the sum of their positions, which must agree between the candidates.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from _measure import machine_info  # noqa: E402

from rankzero.data.dedup import exact as duplicates  # noqa: E402

CANDIDATES = ("set", "runs", "runs-searchsorted", "runs-ratio-1")


class PythonSetBaseline:
    """dedup/exact.py before the runs (commit 2659820), verbatim but for the name."""

    def __init__(self):
        self.seen: set[int] = set()

    def keep(self, hashes: np.ndarray) -> np.ndarray:
        keep = np.ones(len(hashes), dtype=bool)
        seen = self.seen
        for index, digest in enumerate(hashes.tolist()):
            if digest in seen:
                keep[index] = False
            else:
                seen.add(digest)
        return keep


def splitmix64(values: np.ndarray) -> np.ndarray:
    """A bijection of uint64 that scatters consecutive identities over the whole range, like a text hash."""
    z = values + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def chunks(documents: int, chunk: int, repeats: float, seed: int):
    rng = np.random.default_rng(seed)
    for start in range(0, documents, chunk):
        identity = np.arange(start, min(start + chunk, documents), dtype=np.uint64)
        repeat = rng.random(len(identity)) < repeats
        repeat[identity == 0] = False  # the first document has nothing earlier to repeat
        identity[repeat] = rng.integers(0, identity[repeat])  # an earlier document, uniformly
        yield splitmix64(identity + np.uint64(seed) * np.uint64(2 ** 40))


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def searchsorted_contains(run: duplicates.SortedRun, keys: np.ndarray) -> np.ndarray:
    at = np.searchsorted(run.hashes, keys)
    return run.hashes[np.minimum(at, len(run.hashes) - 1)] == keys


def make(name: str):
    if name == "set":
        return PythonSetBaseline()
    if name == "runs-searchsorted":
        duplicates.SortedRun.contains = searchsorted_contains
    if name == "runs-ratio-1":
        duplicates.MERGE_RATIO = 1
    return duplicates.ExactDuplicates()


def state_bytes(candidate, name: str) -> int:
    if name == "set":
        return sys.getsizeof(candidate.seen) + sum(map(sys.getsizeof, candidate.seen))
    return sum(run.hashes.nbytes + run.starts.nbytes for run in candidate.runs)


def child(name: str, documents: int, chunk: int, repeats: float, seed: int) -> dict:
    candidate = make(name)
    start_mb = rss_mb()
    spent = 0.0
    kept = positions = 0
    for index, hashes in enumerate(chunks(documents, chunk, repeats, seed)):
        started = time.perf_counter()
        keep = candidate.keep(hashes)
        spent += time.perf_counter() - started
        kept += int(keep.sum())
        positions += int(np.flatnonzero(keep).sum()) + index * chunk * int(keep.sum())
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux
    return {"candidate": name, "documents": documents, "kept": kept, "kept_positions_sum": positions,
            "keep_s": spent, "start_rss_mb": start_mb, "peak_rss_mb": peak_mb, "state_bytes_per_hash": state_bytes(candidate, name) / kept}


def run_child(name: str, documents: int, args, seed: int) -> dict:
    command = [sys.executable, __file__, "--child", name, "--documents", str(documents), "--chunk",
               str(args.chunk), "--repeats", str(args.repeats), "--seed", str(seed)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def report(rows: list[dict], names: list[str]) -> None:
    """Medians per size and candidate; growth is peak RSS minus RSS before the first chunk (the state and
    its transients, without the interpreter), per distinct hash in the B/hash column."""
    print("| documents | candidate | keep s | ns / doc | peak RSS MB | growth MB | state B / hash | growth B / hash "
          "| over set, per round: time / peak RSS / growth |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---|")
    for documents in sorted({row["documents"] for row in rows}):
        by = {name: [row for row in rows if row["documents"] == documents and row["candidate"] == name]
              for name in names}
        for name in names:
            mine = by[name]
            growth = [row["peak_rss_mb"] - row["start_rss_mb"] for row in mine]
            ratios = "—"
            if name != "set" and "set" in by:
                ratios = ", ".join(
                    f"{row['keep_s'] / base['keep_s']:.2f} / {row['peak_rss_mb'] / base['peak_rss_mb']:.2f} / "
                    f"{(row['peak_rss_mb'] - row['start_rss_mb']) / (base['peak_rss_mb'] - base['start_rss_mb']):.2f}"
                    for row, base in zip(mine, by["set"]))
            print(f"| {documents:,} | {name} | {statistics.median(row['keep_s'] for row in mine):.2f} "
                  f"| {statistics.median(row['keep_s'] for row in mine) / documents * 1e9:.0f} "
                  f"| {statistics.median(row['peak_rss_mb'] for row in mine):,.0f} | {statistics.median(growth):,.0f} "
                  f"| {statistics.median(row['state_bytes_per_hash'] for row in mine):.1f} "
                  f"| {statistics.median(g * 2 ** 20 / row['kept'] for g, row in zip(growth, mine)):.0f} | {ratios} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, nargs="+", default=[2_000_000, 10_000_000, 30_000_000])
    parser.add_argument("--chunk", type=int, default=10_000, help="hashes per keep() call")
    parser.add_argument("--repeats", type=float, default=0.05, help="share of documents repeating an earlier one")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--candidates", nargs="+", choices=CANDIDATES, default=["set", "runs"])
    parser.add_argument("--out", type=Path, default=None, help="also write every child's figures here (JSON)")
    parser.add_argument("--child", choices=CANDIDATES, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.documents[0], args.chunk, args.repeats, args.seed)))
        return

    commit = subprocess.run(["git", "-C", str(BENCH), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, commit {commit}, numpy {np.__version__}, "
          f"{machine_info()}", flush=True)
    rows = []
    for documents in args.documents:
        for round_index in range(args.rounds):
            seed = args.seed + round_index
            order = args.candidates if round_index % 2 == 0 else args.candidates[::-1]
            results = [run_child(name, documents, args, seed) for name in order]
            for row in results:
                print(json.dumps(row), flush=True)
            if len({(row["kept"], row["kept_positions_sum"]) for row in results}) > 1:
                raise SystemExit(f"the candidates disagree at {documents:,} documents, seed {seed}")
            rows.extend(results)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    report(rows, args.candidates)


if __name__ == "__main__":
    main()
