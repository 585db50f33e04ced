"""Sharded training: FSDP2 and DeepSpeed through the HF Trainer and accelerate, checked and set up here.

    problems = deepspeed_problems(path, fsdp)          # args.py, before TrainingArguments is built
    problems = fsdp_problems(training)                 # checks.py, with the other argument checks
    model, extension = build_model(…, load_weights=not (rank_zero_loads(training, runtime) and runtime.rank))
    trainer.add_callback(RankZeroWeights(model, runtime))  # run.py: rank 0's weights into every rank's shards
    policy = mixed_precision_policy(training)          # trainer.py, into accelerate's FSDP plugin
    shard_on_cpu(accelerator, plugin)                  # trainer.py: a CPU run shards too (see below)
    text = describe_sharding(accelerator)              # run.py: the `data_parallel = …` line

FSDP means FSDP2 (torch's `fully_shard`, accelerate's `fsdp_version` 2): every decoder layer is one unit
whose parameters are DTensor shards, gathered for its forward and backward only. `--fsdp full_shard` is
enough; what it leaves open is filled in (defaults.fsdp_defaults: each printed as a default, each overridable in
`--fsdp_config`):
the unit is the model's own decoder-layer class (transformers' `_no_split_modules`), checkpoints are
sharded (DCP: every rank writes its own shard, nothing is gathered on rank 0), and weights are read once,
by rank 0, which sends every other rank only its shards (the others build the model without weights).
Under bf16 the parameters are cast to bf16 for compute while the fp32 master weights stay sharded, and
gradients are reduced in fp32 (torch's MixedPrecisionPolicy; accelerate's own default reduces in bf16).
With gradient accumulation every micro-batch's gradients are reduce-scattered into the shards (accelerate's
`sync_each_batch`, printed as a default): the Trainer's `no_sync` would keep the whole model's gradients unsharded
on every rank between micro-steps.
With --torch_compile (the default on Ampere+) the order is torchtitan's: each decoder layer checkpointed
(transformers' checkpointing, around its forward), compiled, then sharded (defaults.fsdp_defaults says why).

A requested sharding never silently becomes DDP: a Trainer that did not end up with FSDP stops the run.
"""

from __future__ import annotations

import importlib.util
import os

from transformers import TrainerCallback

from rankzero.errors import RankzeroError

# ---------------------------------------------------------------------------------------------
# Argument time


def deepspeed_problems(path: str | None, fsdp: str | bool | None = None) -> list[str]:
    """--deepspeed (`path`, as parsed; None without it) beside --fsdp (`fsdp`, as parsed: the Trainer would build
    both and stop after the prepare), without the package (transformers would stop with a metadata traceback in
    TrainingArguments), or with a JSON file that does not parse (its message would not name the file)."""
    if path is None:
        return []
    if fsdp:
        given = "--fsdp" if fsdp is True else f"--fsdp {fsdp}"
        return [f"{given} with --deepspeed {path}: two ways of sharding the same model; give one of them (--fsdp "
                "full_shard: FSDP2, or --deepspeed: ZeRO)"]
    if importlib.util.find_spec("deepspeed") is None:
        return ["--deepspeed: the deepspeed package is not installed here (pip install deepspeed), or shard with "
                "--fsdp full_shard instead"]
    if os.path.isfile(path):  # else transformers says what it expected (a path, JSON text or base64)
        import json

        try:
            with open(path, encoding="utf-8") as handle:
                json.load(handle)
        except ValueError as error:
            return [f"--deepspeed {path}: not valid JSON ({error})"]
    return []


def fsdp_problems(training) -> list[str]:
    if not training.fsdp:
        return []
    config = training.fsdp_config or {}
    if int(config.get("version", 2)) != 2:
        return [f"--fsdp_config version {config['version']}: rankzero shards with FSDP2 only (FSDP1 is deprecated in "
                "transformers and does not run on CPU); drop the key or set it to 2"]
    if str(config.get("cpu_offload", False)).lower() in ("true", "1") and on_cpu(training):
        # fully_shard pins each offloaded shard in host memory, which needs an accelerator: a traceback on CPU.
        return ["--fsdp offload (fsdp_config cpu_offload): keeps each shard in pinned host memory between uses of a "
                "GPU; this run is on the CPU, where the shards are in host memory already: drop 'offload'"]
    return []


def on_cpu(training) -> bool:
    import torch

    return bool(training.use_cpu) or not torch.accelerator.is_available()


# ---------------------------------------------------------------------------------------------
# Set-up


