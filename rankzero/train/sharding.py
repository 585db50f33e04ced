"""Sharded training: FSDP2 and DeepSpeed through the HF Trainer and accelerate, checked and set up here.

    problems = deepspeed_problems(training_argv)      # args.py, before TrainingArguments is built
"""

from __future__ import annotations

import importlib.util


def deepspeed_problems(training_argv: list[str]) -> list[str]:
    """--deepspeed without the package: transformers would stop with a metadata traceback in TrainingArguments."""
    given = any(arg == "--deepspeed" or arg.startswith("--deepspeed=") for arg in training_argv)
    if given and importlib.util.find_spec("deepspeed") is None:
        return ["--deepspeed: the deepspeed package is not installed here (pip install deepspeed, on a machine with "
                "CUDA), or shard with --fsdp full_shard instead"]
    return []
