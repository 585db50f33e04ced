"""The builder's heartbeat under a held GIL and a killed builder, and what a waiting rank prints."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from helpers import REPO

# A builder: beats, forks a worker (as a pool does: it inherits the heartbeat's pipe and outlives a killed builder),
# then runs C code that keeps the GIL for HOLD_S seconds, notes the beat counter before and after, and is killed.
BUILDER = r'''
import ctypes, json, os, signal, sys, time
from pathlib import Path

from rankzero.data.handoff import Heartbeat
from rankzero.runtime import Runtime

path, hold_s = Path(sys.argv[1]), int(sys.argv[2])
runtime = Runtime(rank=0, world_size=2, local_rank=0, local_world_size=2, node_rank=0, hostname="n0")
with Heartbeat(path, runtime, "run") as heartbeat:
    heartbeat.progress({"phase": "quality"})
    worker = os.fork()
    if worker == 0:
        time.sleep(600)
        os._exit(0)
    (path.parent / "worker.pid").write_text(str(worker))
    time.sleep(2)  # a beat or two before the hold
    before = json.loads(path.read_text())["beat"]
    ctypes.PyDLL(None).sleep(hold_s)  # PyDLL: the call keeps the GIL, as Kiwi's first analysis did
    after = json.loads(path.read_text())["beat"]
    (path.parent / "held").write_text(f"{before} {after}")
    os.kill(os.getpid(), signal.SIGKILL)
'''


@contextlib.contextmanager
def _builder(tmp_path: Path, hold_s: int):
    """BUILDER running in its own process; it and its forked worker are killed at the end, whatever happened."""
    script = tmp_path / "builder.py"
    script.write_text(BUILDER)
    builder = subprocess.Popen([sys.executable, str(script), str(tmp_path / "fp.heartbeat.job"), str(hold_s)],
                               cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        yield builder
    finally:
        builder.kill()
        builder.wait()
        worker = tmp_path / "worker.pid"
        if worker.exists():
            os.kill(int(worker.read_text()), signal.SIGKILL)


def _waiter(local_rank: int = 1, node: int = 0):
    from rankzero.runtime import Runtime

    return Runtime(rank=2 * node + local_rank, world_size=4, local_rank=local_rank, local_world_size=2, node_rank=node,
                   hostname=f"n{node}")


def test_a_builder_holding_the_gil_past_the_tolerance_is_alive_and_its_death_is_still_seen(tmp_path):
    from rankzero.data.handoff import HEARTBEAT_STALE_S, wait_for_builder
    from rankzero.errors import BuilderFailed

    with _builder(tmp_path, int(HEARTBEAT_STALE_S) + 3):
        with pytest.raises(BuilderFailed) as failed:
            wait_for_builder(120, _waiter(), tmp_path, "fp", "job", "rank 0")
        # Not during the hold: only once the builder was killed (it writes `held` just before).
        assert (tmp_path / "held").exists(), f"a live builder holding the GIL was reported dead: {failed.value}"
        assert "died while preparing the data" in str(failed.value) and "has ended" in str(failed.value), failed.value
        # The file itself kept changing through the hold, so a waiter on another node saw a live builder too.
        before, after = map(int, (tmp_path / "held").read_text().split())
        assert after - before >= 3, (before, after)


def test_the_heartbeat_stops_when_its_builder_is_killed_though_a_worker_holds_its_pipe(tmp_path, monkeypatch):
    """A waiter on another node has only the file's changes: they must stop once the builder is gone (its heartbeat
    writer outliving it would keep that waiter until --prep_timeout_s), and it says what it knows, no guess."""
    from rankzero.data import handoff
    from rankzero.errors import BuilderFailed

    monkeypatch.setattr(handoff, "running_here", lambda beat: None)  # cannot ask the kernel: another node
    with _builder(tmp_path, 1) as builder:
        with pytest.raises(BuilderFailed) as failed:
            handoff.wait_for_builder(120, _waiter(), tmp_path, "fp", "job", "rank 0")
        assert (tmp_path / "held").exists()
        assert f"shows no sign of life: its heartbeat (host n0, pid {builder.pid}" in str(failed.value), failed.value
        assert f"has not changed for {handoff.HEARTBEAT_STALE_S:.0f} s" in str(failed.value), failed.value


@pytest.mark.parametrize("local_rank", [0, 1])
def test_one_waiting_rank_a_node_prints_the_builders_progress(tmp_path, monkeypatch, capsys, caplog, local_rank):
    """Local rank 0 of another node prints the progress as a [prepare] line (not a warning); the other waiting
    ranks stay quiet (the builder prints its own on its node)."""
    from rankzero.data import handoff
    from rankzero.errors import BuilderFailed
    from rankzero.files import write_json_atomic

    monkeypatch.setattr(handoff, "REPORT_EVERY_S", 0.0)
    heartbeat, failed = tmp_path / "fp.heartbeat.job", tmp_path / "fp.failed"
    stop = threading.Event()
    progress = {"phase": "encode", "docs": 1000, "bytes": 2_000_000, "mb_per_s": 1.5, "percent": 40.0, "eta_s": 3.0}

    def builder():
        for beat in range(1, 1000):
            write_json_atomic(heartbeat, {"run_id": "r", "beat": beat, "progress": progress})
            if beat == 4:
                write_json_atomic(failed, {"job": "job", "run_id": "r", "rank": 0, "error": "the planned end"})
            if stop.wait(0.5):
                return

    thread = threading.Thread(target=builder, daemon=True)
    thread.start()
    try:
        with pytest.raises(BuilderFailed, match="the planned end"):
            handoff.wait_for_builder(120, _waiter(local_rank, node=1), tmp_path, "fp", "job", "rank 0")
    finally:
        stop.set()
        thread.join()
    printed = capsys.readouterr().err
    line = "[prepare] waiting for rank 0 to prepare fp: encode: 1,000 docs, 2.0 MB (40.0%), 1.5 MB/s, ETA 3 s"
    assert (line in printed) == (local_rank == 0), printed
    assert not [record for record in caplog.records if record.levelname == "WARNING"]


def test_a_build_that_ends_before_its_heartbeat_child_starts_leaves_no_word_on_stderr(tmp_path):
    """A build that fails at once (a damaged input) ends before the child's interpreter is up: the child finds the
    builder no longer listening and ends quietly, never with a BrokenPipeError traceback under the error line."""
    code = ("import sys; from pathlib import Path\n"
            "from rankzero.data.heartbeat import Heartbeat\n"
            "from rankzero.runtime import Runtime\n"
            "runtime = Runtime(rank=0, world_size=1, local_rank=0, local_world_size=1, node_rank=0, hostname='n0')\n"
            "for index in range(5):\n"
            "    with Heartbeat(Path(sys.argv[1]) / f'beat-{index}', runtime, 'run'):\n"
            "        pass\n")
    # capture_output reads stderr to its end, which includes every child's copy of it
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert list(tmp_path.iterdir()) == []  # each heartbeat file removed at the build's end


def test_a_builder_that_cannot_start_its_child_beats_from_a_thread(tmp_path, monkeypatch):
    """A user who may not run this interpreter again (a Python under /root, the build run through setpriv): the
    build goes on, the file still beats and carries the progress, and it is removed at the end."""
    import time

    from rankzero.data import heartbeat as module
    from rankzero.runtime import Runtime

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied", sys.executable)

    monkeypatch.setattr(module.subprocess, "Popen", refused)
    monkeypatch.setattr(module, "HEARTBEAT_EVERY_S", 0.05)
    path = tmp_path / "fp.heartbeat.job"
    runtime = Runtime(rank=0, world_size=1, local_rank=0, local_world_size=1, node_rank=0, hostname="n0")
    with module.Heartbeat(path, runtime, "run") as beat:
        beat.progress({"phase": "quality", "done": 7})
        for _ in range(1200):  # the thread's next beats; bounded, never a wall-clock judgement
            state = json.loads(path.read_text())
            if state["beat"] >= 3 and state["progress"].get("done") == 7:
                break
            time.sleep(0.05)
        assert state["beat"] >= 3 and state["progress"] == {"phase": "quality", "done": 7}
    assert not path.exists()
