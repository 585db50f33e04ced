"""torchrun killed with SIGKILL mid-run (issue 47, item 8): its 2 gloo workers, orphans now, notice that their launcher
is gone, say so, stop together after a step with a checkpoint, and exit, freeing the output dir's lock. They used to
train on to --max_steps holding it, with nobody left to report to."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers import REPO, free_port, quiet_env, train_flags
from rankzero.files import exclusive_lock
from rankzero.train.output_dir import LOCK_NAME

STEPS = 100_000  # far more than runs before the kill: the ranks must stop on their own


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's exit is reaped by init, or by nobody in some containers)."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def read(job: subprocess.Popen, printed: list[str], until, timeout_s: float) -> bool:
    """Lines of `job`'s output into `printed` until one satisfies `until` (True) or the output ends (False); a hang
    guard of `timeout_s`, not a measure: how long the start and the stop take is not this test's to judge."""
    selector = selectors.DefaultSelector()
    selector.register(job.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if selector.select(timeout=1):
            line = job.stdout.readline()
            if not line:
                return False
            printed.append(line)
            if until(line):
                return True
    raise AssertionError(f"no end within {timeout_s} s:\n" + "".join(printed)[-3000:])


def test_the_ranks_of_a_killed_torchrun_stop_with_a_checkpoint_and_free_the_lock(tmp_path, train_corpus,
                                                                                  tokenizer_dir):
    out = tmp_path / "run"
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
               str(free_port()), str(REPO / "train.py"),
               *map(str, train_flags(train_corpus, tokenizer_dir, tmp_path / "cache", out, max_steps=STEPS,
                                     logging_steps=1, lr_scheduler_type="constant"))]
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=quiet_env(),
                           cwd=REPO, start_new_session=True)
    printed, workers = [], []
    try:
        assert read(job, printed, lambda line: f"step 3/{STEPS}" in line, 600), "".join(printed)[-3000:]
        workers = children_of(job.pid)
        assert len(workers) == 2, workers
        os.kill(job.pid, signal.SIGKILL)
        job.wait()
        # The pipe's write end is held by the workers alone now: it ends when both have exited.
        read(job, printed, lambda line: False, 300)
        text = "".join(printed)
        assert not any(running(pid) for pid in workers), text[-3000:]
    finally:
        for pid in workers:
            if running(pid):
                os.kill(pid, signal.SIGKILL)
    for rank in (0, 1):
        assert f"rankzero: rank {rank}: its launcher (torchrun, pid {job.pid}) is gone" in text, text[-3000:]
    hint = next(line for line in text.splitlines() if line.startswith("preempted by the loss of the launcher"))
    [checkpoint] = [path for path in out.iterdir() if path.name.startswith("checkpoint-")]
    stopped = int(checkpoint.name.split("-")[1])
    assert 3 <= stopped < STEPS and f"finished step {stopped}/{STEPS}" in hint
    assert (checkpoint / "trainer_state.json").is_file()
    with exclusive_lock(out / LOCK_NAME, blocking=False) as locked:
        assert locked, "the output dir's lock is still held"
