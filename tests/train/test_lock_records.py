"""The output dir's lock when what is at `.rankzero-run.lock` is not what rankzero wrote (issue 29, item 9):
a record with impossible times or terminal escapes, a FIFO, directory or symlink at the lock's name, a lock
kept open by an orphaned child of a dead run. Each is one clear line, never a traceback or a hang."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import unicodedata

import pytest

from rankzero.runtime import Runtime
from rankzero.train import output_dir
from rankzero.train.output_dir import LOCK_NAME, OutputDirBusy, hold_output_dir
from helpers import REPO, quiet_env, train_flags


def runtime(rank: int, world_size: int = 2) -> Runtime:
    return Runtime(rank, world_size, rank, world_size, 0, socket.gethostname())


def busy_message_with(out, **record) -> str:
    """What a second job is told while this process holds `out` and its record says `record`."""
    with hold_output_dir(out, runtime(0)):
        (out / LOCK_NAME).write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid(), **record}))
        with pytest.raises(OutputDirBusy) as caught:
            with hold_output_dir(out, runtime(0)):
                pass
    return str(caught.value)


@pytest.mark.parametrize("started_at", [1e300, float("nan"), float("inf"), -1e300, "yesterday", True])
def test_a_record_with_an_impossible_start_time_still_names_the_holder(tmp_path, started_at):
    message = busy_message_with(tmp_path / "run", job="started by hand", started_at=started_at)
    assert f"is in use by another run: pid {os.getpid()} on host {socket.gethostname()} (started by hand)" in message


def test_control_characters_in_the_record_are_never_printed(tmp_path):
    record = {"job": "\x1b[2J\x1b]0;owned\x07Slurm job 1\u202e", "host": f"{socket.gethostname()}\r\n",
              "started_at": 0}
    message = busy_message_with(tmp_path / "run", **record)
    assert "[2J]0;ownedSlurm job 1" in message  # the printable rest is kept
    assert not [char for char in message if unicodedata.category(char)[0] == "C"], repr(message)


def _plant(kind: str, path) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path.symlink_to(path.parent / "elsewhere")


@pytest.mark.parametrize("kind,said", [("fifo", "a FIFO"), ("directory", "a directory"), ("symlink", "a symlink")])
@pytest.mark.parametrize("rank", [0, 1])
def test_something_else_at_the_lock_name_is_named(tmp_path, kind, said, rank):
    out = tmp_path / "run"
    out.mkdir()
    _plant(kind, out / LOCK_NAME)
    # In a child process: before the fix, rank 1 opened a FIFO for reading and waited for a writer for ever.
    code = (f"import sys; from rankzero.runtime import Runtime; from rankzero.train.output_dir import hold_output_dir\n"
            f"with hold_output_dir(sys.argv[1], Runtime({rank}, 2, {rank}, 2, 0, 'h')):\n    print('held')")
    result = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, timeout=120,
                            env=quiet_env(), cwd=REPO)
    assert result.returncode == 1 and "held" not in result.stdout, result.stderr[-2000:]
    assert "OSError" not in result.stderr and f"RankzeroError: --output_dir {out}: {LOCK_NAME} is {said}, not the " \
           f"lock file rankzero writes there; remove it (rm -r {out / LOCK_NAME})" in result.stderr, result.stderr


def test_through_train_py_a_symlink_at_the_lock_name_is_one_line(tmp_path, train_corpus, tokenizer_dir):
    out = tmp_path / "run"
    out.mkdir()
    _plant("symlink", out / LOCK_NAME)
    result = subprocess.run([sys.executable, str(REPO / "train.py"),
                             *train_flags(train_corpus, tokenizer_dir, tmp_path / "cache", out, max_steps=1)],
                            capture_output=True, text=True, timeout=300, env=quiet_env(), cwd=REPO)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert f"error: --output_dir {out}: {LOCK_NAME} is a symlink, not the lock file" in result.stderr
    assert not (tmp_path / "cache").exists()  # stopped before the prepare


def test_a_lock_kept_by_an_orphaned_child_says_so_and_how_to_find_it(tmp_path, monkeypatch):
    out = tmp_path / "run"
    script = ("import os, sys, time; from rankzero.runtime import Runtime; "
              "from rankzero.train.output_dir import hold_output_dir\n"
              "with hold_output_dir(sys.argv[1], Runtime.from_env()):\n"
              "    child = os.fork()\n"
              "    if child == 0:\n        time.sleep(600)\n        os._exit(0)\n"
              "    print(child, flush=True)\n"
              "    os.kill(os.getpid(), 9)\n")  # the run dies; its forked child keeps the lock's descriptor
    parent = subprocess.Popen([sys.executable, "-c", script, str(out)], stdout=subprocess.PIPE, text=True,
                              env=quiet_env(), cwd=REPO)
    child = int(parent.stdout.readline())
    parent.wait()
    monkeypatch.setattr(output_dir, "LOCK_WAIT_S", 1.0)  # how long a dead run's children are waited for
    try:
        with pytest.raises(OutputDirBusy) as caught:
            with hold_output_dir(out, runtime(0, 1)):
                pass
    finally:
        os.kill(child, signal.SIGKILL)
    message = str(caught.value)
    assert f"the run that took the lock (pid {parent.pid} on this host, running since " in message
    assert "is dead: a process it started still holds the lock open" in message
    assert f"fuser -v {out / LOCK_NAME}" in message
    with hold_output_dir(out, runtime(0, 1)):  # the child gone, the dir is free
        pass

