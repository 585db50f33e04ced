"""Sharded training: DeepSpeed's arguments build (or say in one line that the package is missing)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
import torch

from helpers import REPO, TINY, quiet_env
from rankzero.args import parse_args
from rankzero.errors import ConfigError

DEEPSPEED = importlib.util.find_spec("deepspeed") is not None


def zero_config(tmp_path, stage: int):
    path = tmp_path / f"ds_zero{stage}.json"
    path.write_text(json.dumps({"zero_optimization": {"stage": stage}, "train_micro_batch_size_per_gpu": "auto",
                                "train_batch_size": "auto", "gradient_accumulation_steps": "auto",
                                "bf16": {"enabled": "auto"}}))
    return path


def train_flags(tokenizer_dir, tmp_path, *more):
    return ["--dataset", "x.jsonl", "--tokenizer_path", str(tokenizer_dir), "--model_config", str(TINY),
            "--output_dir", str(tmp_path / "run"), *more]


@pytest.mark.skipif(not DEEPSPEED, reason="deepspeed is not installed")
@pytest.mark.parametrize("stage", [2, 3])
def test_zero_arguments_build_under_a_launcher(tokenizer_dir, tmp_path, monkeypatch, stage):
    """transformers fills the JSON's "auto" values in TrainingArguments.__post_init__, reading world_size before
    any process group exists: it comes from the launcher's environment."""
    monkeypatch.setenv("WORLD_SIZE", "4")
    args = parse_args(train_flags(tokenizer_dir, tmp_path, "--deepspeed", str(zero_config(tmp_path, stage)),
                                  "--per_device_train_batch_size", "3", "--gradient_accumulation_steps", "2"))
    config = args.training.hf_deepspeed_config.config
    assert config["zero_optimization"]["stage"] == stage
    assert (config["train_micro_batch_size_per_gpu"], config["train_batch_size"]) == (3, 4 * 3 * 2)
    assert not torch.distributed.is_initialized()


@pytest.mark.skipif(DEEPSPEED, reason="deepspeed is installed: the arguments build")
def test_deepspeed_without_the_package_is_one_line(tokenizer_dir, tmp_path):
    with pytest.raises(ConfigError) as error:
        parse_args(train_flags(tokenizer_dir, tmp_path, "--deepspeed", str(zero_config(tmp_path, 2))))
    assert error.value.problems == ["--deepspeed: the deepspeed package is not installed here (pip install deepspeed, "
                                    "on a machine with CUDA), or shard with --fsdp full_shard instead"]
    result = subprocess.run([sys.executable, REPO / "train.py",
                             *train_flags(tokenizer_dir, tmp_path, "--deepspeed", str(zero_config(tmp_path, 2)))],
                            capture_output=True, text=True, env=quiet_env(), timeout=300)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--deepspeed: the deepspeed package is not installed here" in result.stderr