def fsdp_words_to_config(fsdp, config):
    """(fsdp, fsdp_config) with the FSDP2 words of `--fsdp full_shard|shard_grad_op [auto_wrap] [offload]` moved
    into fsdp_config; any other value is left for transformers to judge (and an FSDP1-only word to refuse)."""
    if not isinstance(fsdp, str) or fsdp.strip().lower() in ("", "true", "false", "1", "0"):
        return fsdp, config
    words = fsdp.split()
    if not set(words) <= {"full_shard", "shard_grad_op", "auto_wrap", "offload"}:
        return fsdp, config
    if isinstance(config, str):  # JSON text (--fsdp_config '{…}') or a JSON file's path
        import json

        try:
            if config.lstrip().startswith("{"):
                config = json.loads(config)
            else:
                with open(config, encoding="utf-8") as handle:
                    config = json.load(handle)
        except (OSError, ValueError) as error:  # args.py reports a ValueError as an argument problem
            raise ValueError(f"--fsdp_config {config}: {error}") from None
    config = dict(config or {})
    if "full_shard" in words or "shard_grad_op" in words:
        config.setdefault("reshard_after_forward", "full_shard" in words)
    if "offload" in words:
        config.setdefault("cpu_offload", True)
    return True, config


def sync_each_micro_batch(training) -> tuple[object, str | None]:
    """Under FSDP with gradient accumulation: reduce-scatter every micro-batch's gradients (accelerate's
    `sync_each_batch`) unless --accelerator_config says otherwise. Returns (accelerator_config, why or None).

    Without it the Trainer runs the non-final micro-steps in `no_sync`, which FSDP2 turns into
    set_requires_gradient_sync(False): each rank then keeps the whole model's gradients unsharded, in fp32 under
    an fp32 reduce dtype, until the last micro-step (32 GB a GPU at 8B). Reduced each micro-batch, a rank holds
    only its shard of the sum, as torchtitan does; the cost is one reduce-scatter per micro-batch instead of one
    per step, which overlaps the backward as the last one does."""
    import dataclasses

    config = training.accelerator_config
    accumulation = dict(config.gradient_accumulation_kwargs or {})
    if training.gradient_accumulation_steps <= 1 or "sync_each_batch" in accumulation:
        return config, None
    accumulation["sync_each_batch"] = True
    why = ("gradient_accumulation_kwargs.sync_each_batch True (each micro-batch's gradients reduce-scattered into the "
           "shards: no unsharded copy of the model's gradients between micro-steps)")
    return dataclasses.replace(config, gradient_accumulation_kwargs=accumulation), why


def zero3(training) -> bool:
    """Whether --deepspeed asks for ZeRO-3: transformers then builds the model inside deepspeed.zero.Init, which
    partitions each parameter over the process group as it is created. DeepSpeed reads the world size for its batch
    arithmetic there too (train_batch_size = micro-batch x accumulation x world), so the group must exist first."""
    config = getattr(training, "hf_deepspeed_config", None)
    return config is not None and config.is_zero3()


def rank_zero_loads(training, runtime) -> bool:
    """Whether rank 0 alone reads the weights and broadcasts them into the other ranks' shards (RankZeroWeights):
    under FSDP with cpu_ram_efficient_loading (the default) and 2+ ranks. One copy of the weights in host memory
    per job instead of one per rank; the other ranks build the model without weights (build_without_weights)."""
    if not training.fsdp or not runtime.is_distributed:
        return False
    return str((training.fsdp_config or {}).get("cpu_ram_efficient_loading", True)).lower() == "true"


def build_without_weights(build):
    """`build()`'s model without reading or initialising weights: its parameters are allocated and never
    written. Linux maps such pages only when they are touched, so they cost no memory, while each parameter
    still has storage of its own (accelerate maps the optimizer's parameters to their shards by data pointer:
    on the meta device they would all be 0). Sharding copies one shard of each, and RankZeroWeights or the
    checkpoint fills the shards in. Buffers (rotary frequencies) are computed as usual."""
    import torch
    from accelerate import init_empty_weights

    with init_empty_weights(include_buffers=False):
        model = build()
    for module in model.modules():
        for name, parameter in module.named_parameters(recurse=False):
            module._parameters[name] = torch.nn.Parameter(torch.empty_like(parameter, device="cpu"),
                                                          requires_grad=parameter.requires_grad)
    model.tie_weights()  # parameters replaced one by one: shared ones (tied embeddings) come apart
    return model


