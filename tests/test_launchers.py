"""Shell launchers: the demo, two "nodes" on one machine (c10d), continued pretraining and exact
resume through pretrain_cont.sh, and optimize_env.sh's arithmetic."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import REPO, free_port, losses, quiet_env, run, train_flags, warning_lines, write_corpus


@pytest.mark.slow
def test_demo_runs_with_no_arguments_learns_and_is_quiet(tmp_path):
    # How long it takes is bench/fresh_setup.sh's to measure: a wall-clock limit here fails on a busy machine.
    env = quiet_env(DEMO_DIR=tmp_path / "demo")
    env.pop("OMP_NUM_THREADS")  # as in a user's shell (accelerate warns when it has to pick a thread count)
    result = run([REPO / "pretrain.sh"], timeout=1200, env=env, cwd=tmp_path)
    assert f"demo model: {tmp_path / 'demo'}/model" in result.stdout
    assert "sample: 대한민국의 수도는" in result.stdout
    steps = losses(tmp_path / "demo" / "model")
    assert steps[max(steps)] < steps[min(steps)] - 1.0
    # Quiet: no warning from rankzero or from what it drives (vocabulary resize, DDP, accelerate threads),
    # one process without DDP, and one line per logging step.
    output = result.stdout + result.stderr
    assert not warning_lines(output), output[-3000:]
    assert "data_parallel = one process, no DDP" in result.stdout
    assert re.findall(r"^step (\d+)/200 \|", result.stdout, re.M) == [str(s) for s in range(20, 201, 20)]
    # Run again, as newcomers do: a fresh model from the reused tokenizer and data, just as quietly.
    again = run([REPO / "pretrain.sh"], timeout=1200, env=env, cwd=tmp_path)
    output = again.stdout + again.stderr
    assert not warning_lines(output), output[-3000:]
    assert re.findall(r"^step (\d+)/200 \|", again.stdout, re.M) == [str(s) for s in range(20, 201, 20)]


def test_two_nodes_on_one_machine_train_together_then_continue(tmp_path, tokenizer_dir):
    corpus = write_corpus(tmp_path / "docs.jsonl")
    out = tmp_path / "run"
    flags = train_flags(corpus, tokenizer_dir, tmp_path / "cache", out, max_steps=6, logging_steps=3,
                        save_strategy="steps", save_steps=3)
    env = quiet_env(NNODES=2, NGPU=1, MASTER_ADDR="127.0.0.1", MASTER_PORT=free_port(), RDZV_ID="test2nodes")
    nodes = [subprocess.Popen([str(REPO / "pretrain.sh"), *flags], env={**env, "NODE_RANK": str(i)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(2)]
    outputs = [node.communicate(timeout=240)[0] for node in nodes]
    assert all(node.returncode == 0 for node in nodes), "\n".join(o[-3000:] for o in outputs)
    joined = "".join(outputs)
    assert joined.count("resolved configuration:") == 1
    assert json.loads((out / "run_config.json").read_text())["runtime"]["world_size"] == 2
    uninterrupted = losses(out)
    assert set(uninterrupted) == {3, 6}

    # Exact resume through the launcher (same world size, one node now): the same step-6 loss.
    result = run([REPO / "pretrain_cont.sh", out / "checkpoint-3"], env=quiet_env(NGPU=2, RESUME=1), timeout=240)
    assert abs(losses(out)[6] - uninterrupted[6]) <= 1e-4, result.stdout[-2000:]

    # Continued pretraining: the run's recipe replayed, weights from the run, a new output dir.
    result = run([REPO / "pretrain_cont.sh", out, "--max_steps", 2, "--logging_steps", 1],
                 env=quiet_env(NGPU=1), timeout=240)
    continued = [p for p in tmp_path.iterdir() if p.name.startswith("run-cont-")]
    assert len(continued) == 1 and set(losses(continued[0])) == {1, 2}, result.stdout[-2000:]
    assert "model.pretrained_model = " + repr(str(out)) in result.stdout


SHELLS = ["bash", "zsh", "dash"]


def _shell(name: str) -> str:
    import shutil

    found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed here (.ci/run installs zsh and dash where apt exists)")
    return found


def _source(shell: str, epilogue: str, **env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in (
        "OMP_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS", "DATASET_NUM_PROC", "DATASET_BATCH_SIZE",
        "DATASET_WRITER_BATCH_SIZE", "NGPU", "RANKZERO_GB_PER_WORKER")}
    return subprocess.run([_shell(shell), "-c", f". {REPO / 'optimize_env.sh'}; echo \"status=$?\"; {epilogue}"],
                          capture_output=True, text=True, env={**clean, **env}, cwd=REPO)


@pytest.mark.parametrize("shell", SHELLS)
def test_optimize_env_sourced_from_each_shell_never_oversubscribes_and_keeps_user_values(shell):
    cores = len(os.sched_getaffinity(0))
    done = _source(shell, "echo $OMP_NUM_THREADS $DATASET_NUM_PROC $DATASET_BATCH_SIZE $MKL_NUM_THREADS; "
                          "set | grep -c '^_rankzero' || true", NGPU="2")
    lines = done.stdout.splitlines()
    assert "status=0" in lines and not done.stderr, done.stdout + done.stderr
    threads, workers, batch, mkl = map(int, lines[-2].split())
    assert threads * 2 <= max(cores, 2) and 1 <= workers <= cores and batch >= 1 and mkl == threads
    assert lines[-1] == "0"  # no helper function or variable left in the caller's shell
    kept = _source(shell, "echo $DATASET_NUM_PROC", NGPU="0", DATASET_NUM_PROC="1")
    assert kept.stdout.splitlines()[-1] == "1" and "DATASET_NUM_PROC=1 (kept: already set" in kept.stdout


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("knob", [{"NGPU": "2x"}, {"NGPU": "-1"}, {"RANKZERO_GB_PER_WORKER": "0"},
                                  {"RANKZERO_GB_PER_WORKER": "1.5"}])
def test_optimize_env_refuses_a_bad_knob_and_exports_nothing(shell, knob):
    done = _source(shell, "echo \"omp=${OMP_NUM_THREADS:-unset} proc=${DATASET_NUM_PROC:-unset}\"", **knob)
    (name, value), = knob.items()
    assert "status=2" in done.stdout and "omp=unset proc=unset" in done.stdout, done.stdout + done.stderr
    assert f"optimize_env: {name}={value}" in done.stderr and "nothing exported" in done.stderr


def test_optimize_env_run_instead_of_sourced_says_so():
    done = subprocess.run(["bash", str(REPO / "optimize_env.sh")], capture_output=True, text=True)
    assert done.returncode == 1 and "run 'source optimize_env.sh'" in done.stderr


def test_optimize_env_tells_processes_from_visible_gpus():
    done = _source("bash", "true", NGPU="2", CUDA_VISIBLE_DEVICES="")
    assert "0 GPU(s) visible → 2 training process(es) (NGPU=2)" in done.stdout, done.stdout + done.stderr


def test_pretrain_sh_warns_when_the_threads_were_planned_for_fewer_processes(tmp_path):
    cores = len(os.sched_getaffinity(0))
    done = _source("bash", f"NGPU=2 {REPO / 'pretrain.sh'} --max_steps -3 --output_dir {tmp_path / 'run'}",
                   CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(REPO))
    assert f"OMP_NUM_THREADS={cores} (" in done.stdout  # planned for one process ...
    # ... and launched with two: said before anything starts
    assert done.stderr.startswith(f"pretrain.sh: warning: OMP_NUM_THREADS={cores} x 2 processes > {cores} cores; "
                                  "run 'NGPU=2 source optimize_env.sh'"), done.stderr


THREAD_VARIABLES = ("RAYON_NUM_THREADS", "RAYON_RS_NUM_THREADS", "FASTOKENS_BPE_THREADS", "TOKENIZERS_PARALLELISM",
                    "DATASET_NUM_PROC", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


@pytest.mark.parametrize("engine", ["fastokens", "hf"])
@pytest.mark.parametrize("workers", [None, "1"])
def test_the_builder_uses_every_core_it_is_given_after_optimize_env_for_8_gpus(tmp_path, tokenizer_dir, corpus, engine,
                                                                             workers):
    """optimize_env.sh gives the training ranks cores / 8 Rust threads; the builder decides its own: a Rust
    pool of every core, also with fewer workers (DATASET_NUM_PROC) than cores."""
    command = (f". {REPO / 'optimize_env.sh'} >/dev/null && {sys.executable} {REPO / 'train.py'} --tokenize_only "
               f"--dataset {corpus} --tokenizer_path {tokenizer_dir} --max_seq_length 64 --cache_dir {tmp_path} "
               f"--tokenizer_engine {engine}")
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    env.update({"NGPU": "8", "RAYON_RS_NUM_THREADS": "1"}, **({"DATASET_NUM_PROC": workers} if workers else {}))
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, cwd=REPO, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((Path(done.stdout.split("prepared: ")[-1].strip()) / "manifest.json").read_text())
    threads = manifest["builder_threads"]
    cores = len(os.sched_getaffinity(0))
    given = int(subprocess.run(["bash", "-c", f". {REPO / 'optimize_env.sh'} >/dev/null; echo $DATASET_NUM_PROC"],
                               capture_output=True, text=True, env=env).stdout)
    assert threads["cores"] == threads["rust_threads"] == cores and threads["workers"] == given
    training = str(max(1, cores // 8))  # what optimize_env exported for each of 8 training ranks
    if cores > 1:
        assert threads["replaced_environment"] == {"RAYON_NUM_THREADS": training, "RAYON_RS_NUM_THREADS": "1"}
    assert manifest["tokenizer_engine"]["name"] == engine


@pytest.mark.parametrize("engine", ["fastokens", "hf"])
def test_the_builders_rust_pools_do_not_shrink_under_the_training_ranks_settings(tmp_path, tokenizer_dir, corpus,
                                                                               engine):
    """The pools themselves, counted as threads after a prepare: the same with the environment a training
    launcher leaves (one Rust thread, TOKENIZERS_PARALLELISM=false, FASTOKENS_BPE_THREADS=1) as without it;
    before, HF's batches ran serially there and fastokens' BPE pool had no thread. Afterwards the process's
    environment is the training ranks' again."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: every pool has one thread whatever the environment says")
    code = textwrap.dedent(f"""
        import collections, json, os, sys, threading, time
        sys.path.insert(0, "tests")
        from helpers import data_args, prepare

        prepare(data_args({str(tokenizer_dir)!r}, sys.argv[1], [{str(corpus)!r}], tokenizer_engine={engine!r},
                          dataset_num_proc=1))

        def read(thread, name):
            try:
                return open(f"/proc/self/task/{{thread}}/{{name}}").read()
            except FileNotFoundError:  # gone meanwhile
                return ""

        def others():
            return [t for t in os.listdir("/proc/self/task") if int(t) != threading.get_native_id()]

        # Counted once every other thread sleeps: a joined thread may take a moment to leave /proc, and an
        # idle Rayon thread spins a while before it sleeps.
        for _ in range(100):
            if all(read(t, "stat").rpartition(")")[2].split()[:1] in (["S"], []) for t in others()):
                break
            time.sleep(0.1)
        names = [read(t, "comm").strip() for t in others()]
        print(json.dumps([collections.Counter(n for n in names if n), os.environ.get("TOKENIZERS_PARALLELISM")]))
        """)
    # Arrow's pools grow with timing (a thread more when two tasks meet): one thread each, so that only the
    # Rust pools can differ.
    clean = {**{k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}, "OMP_NUM_THREADS": "1",
             "ARROW_IO_THREADS": "1"}
    training = {"RAYON_NUM_THREADS": "1", "RAYON_RS_NUM_THREADS": "1", "FASTOKENS_BPE_THREADS": "1",
                "TOKENIZERS_PARALLELISM": "false"}
    seen = []
    for index, env in enumerate((clean, {**clean, **training})):
        done = subprocess.run([sys.executable, "-c", code, str(tmp_path / f"cache{index}")], capture_output=True,
                              text=True, cwd=REPO, timeout=300, env=env)
        assert done.returncode == 0, done.stderr
        seen.append(json.loads(done.stdout.splitlines()[-1]))
    (alone, _), (beside_training, parallelism) = seen
    assert alone == beside_training, seen
    assert parallelism == "false"  # restored for the DataLoader workers that training forks
    if engine == "fastokens":
        assert any(name.startswith("fastokens-") for name in beside_training), beside_training
