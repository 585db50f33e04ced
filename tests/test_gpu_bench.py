"""bench/gpu_bench.py, the first command to run on a GPU: it refuses a CPU-only machine with a clear message,
and its harness (data, four systems in their own processes — FSDP2 over a process group of one among them, the side-by-side table) runs end to end on CPU
with --cpu_smoke, so the first GPU run does not stop on a harness bug."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from helpers import REPO, quiet_env, run

BENCH = REPO / "bench" / "gpu_bench.py"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: the bench would run")
def test_without_a_gpu_it_says_so_and_exits_2():
    result = subprocess.run([sys.executable, BENCH], capture_output=True, text=True, env=quiet_env(), timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    assert "gpu_bench.py needs a CUDA GPU" in result.stderr and "bench/train_bench.py" in result.stderr


@pytest.mark.slow
def test_cpu_smoke_runs_every_system_and_prints_the_table(tmp_path):
    result = run([sys.executable, BENCH, "--cpu_smoke", "--systems", "rankzero,rankzero_fsdp,hf_defaults,bare",
                  "--work_dir", tmp_path], timeout=600)
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith('{"round"')]
    assert [row["system"] for row in rows] == ["rankzero", "rankzero_fsdp", "hf_defaults", "bare"]
    assert all(row["tokens_per_second_per_device"] > 0 and row["mfu"] is None for row in rows)  # no peak on CPU
    table = result.stdout.split("tokens/s/GPU", 1)[1].splitlines()[1:]
    assert [line.split("  ")[0] for line in table] == ["rankzero train.py", "rankzero train.py --fsdp full_shard",
                                                       "HF Trainer defaults (bf16=True)", "bare PyTorch loop"]
