"""One job per output dir, under real processes: a second train.py given the same
--output_dir stops before preparing anything, naming the dir and the holder (host, pid, job); every rank
of a second multi-rank job stops too; a killed holder leaves no stale lock. The lock's rules (one per
job, other ranks only check, released and removed at the end) are also checked in-process."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from rankzero.runtime import Runtime
from rankzero.train.output_dir import LOCK_NAME, LOCK_WAIT_S, OutputDirBusy, hold_output_dir, job_identity
from test_train_preemption import read_until, start
from helpers import REPO, free_port, quiet_env, train_flags


@pytest.fixture
def holder(tmp_path, train_corpus, tokenizer_dir):
    """A train.py that holds tmp_path/run for as long as the test needs (killed at the end); its DataLoader
    worker is a forked child that inherits the lock's descriptor, as in a real run."""
    out = tmp_path / "run"
    process = start([sys.executable, REPO / "train.py",
                     *train_flags(train_corpus, tokenizer_dir, tmp_path / "cache", out, max_steps=1_000_000,
                                  logging_steps=1, dataloader_num_workers=1)])
    try:
        read_until(process, "step 2/")
        yield process, out
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def second(train_corpus, tokenizer_dir, tmp_path, out, env=None) -> subprocess.Popen:
    return start([sys.executable, REPO / "train.py",
                  *train_flags(train_corpus, tokenizer_dir, tmp_path / "cache2", out, max_steps=2)], env=env)


def assert_stopped_naming(process: subprocess.Popen, out, holder_pid: int) -> None:
    printed, _ = process.communicate(timeout=120)
    assert process.returncode == 1, printed[-3000:]
    [line] = [line for line in printed.splitlines() if line.startswith("error:")]
    assert line.startswith(f"error: --output_dir {out} is in use by another run: pid {holder_pid} on host "
                           f"{socket.gethostname()} (started by hand, running since "), line
    assert "choose another --output_dir" in line
    assert "[prepare]" not in printed and "Traceback" not in printed  # stopped before preparing anything


def test_a_second_job_stops_naming_the_holder_and_a_killed_holder_frees_the_dir(holder, tmp_path, train_corpus,
                                                                                  tokenizer_dir):
    process, out = holder
    record = json.loads((out / LOCK_NAME).read_text())
    assert record["pid"] == process.pid and record["host"] == socket.gethostname()
    assert_stopped_naming(second(train_corpus, tokenizer_dir, tmp_path, out), out, process.pid)
    assert not (tmp_path / "cache2").exists()
    assert process.poll() is None  # the holder runs on, untouched

    # SIGKILL to the holder alone: its DataLoader worker keeps the lock's descriptor until it sees its
    # parent gone (up to 5 s); a run started at once waits that out rather than calling the dir busy.
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    with hold_output_dir(out, runtime(0, 1)):
        assert json.loads((out / LOCK_NAME).read_text())["pid"] == os.getpid()
    assert not (out / LOCK_NAME).exists()  # released and removed at the end


def test_every_rank_of_a_second_multi_rank_job_stops(holder, tmp_path, train_corpus, tokenizer_dir):
    process, out = holder
    port = free_port()
    ranks = [second(train_corpus, tokenizer_dir, tmp_path, out,
                    env=quiet_env(RANK=rank, WORLD_SIZE=2, LOCAL_RANK=rank, LOCAL_WORLD_SIZE=2,
                                  MASTER_ADDR="127.0.0.1", MASTER_PORT=port)) for rank in (0, 1)]
    for rank in ranks:  # rank 1 does not wait for its rank 0: it checks the lock itself
        assert_stopped_naming(rank, out, process.pid)


def runtime(rank: int, world_size: int = 2) -> Runtime:
    return Runtime(rank, world_size, rank, world_size, 0, socket.gethostname())


def test_one_lock_per_job_other_ranks_check_it(tmp_path, monkeypatch):
    out = tmp_path / "run"
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "job-a")
    with hold_output_dir(out, runtime(0)):
        record = json.loads((out / LOCK_NAME).read_text())
        assert record["job"] == "torchrun run job-a" and record["pid"] == os.getpid()
        with hold_output_dir(out, runtime(1)):  # a rank of the same job: passes, holds nothing
            pass
        started = time.monotonic()
        with pytest.raises(OutputDirBusy, match=rf"--output_dir {out} is in use by another run: pid {os.getpid()} "
                                                r".*\(torchrun run job-a, running since"):
            with hold_output_dir(out, runtime(0)):  # a second rank 0 (another job): the holder is alive
                pass
        assert time.monotonic() - started < LOCK_WAIT_S  # a live holder is not waited on as a dead one's children
        monkeypatch.setenv("TORCHELASTIC_RUN_ID", "job-b")
        started = time.monotonic()
        with pytest.raises(OutputDirBusy, match="torchrun run job-a"):
            with hold_output_dir(out, runtime(1)):  # a rank of another job
                pass
        assert time.monotonic() - started < LOCK_WAIT_S
    assert not (out / LOCK_NAME).exists()
    with hold_output_dir(out, runtime(1)):  # nobody holds it: rank 1 of the next job goes on
        pass


