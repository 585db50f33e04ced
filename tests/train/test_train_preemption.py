"""Preemption under real processes: a signal mid-run gives one whole checkpoint on every rank, exit 0, and a
resume that ends where an uninterrupted run ends.

- torchrun with 2 gloo processes, SIGTERM sent to torchrun (which forwards it to each worker): the job
  ends within a minute, leaving `checkpoint-K`; resuming with `--resume_from_checkpoint auto` to step N
  gives the step-N loss of an uninterrupted N-step run (constant learning rate).
- 2 scheduler-style processes (RANK/WORLD_SIZE set, as Slurm's srun does), SIGUSR1 sent to rank 1 only,
  to its whole process group (DataLoader worker included): both ranks stop after the same step, save one
  checkpoint and exit 0. A rank acting on its own flag would leave the other waiting in a collective.
- SIGTERM to a pretrain_cont.sh launch: no traceback after the "preempted" line, exit 143 (128 + SIGTERM), and
  the two next commands it printed, run as printed, resume it and continue from its checkpoint.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time


from helpers import REPO, free_port, losses, quiet_env, run, train_flags

STEPS = 40


def flags(train_corpus, tokenizer_dir, cache, out, **extra):
    return train_flags(train_corpus, tokenizer_dir, cache, out, max_steps=STEPS, logging_steps=1,
                       lr_scheduler_type="constant", **extra)


def start(command, env=None) -> subprocess.Popen:
    return subprocess.Popen([str(c) for c in command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env or quiet_env(), cwd=REPO, start_new_session=True)


def read_until(process: subprocess.Popen, needle: str, timeout: float = 180) -> str:
    """Everything `process` printed up to the line holding `needle` (it must not exit before)."""
    seen = []
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if selector.select(timeout=1):
            line = process.stdout.readline()
            if not line:
                break
            seen.append(line)
            if needle in line:
                return "".join(seen)
    process.kill()
    raise AssertionError(f"{needle!r} not printed within {timeout} s:\n" + "".join(seen)[-3000:])


def finish(process: subprocess.Popen, timeout: float) -> str:
    try:
        rest, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        raise AssertionError(f"still running {timeout} s after the signal:\n{process.communicate()[0][-3000:]}")
    return rest


def test_sigterm_to_torchrun_saves_a_checkpoint_and_the_resume_matches(tmp_path, train_corpus, tokenizer_dir):
    cache = tmp_path / "cache"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", 2]
    whole = tmp_path / "whole"
    run([*torchrun, "--master_port", free_port(), REPO / "train.py", *flags(train_corpus, tokenizer_dir, cache, whole)])

    out = tmp_path / "preempted"
    job = start([*torchrun, "--master_port", free_port(), REPO / "train.py", *flags(train_corpus, tokenizer_dir, cache, out)])
    printed = read_until(job, f"step 5/{STEPS}")
    job.send_signal(signal.SIGTERM)
    printed += finish(job, timeout=300)  # a hang guard; how long the save takes is not this test's to judge
    hint = next(line for line in printed.splitlines() if line.startswith("preempted by SIGTERM"))
    checkpoints = sorted(p.name for p in out.iterdir() if p.name.startswith("checkpoint-"))
    assert len(checkpoints) == 1, printed[-3000:]
    stopped = int(checkpoints[0].split("-")[1])
    assert 5 <= stopped < STEPS and f"finished step {stopped}/{STEPS}" in hint and "--resume_from_checkpoint auto" in hint
    checkpoint = out / checkpoints[0]
    assert {"model.safetensors", "optimizer.pt", "scheduler.pt", "trainer_state.json", "rng_state_0.pth",
            "rng_state_1.pth"} <= {p.name for p in checkpoint.iterdir()}
    assert not (out / "model.safetensors").exists()  # the run is not finished: no final model
    assert not any(p.name.startswith(".") for p in out.iterdir())  # nothing half-written left behind

    result = run([*torchrun, "--master_port", free_port(), REPO / "train.py",
                  *flags(train_corpus, tokenizer_dir, cache, out, resume_from_checkpoint="auto")])
    assert f"step {stopped + 1}/{STEPS}" in result.stdout and f"step {stopped}/{STEPS} " not in result.stdout
    assert abs(losses(out)[STEPS] - losses(whole)[STEPS]) <= 1e-3


def test_a_signal_on_one_rank_stops_every_rank_at_the_same_step(tmp_path, train_corpus, tokenizer_dir):
    out = tmp_path / "run"
    args = flags(train_corpus, tokenizer_dir, tmp_path / "cache", out, dataloader_num_workers=1)
    port = free_port()
    ranks = [start([sys.executable, REPO / "train.py", *args],
                   env=quiet_env(RANK=rank, WORLD_SIZE=2, LOCAL_RANK=rank, LOCAL_WORLD_SIZE=2,
                                 MASTER_ADDR="127.0.0.1", MASTER_PORT=port)) for rank in (0, 1)]
    printed = read_until(ranks[0], f"step 5/{STEPS}")
    os.killpg(ranks[1].pid, signal.SIGUSR1)  # rank 1 and its DataLoader worker; rank 0 gets nothing
    printed += finish(ranks[0], timeout=60)
    finish(ranks[1], timeout=60)
    assert [rank.returncode for rank in ranks] == [0, 0], printed[-3000:]
    hint = next(line for line in printed.splitlines() if line.startswith("preempted by a signal on another rank"))
    checkpoints = [p for p in out.iterdir() if p.name.startswith("checkpoint-")]
    assert len(checkpoints) == 1 and f"step {checkpoints[0].name.split('-')[1]}/{STEPS}" in hint
    state = json.loads((checkpoints[0] / "trainer_state.json").read_text())
    assert state["global_step"] == int(checkpoints[0].name.split("-")[1]) < STEPS


def test_a_preempted_pretrain_cont_launch_ends_quietly_and_its_next_commands_work(tmp_path, train_corpus,
                                                                                   tokenizer_dir):
    base = tmp_path / "base"
    run([REPO / "pretrain.sh", *train_flags(train_corpus, tokenizer_dir, tmp_path / "cache", base, max_steps=2)],
        env=quiet_env(NGPU=0))
    out = tmp_path / "cont"
    job = start([REPO / "pretrain_cont.sh", base, "--max_steps", STEPS, "--logging_steps", 1],
                env=quiet_env(NGPU=0, OUTPUT_DIR=out))
    printed = read_until(job, f"step 5/{STEPS}")
    job.send_signal(signal.SIGTERM)  # the launcher's own pid: pretrain_cont.sh and pretrain.sh exec torchrun
    printed += finish(job, timeout=300)
    assert job.returncode == 128 + signal.SIGTERM, printed[-3000:]
    after = printed[printed.index("preempted by SIGTERM"):]
    assert "Traceback" not in after and "SignalException" not in after, after
    resume = re.search(r"Resume: (RESUME=1 \S+ \S+) ", after).group(1)
    more = re.search(r"continue: (\S+ (\S+) --max_steps) N", after)
    stopped = int(more.group(2).rpartition("-")[2])

    result = run(["bash", "-c", resume], env=quiet_env(NGPU=0))  # as printed, from where the run was started
    assert f"resuming from {out / f'checkpoint-{stopped}'} (step {stopped})" in result.stdout
    assert f"done: {STEPS} steps" in result.stdout and (out / "model.safetensors").is_file()
    result = run(["bash", "-c", f"{more.group(1)} 3"], env=quiet_env(NGPU=0))
    new = [p for p in tmp_path.iterdir() if p.name.startswith(f"cont-checkpoint-{stopped}-cont-")]
    assert len(new) == 1 and set(losses(new[0])) == {1, 2, 3}, result.stdout[-3000:]


def test_pretrain_cont_refuses_a_run_dir_without_a_model_naming_its_newest_checkpoint(tmp_path):
    """What a preempted run leaves (checkpoints, no final model) is no model to continue from: one line naming
    the newest checkpoint by step (12, not 9 as names sort) and the resume, exit 2, nothing made."""
    for step in (9, 12):
        (tmp_path / "run" / f"checkpoint-{step}").mkdir(parents=True)
    result = run([REPO / "pretrain_cont.sh", tmp_path / "run", "--max_steps", 5], check=False)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"pretrain_cont.sh {tmp_path / 'run' / 'checkpoint-12'}," in result.stderr
    assert f"RESUME=1 {REPO / 'pretrain_cont.sh'} {tmp_path / 'run'}" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
