"""The training arguments' defaults, resolved in one place: every value rankzero chooses where no flag gave one,
each with the reason it is printed with.

    facts = Facts(given=args.given, runtime=runtime)
    training, reasons, notes = resolve(args.training, facts, BEFORE_MODEL)   # devices are set up on these
    facts = dataclasses.replace(facts, model=model, parameters=…, steps_per_epoch=…, …)
    training, more, more_notes = resolve(training, facts, WITH_MODEL)        # the set-up carries over

A row is a function `row(training, facts) -> (changes, {flag: "value (why)"}, notes)`: it reads the arguments
as the rows before it left them and what the run knows (`Facts`), changes only flags the user (or a recipe)
did not give, and says in a note each setting of theirs it ignores. To add a default, write a row and list it
in BEFORE_MODEL when it depends on nothing the model or the data decide (the device set-up reads these, and
DeepSpeed's ZeRO-3 partitions the weights over the process group as the model is built), else in WITH_MODEL.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from typing import Any, Callable

from rankzero.runtime import Runtime
from rankzero.train.recompute import checkpoints_forward
from rankzero.train.sharding import sync_each_micro_batch, zero3
from rankzero.train.training_args import TrainingArguments

RowResult = tuple[dict[str, Any], dict[str, str], list[str]]  # what a row returns: (changes, reasons, notes)


@dataclasses.dataclass(frozen=True)
class Facts:
    """What the defaults are chosen from. The model's and the data's fields stay None until they are known."""
    given: frozenset[str]  # flags the user or a recipe set: never overridden
    runtime: Runtime
    model: Any = None
    parameters: int | None = None  # the model's, sharded or not
    from_scratch: bool = True
    has_eval: bool = False
    resuming: bool = False
    steps_per_epoch: int | None = None  # optimizer steps in one pass over the data


def resolve(training: TrainingArguments, facts: Facts, rows: tuple[Callable[[TrainingArguments, Facts], RowResult], ...]
            ) -> tuple[TrainingArguments, dict[str, str], list[str]]:
    """The rows applied in order: (the arguments, {flag: "value (why)"}, notes on the settings ignored)."""
    reasons: dict[str, str] = {}
    notes: list[str] = []
    for row in rows:
        changes, why, said = row(training, facts)
        if changes:
            training = training.replaced(**changes)
        reasons.update(why)
        notes += said
    return training, reasons, notes


def _collector(training: TrainingArguments, given: frozenset[str]):
    """(changes, reasons, notes, default): `default(name, value, why)` records a flag that was not given and
    differs, with its reason."""
    changes: dict[str, Any] = {}
    reasons: dict[str, str] = {}

    def default(name: str, value: Any, why: str) -> None:
        if name not in given and getattr(training, name) != value:
            changes[name] = value
            reasons[name] = f"{value!r} ({why})"

    return changes, reasons, [], default


# ---------------------------------------------------------------------------------------------
# Before the model: the device, the data loader, DeepSpeed


def triton_available() -> bool:
    return importlib.util.find_spec("triton") is not None


def fast_defaults(training: TrainingArguments, facts: Facts) -> RowResult:
    """What makes training fast here: the device, the data loader, and the Trainer's settings rankzero overrides."""
    import torch

    given, runtime = facts.given, facts.runtime
    cuda = torch.cuda.is_available()
    changes, reasons, warnings, default = _collector(training, given)

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

    return changes, reasons, warnings


def deepspeed_defaults(training: TrainingArguments, facts: Facts) -> RowResult:
    """ZeRO-3 saves the finished model as one HF dir unless the JSON says otherwise: without
    stage3_gather_16bit_weights_on_model_save the Trainer writes only DeepSpeed's own checkpoint (zero_to_fp32.py
    to recover weights) where rankzero promises a dir that from_pretrained loads."""
    import json

    if not zero3(training):
        return {}, {}, []
    config = training.deepspeed
    if isinstance(config, str):
        if not os.path.isfile(config):  # base64 or JSON text, which transformers also takes: left as given
            return {}, {}, []
        with open(config, encoding="utf-8") as handle:  # transformers has read it already: it parses
            config = json.load(handle)
    zero = config.get("zero_optimization", {})
    if "stage3_gather_16bit_weights_on_model_save" in zero:
        return {}, {}, []
    config = {**config, "zero_optimization": {**zero, "stage3_gather_16bit_weights_on_model_save": True}}
    why = ("zero_optimization.stage3_gather_16bit_weights_on_model_save True (the finished model gathered into one "
           "HF dir that from_pretrained loads, in the dtype it trained in)")
    return {"deepspeed": config}, {"deepspeed": why}, []


# ---------------------------------------------------------------------------------------------
# With the model and the data: the schedule, FSDP's units, logging


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


