"""bench/gpu_bench.py, the first command to run on a GPU: it refuses a CPU-only machine with a clear message,
and its harness (data, both models, the FSDP2 arms and the HF Trainer in their own processes, a failing arm
reported without stopping the rest, the tables) runs end to end on CPU with --cpu_smoke, so that a short device
loan does not stop on a harness bug."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from helpers import REPO, needs_cxx, quiet_env, run

BENCH = REPO / "bench" / "gpu_bench.py"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: the bench would run")
def test_without_a_gpu_it_says_so_and_exits_2():
    result = subprocess.run([sys.executable, BENCH], capture_output=True, text=True, env=quiet_env(), timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    assert "gpu_bench.py needs a CUDA GPU" in result.stderr and "bench/train_bench.py" in result.stderr


@pytest.mark.slow
@needs_cxx
def test_cpu_smoke_runs_every_arm_on_both_models_and_prints_the_table(tmp_path):
    """Each system on the tiny model and on the 8B-shaped slice (its 128,256-row vocabulary kept), compiled FSDP2
    sharded for real; an arm that fails (the fused loss has no CUDA here) is reported and the later
    runs still go (float8, skipped off Hopper); exit status 1 for the failure."""
    # The compiled arm (the one that can break) and the two that must not stop the rest; the eager and HF arms run
    # the same code paths without compile and cost the suite minutes.
    systems = ["rankzero_fsdp", "rankzero_fsdp_liger", "rankzero_fsdp_float8"]
    result = run([sys.executable, BENCH, "--cpu_smoke", "--systems", ",".join(systems), "--work_dir", tmp_path,
                  "--budget_s", "1e9"], timeout=3600, check=False)  # no budget: a loaded CPU takes its time
    assert result.returncode == 1, result.stderr[-3000:]
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith('{"round"')]
    assert [(row["system"], row["model"]) for row in rows] == [(s, m) for s in systems for m in ("1b", "8b_slice")]
    measured = [row for row in rows if row["system"] == "rankzero_fsdp"]
    assert all(row["tokens_per_second_per_device"] > 0 and row["mfu"] is None for row in measured)  # no peak on CPU
    for row in rows:
        if row["system"].startswith("rankzero_fsdp") and "tokens_per_second_per_device" in row:
            assert row["data_parallel"].startswith("FSDP2 full_shard over 1 process(es)")
            assert (row["torch_compile"] == "off") is (row["system"] == "rankzero_fsdp_eager"), row
    assert {row["model"] for row in rows if "failed" in row and row["system"] == "rankzero_fsdp_liger"} == {"1b", "8b_slice"}
    assert all("8.9" in row["skipped"] for row in rows if row["system"] == "rankzero_fsdp_float8")
    assert "rankzero_fsdp_liger exited" in result.stderr
    # The slice that rankzero built: 128,256 rows in an untied embedding and head, 2 layers of the slice's shape.
    sys.path.insert(0, str(REPO / "bench"))
    import gpu_bench

    shape = {**gpu_bench.SLICE, **gpu_bench.SMOKE_SLICE}
    expected = 2 * 128256 * 64 + 2 * gpu_bench.slice_parameters_per_layer(shape) + 64
    assert {row["parameters"] for row in rows if row["model"] == "8b_slice" and "parameters" in row} == {expected}
    first_table = result.stdout.split("tokens/s/GPU", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    assert [line.split("  ")[0] for line in first_table] == [
        "FSDP2 + compile", "FSDP2 + compile + fused loss", "FSDP2 + compile + fused loss + selective AC + float8"]
    assert "8b_slice: 8b_slice-2.json, 2 layers, seq 64, batch 2, every layer checkpointed" in result.stdout


def test_past_its_budget_the_runs_left_are_skipped(tmp_path):
    """A short device loan: once --budget_s has passed no run starts; each is listed as skipped, in order."""
    result = run([sys.executable, BENCH, "--cpu_smoke", "--models", "1b", "--systems", "rankzero_fsdp,hf_defaults",
                  "--budget_s", "0", "--work_dir", tmp_path], timeout=600)
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith('{"round"')]
    assert [(row["system"], row["skipped"]) for row in rows] == [("rankzero_fsdp", "past --budget_s 0"),
                                                                  ("hf_defaults", "past --budget_s 0")]
    assert "FSDP2 + compile" in result.stdout.split("tokens/s/GPU", 1)[1] and not list(tmp_path.glob("1b-*"))


def test_the_slice_takes_as_many_layers_as_fit():
    """The arithmetic of slice_layers at the 8B recipe's row (seq 4096, batch 2): an H100 80GB and an H200 hold
    9 and 24 layers of Llama-3.1-8B's width; a layer is Llama-3.1-8B's 218.1M parameters."""
    sys.path.insert(0, str(REPO / "bench"))
    import gpu_bench

    assert gpu_bench.slice_parameters_per_layer(gpu_bench.SLICE) == 218_112_000
    assert gpu_bench.slice_layers(80 * 10**9, 4096, 2) == 9
    assert gpu_bench.slice_layers(int(139 * 2**30), 4096, 2) == 24
