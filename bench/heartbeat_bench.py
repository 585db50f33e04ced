"""A live builder on a busy machine is never reported dead: two-rank `--quality_filter ko` launches under load.

    python bench/heartbeat_bench.py                          # 10 rounds, 4 CPU burners, baseline 1e7f917
    python bench/heartbeat_bench.py --rounds 2 --burners 0   # a quick look on a quiet machine
    python bench/heartbeat_bench.py --cost                   # what the child process costs the builder

Each round launches `torchrun --nproc_per_node 2 train.py --tokenize_only --quality_filter ko` on the real
Korean dev corpus (shared/corpora/ko_real_dev, 665 documents) with a fresh --cache_dir, twice: once from the
baseline tree (`git archive BASELINE`: the heartbeat written by a thread of the builder, which a C call holding
the GIL stops) and once from this tree (the heartbeat written by a child process; the waiter asks the kernel
whether the builder runs), the order alternating. Beside them `--burners` processes spin
(`python -c 'while 1: pass'`); they are killed at the end. Per launch: the exit code, whether a waiting rank
declared the builder dead, the longest time the heartbeat file went unchanged (a poller reads it every 50 ms),
the wall time and the 1-minute load average when it ended. Prints a Markdown table and the totals.

--cost starts and stops the heartbeat 20 times in this process, paired with the baseline's thread heartbeat
(imported from the baseline tree in a subprocess): the builder's wall time in `with Heartbeat(...)` around
nothing, and the child's resident memory (VmRSS) a second in.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpora" / "ko_real_dev"
DEATH = ("died while preparing", "shows no sign of life", "stopped preparing the data")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class HeartbeatWatch:
    """The longest stretch without a change of any heartbeat file in `cache`, from its first appearance."""

    def __init__(self, cache: Path):
        self.cache, self.longest = cache, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "HeartbeatWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        seen, changed = None, None
        while not self._stop.wait(0.05):
            try:
                content = b"".join(path.read_bytes() for path in sorted(self.cache.glob("*.heartbeat.*")))
            except OSError:  # replaced or removed between the listing and the read
                continue
            if content == seen:
                continue
            now = time.monotonic()
            if changed is not None:  # a new beat, or the file's removal (the build ended)
                self.longest = max(self.longest, now - changed)
            seen, changed = (content, now) if content else (None, None)
        if changed is not None:  # still there when the launch ended: a killed launch's last silence
            self.longest = max(self.longest, time.monotonic() - changed)


def launch(tree: Path, corpus: Path, tokenizer: Path, cache: Path) -> dict:
    sources = [str(corpus / name) for name in ("encyclopedia.jsonl", "dialogue.jsonl", "qa.jsonl")]
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(free_port()),
               str(tree / "train.py"), "--tokenize_only", "--dataset", *sources, "--tokenizer_path", str(tokenizer),
               "--max_seq_length", "512", "--quality_filter", "ko", "--cache_dir", str(cache)]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    started = time.monotonic()
    with HeartbeatWatch(cache) as watch:
        done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    died = next((line.strip() for line in done.stderr.splitlines() if any(word in line for word in DEATH)), "")
    return {"code": done.returncode, "died": died, "gap_s": watch.longest, "wall_s": time.monotonic() - started,
            "load": os.getloadavg()[0], "tail": done.stderr[-1500:]}


COST = r'''
import json, os, sys, tempfile, time
from pathlib import Path
from rankzero.data.handoff import Heartbeat
from rankzero.runtime import Runtime

runtime = Runtime(rank=0, world_size=2, local_rank=0, local_world_size=2, node_rank=0, hostname="bench")
walls, rss = [], []
with tempfile.TemporaryDirectory() as tmp:
    for index in range(int(sys.argv[1])):
        started = time.perf_counter()
        with Heartbeat(Path(tmp) / f"fp.heartbeat.{index}", runtime, "run") as heartbeat:
            entered = time.perf_counter() - started
            child = getattr(heartbeat, "_child", None)
            if child is not None:
                time.sleep(1.0)
                status = Path(f"/proc/{child.pid}/status").read_text()
                rss.append(int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1]) / 1024)
            stopping = time.perf_counter()
        walls.append((entered, time.perf_counter() - stopping))
print(json.dumps({"enter_s": sorted(w[0] for w in walls)[len(walls) // 2],
                  "exit_s": sorted(w[1] for w in walls)[len(walls) // 2], "child_rss_mb": max(rss) if rss else 0.0}))
'''


def cost(trees: dict[str, Path], repeats: int) -> None:
    print("| heartbeat | enter s (median) | exit s (median) | child RSS MB (max) |\n|---|---:|---:|---:|")
    for name, tree in trees.items():
        done = subprocess.run([sys.executable, "-c", COST, str(repeats)], cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
                              check=True, capture_output=True, text=True)
        figures = json.loads(done.stdout)
        print(f"| {name} | {figures['enter_s']:.4f} | {figures['exit_s']:.4f} | {figures['child_rss_mb']:.1f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--burners", type=int, default=4)
    parser.add_argument("--baseline", default="1e7f917", help="the commit whose tree is the baseline")
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--cost", action="store_true", help="only time the heartbeat's start and stop (see above)")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO / "bench"))
    from handoff_bench import train_tokenizer_on_samples

    with tempfile.TemporaryDirectory(prefix="heartbeat_bench-") as tmp:
        work = Path(tmp)
        baseline = work / "baseline"
        baseline.mkdir()
        archive = subprocess.run(["git", "archive", args.baseline], cwd=REPO, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(baseline)], input=archive, check=True)
        trees = {f"baseline {args.baseline} (thread)": baseline, "this tree (child process)": REPO}
        if args.cost:
            cost(trees, 20)
            return 0
        train_tokenizer_on_samples(work / "tok", 4000)
        burners = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(args.burners)]
        results: dict[str, list[dict]] = {name: [] for name in trees}
        try:
            for round_index in range(args.rounds):
                order = list(trees) if round_index % 2 == 0 else list(reversed(trees))
                for name in order:
                    result = launch(trees[name], args.corpus, work / "tok", work / f"cache-{round_index}-{len(results[name])}-{name[:4]}")
                    results[name].append(result)
                    print(f"round {round_index + 1} {name}: exit {result['code']}, longest heartbeat gap "
                          f"{result['gap_s']:.1f} s, {result['wall_s']:.1f} s, load {result['load']:.1f}"
                          f"{', ' + result['died'] if result['died'] else ''}", flush=True)
                    if result["code"] != 0 and not result["died"]:
                        print(result["tail"], flush=True)
        finally:
            for burner in burners:
                burner.kill()
                burner.wait()
    print("\n| round | " + " | ".join(f"{name}: exit, builder called dead, longest heartbeat gap" for name in trees) + " |")
    print("|---|" + "---|" * len(trees))
    for round_index in range(args.rounds):
        cells = [f"{r['code']}, {'**yes**' if r['died'] else 'no'}, {r['gap_s']:.1f} s"
                 for r in (results[name][round_index] for name in trees)]
        print(f"| {round_index + 1} | " + " | ".join(cells) + " |")
    for name, runs in results.items():
        print(f"{name}: {sum(bool(r['died']) for r in runs)} of {len(runs)} launches reported a live builder dead; "
              f"longest heartbeat gap {max(r['gap_s'] for r in runs):.1f} s; failed launches "
              f"{sum(r['code'] != 0 for r in runs)}; load {min(r['load'] for r in runs):.1f}-"
              f"{max(r['load'] for r in runs):.1f}; median wall {sorted(r['wall_s'] for r in runs)[len(runs) // 2]:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
