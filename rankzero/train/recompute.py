"""Activation checkpointing (`--activation_checkpointing none|full|selective`) and float8 (`--float8`).

    problems = checkpointing_problems(mode, given, training)   # checks.py, with the other argument checks
    problems = float8_problems(float8)                         # checks.py
    training = use_checkpointing(mode, training, model)        # run.py, once the model is built
    callback = use_float8(model, training)                     # run.py: None without --float8

- `full` recomputes each decoder layer whole in the backward: the Trainer's `--gradient_checkpointing`, which
  stays as its alias (under FSDP, accelerate's checkpointing inside each FSDP unit: sharding.py).
- `selective` is torchtitan's op-level policy (torchtitan/models/llama3/infra/parallelize.py, "op" SAC): the
  outputs of the matmuls (every other one) and of attention are kept, everything cheap between them (norms,
  rotary, SiLU, residual adds, casts) is recomputed. Applied per decoder layer through transformers' own
  checkpointing (`activation_checkpointing_enable`) with torch's `create_selective_checkpoint_contexts`; under FSDP2
  the recompute runs on the all-gather the backward already made (fully_shard's pre-forward hook skips a second
  one during the backward).
- `none` keeps every activation.

float8 (torchao's `convert_to_float8_training`, dynamic tensorwise scaling, float8 all-gather under FSDP2) runs on
Hopper tensor cores only: anywhere else `--float8` is an argument error that says why.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
from collections import defaultdict

from transformers import TrainerCallback

MODES = ("none", "full", "selective")


def checkpointing_problems(mode: str, given: frozenset[str], training) -> list[str]:
    """--activation_checkpointing against --gradient_checkpointing (its alias for `full`) and fsdp_config's
    activation_checkpointing (the same as `full` under FSDP): a contradiction is one problem naming both."""
    if "activation_checkpointing" not in given:
        return []
    problems = []
    if "gradient_checkpointing" in given and bool(training.gradient_checkpointing) != (mode == "full"):
        problems.append(f"--activation_checkpointing {mode} with --gradient_checkpointing "
                        f"{str(bool(training.gradient_checkpointing)).lower()}: --gradient_checkpointing true is "
                        "--activation_checkpointing full; give only --activation_checkpointing")
    fsdp_config = training.fsdp_config or {}
    if training.fsdp and str(fsdp_config.get("activation_checkpointing", False)).lower() == "true" and mode != "full":
        problems.append(f"--activation_checkpointing {mode} with fsdp_config activation_checkpointing true (each layer "
                        "recomputed whole): drop the fsdp_config key, --activation_checkpointing says what is recomputed")
    return problems


def use_checkpointing(mode: str, training, model):
    """`full`: the Trainer's --gradient_checkpointing (returned args); `selective`: the policy below on `model`'s
    decoder layers (the args unchanged); `none`: nothing."""
    if mode == "full" and not training.gradient_checkpointing:
        return training.replaced(gradient_checkpointing=True, activation_checkpointing=True)
    if mode == "selective":
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={
            "use_reentrant": False, "context_fn": selective_contexts})
    return training


def selective_contexts():
    """A fresh pair of contexts for one checkpointed layer call (torch.utils.checkpoint's `context_fn`): the matmul
    count restarts per layer, in the forward and again in the recompute."""
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    return create_selective_checkpoint_contexts(functools.partial(_policy, defaultdict(int)))


@functools.cache
def _saved_ops() -> frozenset:
    import torch

    aten = torch.ops.aten
    names = ("mm", "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
             "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu", "_scaled_mm",
             "max")  # max: float8's amax, cheap to keep and costly to recompute
    ops = {getattr(aten, name).default for name in names if hasattr(aten, name)}
    if hasattr(torch.ops, "_c10d_functional"):
        ops.add(torch.ops._c10d_functional.reduce_scatter_tensor.default)  # never a collective twice
    return frozenset(ops)


def _policy(counts, ctx, op, *args, **kwargs):
    """torchtitan's: keep matmul and attention outputs, except every second matmul, which is recomputed (memory
    between full and none: the FLOPs of half the matmuls, none of attention's); recompute the rest."""
    import torch
    from torch.utils.checkpoint import CheckpointPolicy

    key = "recompute" if ctx.is_recompute else "forward"
    if op == torch.ops.aten.mm.default:
        counts[key] += 1
    keep = op in _saved_ops() and not (op == torch.ops.aten.mm.default and counts[key] % 2 == 0)
    return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE


# ---------------------------------------------------------------------------------------------
# float8


def float8_problems(float8: bool) -> list[str]:
    """--float8 where it cannot run: no CUDA GPU, a GPU before Hopper, or torchao not installed."""
    if not float8:
        return []
    import torch

    if not torch.cuda.is_available():
        return ["--float8: float8 training needs an NVIDIA Hopper GPU (compute capability 9.x) and this run has no "
                "CUDA device; drop --float8"]
    major, minor = torch.cuda.get_device_capability()
    if major != 9:
        return [f"--float8: float8 training needs an NVIDIA Hopper GPU (compute capability 9.x); "
                f"{torch.cuda.get_device_name()} is {major}.{minor}; drop --float8"]
    if importlib.util.find_spec("torchao") is None:
        return ["--float8: torchao is not installed (pip install torchao); or drop --float8"]
    return []


def use_float8(model, training):
    """Swap `model`'s linear layers for torchao's Float8Linear (not the output layer: its logits stay in bf16 for the
    loss; nor a layer whose sizes are not multiples of 16, which float8 matmuls need). Under FSDP2 the weights are
    all-gathered in float8 and their scales computed once per step for every shard together (the returned
    callback); None without FSDP."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    def eligible(module, name: str) -> bool:
        return name != "lm_head" and module.in_features % 16 == 0 and module.out_features % 16 == 0

    sharded = bool(training.fsdp)
    convert_to_float8_training(model, config=Float8LinearConfig(enable_fsdp_float8_all_gather=sharded),
                               module_filter_fn=eligible)
    return Float8Scales() if sharded else None


class Float8Scales(TrainerCallback):
    """After each optimizer step: the float8 scales of every sharded weight in one all-reduce (torchao)."""

    def on_optimizer_step(self, args, state, control, model=None, **kwargs):
        from torchao.float8 import precompute_float8_dynamic_scale_for_fsdp

        precompute_float8_dynamic_scale_for_fsdp(model)


def checkpoints_forward(model=None) -> bool:
    """Whether transformers' checkpointing wraps a decoder layer's `forward` (GradientCheckpointingLayer from
    transformers 5.23), leaving FSDP2's hooks outside the recompute, rather than its __call__; with `model`, also
    whether that model's layers are such layers."""
    import transformers
    from packaging.version import Version
    from transformers.modeling_layers import GradientCheckpointingLayer

    if Version(transformers.__version__) < Version("5.23"):
        return False
    return model is None or any(isinstance(module, GradientCheckpointingLayer) for module in model.modules())


class NoExtraAllGatherWarning(logging.Filter):
    """transformers warns on every copy of the arguments that --activation_checkpointing under FSDP costs a second
    all-gather per layer; with its checkpoint around `forward` it does not (defaults.fsdp_defaults;
    training_args.py installs this filter for every --fsdp run)."""

    def filter(self, record):
        return "redundant AllGather" not in record.getMessage()


def quiet_checkpointing_warning() -> None:
    if not checkpoints_forward():
        return  # there the warning is right
    logger = logging.getLogger("transformers.training_args")
    if not any(isinstance(existing, NoExtraAllGatherWarning) for existing in logger.filters):
        logger.addFilter(NoExtraAllGatherWarning())