def learning_defaults(training: TrainingArguments, facts: Facts) -> RowResult:
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
      the step lines); on a terminal the bar stays below them."""
    import sys

    given, from_scratch, parameters = facts.given, facts.from_scratch, facts.parameters
    changes, reasons, notes, default = _collector(training, given)

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
    if facts.has_eval:
        strategy = getattr(training.eval_strategy, "value", training.eval_strategy)
        if strategy == "no":
            default("eval_strategy", "steps", "held-out data given: evaluate every --eval_steps and at the end")
        default("prediction_loss_only", True, "evaluation needs the loss only, not every logit")
        if not from_scratch and not facts.resuming:
            default("eval_on_start", True, "continuing a model: its evaluation at step 0, the baseline")
    if training.disable_tqdm is None or "disable_tqdm" not in given:
        default("disable_tqdm", not sys.stdout.isatty(), "a progress bar only on a terminal; one line per "
                                                         "logging step either way")
    return changes, reasons, notes


# What --fsdp full_shard alone leaves open: key → (value, why). The decoder-layer class is the model's.
FSDP_DEFAULTS = {
    "version": (2, "FSDP2: per-parameter DTensor shards (torch fully_shard)"),
    "auto_wrap_policy": ("TRANSFORMER_BASED_WRAP", "one FSDP unit per decoder layer"),
    "state_dict_type": ("SHARDED_STATE_DICT", "checkpoints in DCP shards: each rank writes its own, no gather"),
    "cpu_ram_efficient_loading": (True, "weights read by rank 0 only and broadcast into the shards"),
}


def fsdp_defaults(training: TrainingArguments, facts: Facts) -> RowResult:
    """What `--fsdp full_shard` leaves open (FSDP_DEFAULTS, the model's decoder layer); keys given in --fsdp_config
    win. One reason for them all: {"fsdp_config": "key value (why); …"} for the keys filled in."""
    if not training.fsdp:
        return {}, {}, []
    model = facts.model
    config = dict(training.fsdp_config or {})
    layers = list(getattr(model, "_no_split_modules", None) or [])
    wanted = {**FSDP_DEFAULTS}
    if layers:
        wanted["transformer_layer_cls_to_wrap"] = (layers, f"{type(model).__name__}'s decoder layer")
    changes, reasons = {}, {}
    asked = str(config.get("activation_checkpointing", False)).lower() in ("true", "1")
    if (training.gradient_checkpointing or asked) and checkpoints_forward(model):
        # transformers' own checkpointing wraps each decoder layer's `forward`, not its __call__: FSDP2's hooks stay
        # outside it and the recompute runs on the backward's one all-gather (2 gathers a layer a step, as without
        # checkpointing: tests/train/test_compile_fsdp.py counts them), and a layer compiled whole (trainer.py) holds its
        # checkpoint, as torchtitan's blocks do. accelerate's checkpoint_wrapper (fsdp_config
        # activation_checkpointing) shards the layer inside the wrapper it compiles: dynamo stops at FSDP2's hooks
        # there (a graph break) and every decoder layer runs eager.
        config.pop("activation_checkpointing", None)
        changes["activation_checkpointing"] = True
        if not training.gradient_checkpointing:
            reasons["activation_checkpointing"] = ("True (fsdp_config's activation_checkpointing: each decoder layer's "
                                                   "forward recomputed inside its FSDP unit, compiled with the layer)")
    elif training.gradient_checkpointing:
        # An older transformers checkpoints the layer's __call__, FSDP2's hooks inside: a second all-gather per layer
        # in the backward. accelerate's wrapper recomputes inside the FSDP unit on the one gather (eager only: see
        # above). (transformers refuses the two together.)
        wanted["activation_checkpointing"] = (True, "--gradient_checkpointing under FSDP: each decoder layer "
                                                    "recomputed inside its FSDP unit, on the same all-gather")
        flags = {f.name for f in dataclasses.fields(training)}
        changes = {name: False for name in ("gradient_checkpointing", "activation_checkpointing") if name in flags}
    filled = []
    for key, (value, why) in wanted.items():
        if key not in config:
            config[key] = value
            filled.append(f"{key} {value!r} ({why})")
    reasons = ({"fsdp_config": "; ".join(filled)} if filled else {}) | reasons
    accelerator_config, why = sync_each_micro_batch(training)
    if why:
        changes["accelerator_config"] = accelerator_config
        reasons["accelerator_config"] = why
    return {"fsdp_config": config, **changes}, reasons, []


LOGGING_POINTS = 50  # training-loss lines a run logs by default: a curve, and few enough lines to read
MAX_LOGGING_STEPS = 100


def logging_defaults(training: TrainingArguments, facts: Facts) -> RowResult:
    """--logging_steps about the run's steps / LOGGING_POINTS (1..MAX_LOGGING_STEPS) unless given: HF's 500 leaves
    a shorter run without a training loss anywhere (log, TensorBoard, curves, summary). Evaluation, which HF
    runs every --logging_steps, then every 10 of them unless --eval_steps or --logging_steps is given.
    `facts.steps_per_epoch`: optimizer steps, for a run by --num_train_epochs."""
    import math

    given, steps_per_epoch = facts.given, facts.steps_per_epoch
    if "logging_steps" in given:
        return {}, {}, []
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
    return changes, reasons, []



BEFORE_MODEL = (fast_defaults, deepspeed_defaults)
WITH_MODEL = (learning_defaults, fsdp_defaults, logging_defaults)  # the learning rate by size, FSDP's layer class