def test_a_lock_file_left_by_a_killed_run_is_no_lock(tmp_path, train_corpus, tokenizer_dir):
    out = tmp_path / "run"
    out.mkdir()
    script = ("import sys, time; from rankzero.runtime import Runtime; "
              "from rankzero.train.output_dir import hold_output_dir\n"
              "with hold_output_dir(sys.argv[1], Runtime.from_env()):\n    print('held', flush=True); time.sleep(600)")
    process = subprocess.Popen([sys.executable, "-c", script, str(out)], stdout=subprocess.PIPE, text=True,
                               env=quiet_env(), cwd=REPO)
    try:
        assert process.stdout.readline() == "held\n"
        with pytest.raises(OutputDirBusy, match=f"pid {process.pid}"):
            with hold_output_dir(out, runtime(0, 1)):
                pass
    finally:
        process.kill()
        process.wait()
    assert (out / LOCK_NAME).is_file()  # a kill leaves the file, not the lock
    with hold_output_dir(out, runtime(0, 1)):
        assert json.loads((out / LOCK_NAME).read_text())["pid"] == os.getpid()


def test_a_rank_checking_the_lock_for_a_moment_does_not_make_the_dir_busy(tmp_path):
    """Rank 1's shared-lock check, while the file still holds a record from a run on another host: rank 0
    must not take that moment for another job holding the dir."""
    import fcntl
    import threading

    out = tmp_path / "run"
    out.mkdir()
    (out / LOCK_NAME).write_text(json.dumps({"host": "another-node", "pid": 1, "job": "Slurm job 1", "job_key": "x"}))
    job_identity(runtime(0, 1))  # its imports first, so that rank 0 comes to the lock while it is checked
    checking = os.open(out / LOCK_NAME, os.O_RDONLY)
    fcntl.flock(checking, fcntl.LOCK_SH)
    threading.Timer(0.2, os.close, [checking]).start()
    started = time.monotonic()
    with hold_output_dir(out, runtime(0, 1)):
        assert json.loads((out / LOCK_NAME).read_text())["pid"] == os.getpid()
    assert time.monotonic() - started >= 0.2  # it did meet the check


# ------------------------------------------------------------------ one run per output dir


def test_a_run_from_scratch_into_a_used_dir_refuses_and_overwriting_moves_the_earlier_run(tmp_path, train_corpus,
                                                                                         tokenizer_dir):
    """A re-run into a dir holding checkpoints would leave them beside its own for `auto` to resume later
    under the new recipe: it stops at argument time naming them and the flag that moves them aside."""
    out = tmp_path / "run"

    def train(steps: int, *extra):
        flags = train_flags(train_corpus, tokenizer_dir, tmp_path / "cache", out, max_steps=steps,
                            save_strategy="steps", save_steps=2, logging_steps=1)
        return subprocess.run([sys.executable, REPO / "train.py", *flags, *extra], capture_output=True, text=True,
                              timeout=300, env=quiet_env(), cwd=REPO)

    assert train(4).returncode == 0
    earlier = json.loads((out / "run_config.json").read_text())["run_id"]
    again = train(2)
    printed = again.stdout + again.stderr
    assert again.returncode == 2 and "Traceback" not in printed and "UserWarning" not in printed, printed[-3000:]
    [line] = [line for line in again.stderr.splitlines() if line.startswith("  - --output_dir")]
    assert f"--output_dir {out} holds an earlier run's checkpoints (checkpoint-4, checkpoint-2)" in line
    assert "--resume_from_checkpoint auto" in line and f"--overwrite_output_dir (the earlier run moves to " \
                                                       f"{out / 'run_history'}/<time>/)" in line
    assert "[prepare]" not in printed and sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2",
                                                                                              "checkpoint-4"]

    over = train(2, "--overwrite_output_dir")
    assert over.returncode == 0 and "UserWarning" not in over.stdout + over.stderr, over.stderr[-3000:]
    [moved] = (out / "run_history").iterdir()
    assert f"the earlier run in {out} moved to {moved}" in over.stdout
    assert {"checkpoint-2", "checkpoint-4", "run_config.json", "recipe.yaml", "model.safetensors"} <= {
        p.name for p in moved.iterdir()}
    assert json.loads((moved / "run_config.json").read_text())["run_id"] == earlier
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2"]
    assert json.loads((out / "run_config.json").read_text())["run_id"] != earlier
    assert "--overwrite_output_dir" not in (out / "recipe.yaml").read_text()  # a decision for that start only


def test_a_warning_is_one_log_line_not_a_python_userwarning():
    code = ("import warnings\nfrom rankzero.logging_utils import setup_logging\nfrom rankzero.runtime import Runtime\n"
            "setup_logging(Runtime(0, 1, 0, 1, 0, 'host'))\n"
            "warnings.warn('--dataloader_prefetch_factor is ignored: it needs --dataloader_num_workers > 0')\n"
            "warnings.warn('old', FutureWarning)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=quiet_env(), cwd=REPO)
    lines = done.stderr.splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == [
        "WARNING py.warnings: --dataloader_prefetch_factor is ignored: it needs --dataloader_num_workers > 0",
        "WARNING py.warnings: FutureWarning: old"], done.stderr
