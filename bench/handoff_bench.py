"""Handoff timings: a cached re-run, and how fast a waiting rank notices a failed or a killed builder.

    python bench/handoff_bench.py                 # 3 repeats each, 20 MiB generated corpus
    python bench/handoff_bench.py --size_mb 5 --repeats 1

Two processes are started as a cluster scheduler would (RANK/WORLD_SIZE/LOCAL_RANK/MASTER_*), both
running `train.py --tokenize_only`. Measured, median over repeats:
  cached    the preparation phase ("data ready in X s", the slower rank) and the whole process, when the
            dataset is already published — baseline: the same command building it from scratch
  failed    rank 1's exit minus rank 0's exit, rank 0 failing on a malformed line near the end
  killed    rank 1's exit minus the moment rank 0 was sent SIGKILL mid-build
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_pair(args: list[str]) -> list[subprocess.Popen]:
    port = free_port()
    processes = []
    for rank in (0, 1):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": "2",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "PYTHONUNBUFFERED": "1"}
        processes.append(subprocess.Popen([sys.executable, str(REPO / "train.py"), "--tokenize_only", *args], env=env,
                                          cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return processes


def wait_all(processes: list[subprocess.Popen]) -> list[tuple[int, str, float]]:
    ended: dict[int, float] = {}
    while len(ended) < len(processes):
        for index, process in enumerate(processes):
            if index not in ended and process.poll() is not None:
                ended[index] = time.monotonic()
        time.sleep(0.01)
    return [(p.returncode, p.communicate()[1], ended[i]) for i, p in enumerate(processes)]


def timed_pair(args: list[str]) -> tuple[float, float]:
    started = time.monotonic()
    results = wait_all(start_pair(args))
    assert all(code == 0 for code, _, _ in results), [err[-2000:] for _, err, _ in results]
    ready = max(float(m) for _, err, _ in results for m in re.findall(r"data ready in ([\d.]+) s", err))
    return ready, max(end for _, _, end in results) - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size_mb", type=float, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="handoff-bench-"))
    try:
        corpus = work / "corpus.jsonl"
        subprocess.run([sys.executable, str(REPO / "bench/make_corpus.py"), "--size_mb", str(args.size_mb),
                        "--output", str(corpus)], check=True, capture_output=True)
        sys.path.insert(0, str(REPO))
        from rankzero.tokenizer import train_tokenizer

        texts = [json.loads(line)["text"] for line in (REPO / "data/sample/ko.jsonl").read_text().splitlines()]
        train_tokenizer(texts, 4000, work / "tok")
        common = ["--dataset", str(corpus), "--tokenizer_path", str(work / "tok"), "--max_seq_length", "512"]
        figures: dict[str, list[float]] = {k: [] for k in ("build_ready", "build_total", "cached_ready", "cached_total",
                                                           "failed_notice", "killed_notice")}
        lines = corpus.read_text(encoding="utf-8").splitlines()
        lines[int(len(lines) * 0.9)] = "{broken"
        bad = work / "bad.jsonl"
        bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
        for repeat in range(args.repeats):
            cache = work / f"cache{repeat}"
            ready, total = timed_pair(common + ["--cache_dir", str(cache)])
            figures["build_ready"].append(ready)
            figures["build_total"].append(total)
            ready, total = timed_pair(common + ["--cache_dir", str(cache)])
            figures["cached_ready"].append(ready)
            figures["cached_total"].append(total)

            (code0, err0, end0), (code1, err1, end1) = wait_all(start_pair(
                ["--dataset", str(bad), *common[2:], "--cache_dir", str(work / f"bad{repeat}")]))
            assert code0 != 0 and code1 != 0 and "rank 0 failed" in err1, err1[-2000:]
            figures["failed_notice"].append(end1 - end0)

            kill_cache = work / f"kill{repeat}"
            builder, waiter = start_pair(common + ["--cache_dir", str(kill_cache), "--dataset_num_proc", "1"])
            while not any('"docs"' in p.read_text() for p in kill_cache.glob("*.heartbeat.*") if p.exists()):
                time.sleep(0.05)
            builder.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            (code, err, end), = wait_all([waiter])
            builder.communicate()
            assert code != 0 and "died while preparing" in err, err[-2000:]
            figures["killed_notice"].append(end - killed)
        print(json.dumps({k: round(statistics.median(v), 2) for k, v in figures.items()}))
        print("\n| what | median s |\n|---|---:|")
        for key, label in (("build_ready", "preparation phase, building (2 ranks, the slower)"),
                           ("build_total", "whole job, building"),
                           ("cached_ready", "preparation phase, cached re-run (the slower rank)"),
                           ("cached_total", "whole job, cached re-run (interpreter start included)"),
                           ("failed_notice", "rank 1 exits after rank 0 failed (malformed line)"),
                           ("killed_notice", "rank 1 exits after rank 0 got SIGKILL mid-build")):
            print(f"| {label} | {statistics.median(figures[key]):.2f} |")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
