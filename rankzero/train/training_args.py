"""TrainingArguments: Hugging Face's class with device set-up deferred, and our fast defaults.

    training = TrainingArguments(output_dir="runs/x")           # no process group yet
    training, applied, warnings = apply_fast_defaults(training, given, runtime)
    set_up_devices(training, runtime)                           # devices + process group, once the data is ready

Why defer: `transformers.TrainingArguments.__post_init__` reads `self.device`, which builds
accelerate's `PartialState` and, under torchrun, initialises the process group. `train.py` parses
its arguments *before* the data is prepared, and the ranks that wait for the builder must not hold
a process group (an NCCL barrier times out after 10 minutes). Our subclass skips that one read;
everything else in `__post_init__` (validation included) runs as before, and `set_up_devices` makes
the first later read of `.device`, which sets devices and the process group up — after the data is ready.

Fast defaults apply only to flags the user did not give (`given`, the field names from the CLI or
recipe), and every ignored user setting is reported as a warning.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from typing import Any

import transformers

from rankzero.runtime import Runtime


class TrainingArguments(transformers.TrainingArguments):
    __doc__ = transformers.TrainingArguments.__doc__

    def __post_init__(self):
        from rankzero.train.recompute import quiet_checkpointing_warning
        from rankzero.train.sharding import fsdp_words_to_config

        # Several backends in one value (`--report_to tensorboard,wandb`, a recipe's list): the command line
        # gives this field one string, which TrainingArguments would take as one backend's name.
        if isinstance(self.report_to, str) and "," in self.report_to:
            self.report_to = [name.strip() for name in self.report_to.split(",") if name.strip()]
        # `--fsdp full_shard` (the form torchtitan-era docs and recipes use) into `fsdp=True` + fsdp_config, as
        # transformers itself does, without its deprecation warning for the string form.
        self.fsdp, self.fsdp_config = fsdp_words_to_config(self.fsdp, self.fsdp_config)
        if self.fsdp:
            quiet_checkpointing_warning()  # before transformers' check below warns of an all-gather that is not made
        self.__dict__["_defer_devices"] = True
        try:
            super().__post_init__()
        finally:
            self.__dict__["_defer_devices"] = False

    @property
    def device(self):
        if self.__dict__.get("_defer_devices"):
            return None  # __post_init__'s only use of it is to trigger the set-up we defer
        return transformers.TrainingArguments.device.fget(self)

    @property
    def world_size(self):
        if self.__dict__.get("_defer_devices"):
            # transformers' DeepSpeed config reads it in __post_init__ (train_batch_size = world × micro-batch ×
            # accumulation). The process group that set-up would create spans the launcher's world (runtime.py).
            return Runtime.from_env().world_size
        return transformers.TrainingArguments.world_size.fget(self)

    def __getattr__(self, name):
        # Only reached for attributes the deferred set-up would have created (read by e.g. `.should_log`).
        if name in ("distributed_state", "_n_gpu") and not self.__dict__.get("_defer_devices"):
            self._setup_devices
            return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


def set_up_devices(training: TrainingArguments, runtime: Runtime):
    """The deferred device set-up (and, with 2+ ranks, the process group): call once every rank holds the data.

    A single process on CPU trains without DDP. torchrun sets LOCAL_RANK even for one process, and accelerate
    takes any LOCAL_RANK on CPU as a distributed run (MULTI_CPU), which it wraps in DDP whatever the world
    size: gradient buckets copied and all-reduced with nobody every step. So LOCAL_RANK is hidden from that one
    read. On CUDA accelerate already skips DDP for one process, and hiding it there would be wrong: without
    LOCAL_RANK the Trainer spreads one process over every visible GPU with nn.DataParallel.
    --fsdp or --deepspeed in a single process gets a process group of one (sharding.one_process_group), never an
    unsharded run (ZeRO-3 builds the model over that group; DeepSpeed would otherwise look for MPI).
    """
    from rankzero.train.sharding import deepspeed_comm, one_process_group

    sharded = training.fsdp or training.deepspeed is not None
    if sharded and not runtime.is_distributed:
        one_process_group()
    if sharded or runtime.is_distributed or not training.use_cpu or "LOCAL_RANK" not in os.environ:
        device = training.device
        deepspeed_comm(training)
        return device
    local_rank = os.environ.pop("LOCAL_RANK")
    try:
        return training.device
    finally:
        os.environ["LOCAL_RANK"] = local_rank


def triton_available() -> bool:
    return importlib.util.find_spec("triton") is not None


def apply_fast_defaults(
    training: TrainingArguments, given: frozenset[str], runtime: Runtime
) -> tuple[TrainingArguments, dict[str, str], list[str]]:
    """Fill in what makes training fast here; return (new args, {field: "value (why)"}, warnings)."""
    import torch

    cuda = torch.cuda.is_available()
    changes: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    warnings: list[str] = []

    def default(name: str, value: Any, why: str) -> None:
        if name not in given and getattr(training, name) != value:
            changes[name] = value
            reasons[name] = f"{value!r} ({why})"

    if not cuda:
        # Without it accelerate sees no device to distribute over: the ranks would train separately.
        default("use_cpu", True, "no CUDA device: train on CPU (gloo between 2+ ranks)")
        if runtime.is_distributed:
            default("ddp_backend", "gloo", "CPU process group")
    else:
        major, minor = torch.cuda.get_device_capability()
        # TF32 is an NVIDIA (CUDA) mode; on ROCm torch.version.cuda is None and transformers rejects --tf32.
        if torch.version.cuda is not None and major >= 8:
            default("tf32", True, "Ampere or newer: TF32 matmuls for the fp32 parts")
        if "fp16" not in given and "bf16" not in given:
            # Plain is_bf16_supported() also says yes where bf16 is only emulated (V100, T4): far slower than fp32.
            if torch.cuda.is_bf16_supported(including_emulation=False):
                default("bf16", True, "GPU supports bf16: autocast over fp32 weights")
            else:
                reasons["bf16"] = (f"False (capability {major}.{minor} has no native bf16: fp32; "
                                   "--fp16 for fp16 autocast with loss scaling)")
        default("optim", "adamw_torch_fused", "one fused kernel per step on CUDA")
        # Regional compile (trainer.py): faster than eager for the 1B config on an H100 (bench/RESULTS.md,
        # "GPU training"), under FSDP2 too (torchtitan: +16% at 8B), where each decoder layer is compiled before
        # it is sharded, FSDP2's hooks outside it (sharding.py). Only where Triton generates the kernels (Ampere+,
        # triton importable), and not under DeepSpeed, which has not been run compiled here.
        if torch.version.cuda is not None and major >= 8 and triton_available() and training.deepspeed is None:
            order = ", then sharded by FSDP2" if training.fsdp else ""
            default("torch_compile", True, f"Ampere or newer with Triton: each decoder layer compiled{order} "
                                           "(--torch_compile false for eager)")
        if not runtime.is_distributed and "LOCAL_RANK" not in os.environ and torch.cuda.device_count() > 1:
            warnings.append(f"one process sees {torch.cuda.device_count()} GPUs: the Trainer will split each batch "
                            "over them with nn.DataParallel (slow); launch ./pretrain.sh (one process per GPU) or "
                            "set CUDA_VISIBLE_DEVICES to one GPU")
    # Only read when DDP wraps the model (2+ ranks); the Trainer's own default (True) costs an extra
    # traversal of the autograd graph every step and warns.
    default("ddp_find_unused_parameters", False, "every parameter of a causal LM gets a gradient")

    workers = training.dataloader_num_workers if "dataloader_num_workers" in given else runtime.dataloader_workers()
    default("dataloader_num_workers", workers, f"{runtime.local_world_size} rank(s) share this node's cores")
    default("dataloader_pin_memory", cuda, "pinned host memory speeds copies to the GPU only")
    if workers > 0:
        default("dataloader_persistent_workers", True, "keep workers across epochs")
        default("dataloader_prefetch_factor", 4, "batches queued per worker")
    else:
        if training.dataloader_prefetch_factor is not None:
            warnings.append("--dataloader_prefetch_factor is ignored: it needs --dataloader_num_workers > 0")
            changes["dataloader_prefetch_factor"] = None
        if training.dataloader_persistent_workers:
            warnings.append("--dataloader_persistent_workers is ignored: it needs --dataloader_num_workers > 0")
            changes["dataloader_persistent_workers"] = False

    if training.logging_nan_inf_filter:
        # It logs the mean of the earlier losses in place of a NaN or inf one: a diverged run would show a loss
        # falling to 0. Non-finite values are logged as they are and stop the run (divergence.py).
        if "logging_nan_inf_filter" in given:
            warnings.append("--logging_nan_inf_filter is ignored: a NaN or inf loss is logged as it is, and a run "
                            "whose gradients stay non-finite stops")
        changes["logging_nan_inf_filter"] = False
        reasons.setdefault("logging_nan_inf_filter", "False (NaN and inf losses are logged as they are)")

    if training.remove_unused_columns:
        if "remove_unused_columns" in given:
            warnings.append("--remove_unused_columns is ignored: the collator needs document_lengths and labels")
        changes["remove_unused_columns"] = False
        reasons.setdefault("remove_unused_columns", "False (the collator reads document_lengths)")

    if changes:
        training = dataclasses.replace(training, **changes)
    return training, reasons, warnings


LOGGING_POINTS = 50  # training-loss lines a run logs by default: a curve, and few enough lines to read
MAX_LOGGING_STEPS = 100


def logging_defaults(training: TrainingArguments, given: frozenset[str], *, steps_per_epoch: int
                     ) -> tuple[TrainingArguments, dict[str, str]]:
    """--logging_steps about the run's steps / LOGGING_POINTS (1..MAX_LOGGING_STEPS) unless given: HF's 500 leaves
    a shorter run without a training loss anywhere (log, TensorBoard, curves, summary). Evaluation, which HF
    runs every --logging_steps, then every 10 of them unless --eval_steps or --logging_steps is given.
    `steps_per_epoch`: optimizer steps, for a run by --num_train_epochs. Returns (new args, {flag: "value (why)"})."""
    import math

    if "logging_steps" in given:
        return training, {}
    if training.max_steps > 0:
        total, what = training.max_steps, "--max_steps"
    else:
        total = max(1, math.ceil(training.num_train_epochs * steps_per_epoch))
        what = f"{training.num_train_epochs:g} epochs × {steps_per_epoch:,} steps"
    steps = min(MAX_LOGGING_STEPS, max(1, round(total / LOGGING_POINTS)))
    changes = {"logging_steps": steps}
    reasons = {"logging_steps": f"{steps} (about {total:,} steps ({what}) / {LOGGING_POINTS}, within "
                                f"1..{MAX_LOGGING_STEPS})"}
    strategy = getattr(training.eval_strategy, "value", training.eval_strategy)
    if strategy == "steps" and "eval_steps" not in given:
        changes["eval_steps"] = 10 * steps
        reasons["eval_steps"] = f"{10 * steps} (every 10 logging steps)"
    return dataclasses.replace(training, **changes), reasons


def max_steps_problems(training) -> list[str]:
    """--max_steps 0 is accepted by TrainingArguments and trains a step; a negative count other than -1 (the
    default: train by epochs) is a typo too."""
    if training.max_steps == 0 or training.max_steps < -1:
        return [f"--max_steps {training.max_steps}: must be at least 1 (or leave it out to train for "
                "--num_train_epochs)"]
    return []


# The learning rate a from-scratch run gets by model size: GPT-3's choices (Brown et al. 2020, table 2.1),
# interpolated in log space between its sizes; below its smallest model, 1e-3 at 10M parameters and less
# (small models take and need a larger step), interpolated up to the 125M point.
LEARNING_RATE_BY_SIZE = [(10e6, 1.0e-3), (125e6, 6.0e-4), (350e6, 3.0e-4), (760e6, 2.5e-4), (1.3e9, 2.0e-4),
                         (2.7e9, 1.6e-4), (6.7e9, 1.2e-4), (13e9, 1.0e-4), (175e9, 0.6e-4)]
WARMUP_FRACTION = 0.02  # of the run's steps: ~2k of 100k, in the range OLMo and Llama use
# Continued pretraining re-warms to a peak far below the from-scratch one and decays by cosine to a floor.
# Published recipes for 7-8B models peak at 1e-5..1e-4 (Llama-3.1 Swallow 8B 2.5e-5, EEVE's stages below
# 1e-4) where the original runs peaked at 3e-4: a larger peak adapts faster but forgets more of what the
# model knew (Ibrahim et al. 2024, "Simple and Scalable Strategies to Continually Pre-train LLMs"; Gupta et
# al. 2023, "how to re-warm"), and they keep the pretraining optimizer (AdamW 0.9/0.95, weight decay 0.1,
# a floor at 10% of the peak). A fifth of GPT-3's from-scratch rate for the size gives 2.2e-5 at 8B, 4.4e-5
# at 1B and 1.2e-4 at 125M; the warm-up is re-done (the optimizer state starts empty).
CONTINUED_RATE_SHARE = 0.2
CONTINUED_MIN_LR_RATE = 0.1  # cosine decays to this share of the peak, not to 0


def learning_rate_for(parameters: int) -> float:
    import math

    points = LEARNING_RATE_BY_SIZE
    if parameters <= points[0][0]:
        return points[0][1]
    for (size, rate), (next_size, next_rate) in zip(points, points[1:]):
        if parameters <= next_size:
            share = (math.log(parameters) - math.log(size)) / (math.log(next_size) - math.log(size))
            return float(f"{math.exp(math.log(rate) + share * (math.log(next_rate) - math.log(rate))):.2g}")
    return points[-1][1]


def learning_defaults(training: TrainingArguments, given: frozenset[str], *, from_scratch: bool, parameters: int,
                      has_eval: bool, resuming: bool = False) -> tuple[TrainingArguments, dict[str, str]]:
    """What a run needs to learn and to be watched, for flags the user (or a recipe) did not set:

    - from scratch, a pretraining schedule instead of Hugging Face's fine-tuning defaults (lr 5e-5, no
      warm-up, linear decay, no weight decay, Adam beta2 0.999 — the loss stays flat for dozens of steps):
      warm-up over 2% of the steps, cosine decay, AdamW betas 0.9/0.95, weight decay 0.1 and a learning
      rate by model size (LEARNING_RATE_BY_SIZE);
    - continuing a checkpoint, a continued-pretraining schedule: the same warm-up, betas and weight decay,
      a fifth of that rate as the peak and cosine decay to a tenth of it (CONTINUED_RATE_SHARE says why);
    - with held-out data, evaluation every --eval_steps (HF: --logging_steps) on the loss only (the
      Trainer would otherwise gather every logit: batch × length × vocabulary floats per step), and, continuing
      a model (not resuming a run), one before the first step: the model's own figures, which every later
      evaluation is read against (a new tokenizer moves the loss per token; bits per byte compare);
    - on a log file rather than a terminal, no progress bar (its carriage-return redraws interleave with
      the step lines); on a terminal the bar stays below them.
    Returns (new args, {flag: "value (why)"})."""
    import sys

    changes: dict[str, Any] = {}
    reasons: dict[str, str] = {}

    def default(name: str, value: Any, why: str) -> None:
        if name not in given and getattr(training, name) != value:
            changes[name] = value
            reasons[name] = f"{value!r} ({why})"

    if from_scratch:
        rate = learning_rate_for(parameters)
        default("learning_rate", rate, f"from scratch, {parameters / 1e6:,.0f}M parameters: GPT-3's rate for the size")
        default("lr_scheduler_type", "cosine", "from scratch: cosine decay")
        default("warmup_steps", WARMUP_FRACTION, f"from scratch: warm-up over {WARMUP_FRACTION:.0%} of the steps")
        default("adam_beta2", 0.95, "from scratch: AdamW betas 0.9/0.95")
        default("weight_decay", 0.1, "from scratch: AdamW weight decay 0.1")
    else:
        rate = float(f"{learning_rate_for(parameters) * CONTINUED_RATE_SHARE:.2g}")
        default("learning_rate", rate, f"continued pretraining, {parameters / 1e6:,.0f}M parameters: "
                                       f"{CONTINUED_RATE_SHARE:g}x GPT-3's from-scratch rate for the size")
        if "lr_scheduler_type" not in given:  # its kwargs belong to the schedule: only with ours
            default("lr_scheduler_type", "cosine_with_min_lr", "continued pretraining: cosine decay to a floor")
            default("lr_scheduler_kwargs", {"min_lr_rate": CONTINUED_MIN_LR_RATE},
                    f"continued pretraining: the floor at {CONTINUED_MIN_LR_RATE:.0%} of the peak")
        default("warmup_steps", WARMUP_FRACTION, f"continued pretraining: re-warm over {WARMUP_FRACTION:.0%} of "
                                                 "the steps (the optimizer state starts empty)")
        default("adam_beta2", 0.95, "continued pretraining: AdamW betas 0.9/0.95, as in pretraining")
        default("weight_decay", 0.1, "continued pretraining: AdamW weight decay 0.1, as in pretraining")
    if has_eval:
        strategy = getattr(training.eval_strategy, "value", training.eval_strategy)
        if strategy == "no":
            default("eval_strategy", "steps", "held-out data given: evaluate every --eval_steps and at the end")
        default("prediction_loss_only", True, "evaluation needs the loss only, not every logit")
        if not from_scratch and not resuming:
            default("eval_on_start", True, "continuing a model: its evaluation at step 0, the baseline")
    if training.disable_tqdm is None or "disable_tqdm" not in given:
        default("disable_tqdm", not sys.stdout.isatty(), "a progress bar only on a terminal; one line per "
                                                         "logging step either way")
    if changes:
        training = dataclasses.replace(training, **changes)
    return training, reasons