class RankZeroWeights(TrainerCallback):
    """Rank 0's weights into every rank's shards, once the Trainer has sharded the model (on_train_begin comes
    right after accelerate's prepare, before the first step). Not used on a resume: each rank reads its own
    shard from the checkpoint instead.

    Written here because neither library sends a rank only its shard: accelerate's cpu_ram_efficient_loading
    broadcasts each full tensor and keeps the shard as a view of it (every rank ends up holding the whole
    model), and torch's set_model_state_dict(broadcast_from_rank0) copies the shard out but still receives
    every full tensor on every rank. Here rank 0 cuts each tensor as FSDP2 does (torch.chunk along dim 0,
    `Shard(0)` on the 1-D mesh of full_shard) and sends each rank its piece, received in place."""

    def __init__(self, model, runtime):
        self.weights = model.state_dict() if runtime.rank == 0 else {}  # references, no copy: kept past sharding

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if self.weights is None:
            return
        import torch.distributed as dist
        from torch.distributed.tensor import DTensor, Shard

        rank, world = dist.get_rank(), dist.get_world_size()
        for name, tensor in model.state_dict().items():
            sharded = isinstance(tensor, DTensor)
            assert not sharded or (tuple(tensor.placements) == (Shard(0),) and tensor.device_mesh.ndim == 1), \
                f"{name}: {tensor.placements} is not full_shard's layout"
            local = tensor.to_local() if sharded else tensor
            if rank == 0:
                full = self.weights[name].detach()
                pieces = list(full.chunk(world, dim=0)) if sharded else [full] * world
                pieces += [full.new_empty((0, *full.shape[1:]))] * (world - len(pieces))
                for destination in range(1, world):
                    if pieces[destination].numel():
                        dist.send(pieces[destination].contiguous().to(local.device), dst=destination)
                local.copy_(pieces[0])
            elif local.numel():
                dist.recv(local, src=0)
        self.weights = None


def mixed_precision_policy(training):
    """bf16 (or fp16) compute over fp32 master weights, gradients reduced in fp32; None for fp32 training.

    accelerate's FSDP plugin would derive param_dtype = reduce_dtype = bf16 from --bf16: gradients summed over
    hundreds of ranks in bf16 lose their low bits. torchtitan and OLMo-core reduce in fp32, as here."""
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if training.bf16 or training.fp16:
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16 if training.bf16 else torch.float16,
                                    reduce_dtype=torch.float32)
    return None


def shard_on_cpu(accelerator, plugin) -> None:
    """Turn FSDP on for a CPU run over gloo, where accelerate would train the model under DDP instead.

    accelerate (1.15, AcceleratorState) sets FSDP up only for accelerator device types (CUDA, XPU, NPU, …); on
    CPU a requested FSDP plugin is dropped and the run trains under DDP. torch's fully_shard itself runs on CPU
    over gloo, and a CPU-only test suite must exercise the sharded path, so for a MULTI_CPU run only the state
    that accelerate shares between its objects is switched to FSDP with the plugin the Trainer built. A GPU run
    never comes here: accelerate has set FSDP up itself."""
    from accelerate import PartialState
    from accelerate.utils import DistributedType

    state = accelerator.state
    if state.distributed_type == DistributedType.FSDP:
        return
    if state.distributed_type != DistributedType.MULTI_CPU or plugin is None:
        raise RankzeroError(f"--fsdp was requested but accelerate set this run up as {state.distributed_type.value} "
                            f"on {state.device}: refusing to train unsharded (launch with torchrun, one process per "
                            "device, or drop --fsdp)")
    state.distributed_type = DistributedType.FSDP
    # Every later AcceleratorState() copies PartialState's shared state over its own (accelerate's state.py), which
    # turned the run back to MULTI_CPU: Accelerator.no_sync then did nothing, so gradient accumulation on CPU never
    # ran the path GPUs run. accelerate records FSDP there itself when it sets FSDP up on a GPU.
    PartialState._shared_state["distributed_type"] = DistributedType.FSDP
    state.fsdp_plugin = plugin
    if state.mixed_precision != "no":
        plugin.set_mixed_precision(state.mixed_precision)  # keeps a policy already set (mixed_precision_policy)


def quiet_checkpoint_logs() -> None:
    """accelerate logs four INFO lines per checkpoint under FSDP ("Saving model to …"); rankzero says it once."""
    import logging

    logging.getLogger("accelerate.utils.fsdp_utils").setLevel(logging.WARNING)


def describe_sharding(accelerator, recomputed: bool) -> str:
    """The `data_parallel = …` line; `recomputed`: decoder layers checkpointed (--activation_checkpointing)."""
    plugin = accelerator.state.fsdp_plugin
    policy = plugin.mixed_precision_policy
    precision = ("fp32 throughout" if policy is None else
                 f"parameters {str(policy.param_dtype).removeprefix('torch.')} for compute over fp32 shards, "
                 f"gradients reduced in {str(policy.reduce_dtype).removeprefix('torch.')}")
    layers = ", ".join(plugin.transformer_cls_names_to_wrap or []) or "the whole model"
    mode = "full_shard" if plugin.reshard_after_forward else "shard_grad_op"
    recompute = "; activations recomputed per unit" if recomputed or plugin.activation_checkpointing else ""
    reduced = "; gradients reduce-scattered every micro-batch" if \
        accelerator.gradient_state.plugin_kwargs.get("sync_each_batch") else ""
    return (f"FSDP{plugin.fsdp_version} {mode} over {accelerator.num_processes} process(es), one unit per {layers}; "
            f"{precision}{recompute}{reduced}; {str(plugin.state_dict_type).rsplit('.', 1)[-1]} checkpoints")
