"""Checks of a training run's arguments that need more than one config, or the model's config file.

    check_training_arguments(args, training)     # ConfigError listing every problem, before any data work
    configs, reasons = data_defaults(args, training)   # our flags a training run sets when the user did not

Each config checks itself when it is made (config.py); what is left is checked here, after
TrainingArguments exist and before anything is prepared or written: the model to train, numbers
TrainingArguments accepts but training cannot use (--max_steps 0 among them), --max_seq_length against the
model's positions (read from its config JSON; no model is built), a writable --output_dir, a resume that
can happen, every --report_to backend installed.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from pathlib import Path

from rankzero.config import Args, SourcesConfig
from rankzero.errors import ConfigError, RankzeroError
from rankzero.train.checkpoints.resume import resume_problems
from rankzero.train.checkpoints.runs import checkpoints_in, used_output_dir_problems
from rankzero.train.checkpoints.sharded import pretrained_weights_problems
from rankzero.train.losses import lm_loss_problems
from rankzero.train.output_dir import output_dir_problems
from rankzero.train.recompute import checkpointing_problems, float8_problems
from rankzero.train.sharding import fsdp_problems
from rankzero.train.training_args import compile_problems, max_steps_problems
from rankzero.train.vocabulary import new_embeddings_problems

logger = logging.getLogger(__name__)

POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")
# Evaluation asked for without saying on what: hold out this percentage of the documents, but no more than
# about this many tokens (an evaluation pass over more costs time and tells little more).
DEFAULT_VALIDATION_PERCENTAGE = 5.0
DEFAULT_VALIDATION_TOKENS = 2_000_000


def check_training_arguments(args: Args, training) -> None:
    problems = []
    if not args.model.model_config and not args.model.pretrained_model:
        problems.append("--model_config FILE.json (from scratch) or --pretrained_model DIR (continue): give one")
    problems += training_number_problems(training) + max_steps_problems(training)
    problems += model_config_problems(args.model, training)
    problems += position_problems(args.packing.max_seq_length, args.model)
    if "output_dir" not in args.given:
        problems.append("--output_dir DIR: give the directory this run writes (the model, checkpoints, run_config.json); "
                        "the Trainer's default, ./trainer_output, would be shared by every run started here")
    problems += output_dir_problems(training.output_dir)
    problems += used_output_dir_problems(training.output_dir, training.resume_from_checkpoint,
                                         args.overwrite_output_dir)
    problems += resume_problems(False, training.resume_from_checkpoint, args.model.allow_data_change)
    problems += report_to_problems(training.report_to)
    problems += fsdp_problems(training)
    problems += lm_loss_problems(args.model.lm_loss, training)
    problems += checkpointing_problems(args.model.activation_checkpointing, args.given, training)
    problems += float8_problems(args.model.float8) + compile_problems(training, args.model.attn_implementation)
    problems += new_embeddings_problems(args.model.train_new_embeddings_steps, training)
    problems += silenced_problems(args, training)
    if problems:
        raise ConfigError(problems)


def benchmark_suites(config) -> tuple:
    """The --benchmarks files read now, on every rank: a corrupt, empty or wrongly-shaped one stops the run at its
    file and line before any data work, not at the first evaluation hours into training."""
    if not config.benchmarks:
        return ()
    from rankzero.data.screen.benchmark_files import read_suites

    try:
        return tuple(read_suites(config.benchmarks, shots=config.benchmark_shots,
                                 max_items=config.benchmark_max_items or None))
    except RankzeroError as error:
        raise ConfigError([str(error)]) from None  # it names the file and line


# A cadence flag and the strategy that would make it do nothing.
CADENCES = {"eval_steps": ("eval_strategy", "evaluated"), "save_steps": ("save_strategy", "saved"),
            "logging_steps": ("logging_strategy", "logged")}


def silenced_problems(args: Args, training) -> list[str]:
    """A cadence given on the command line beside its strategy `no`, also given there: a recipe's `no` has
    yielded to the flag already (recipe.SILENCED_BY), so what is left is the user's own contradiction."""
    from_recipe = set(args.replayed["replayed"]) if args.replayed else set()
    problems = []
    for flag, (strategy, done) in CADENCES.items():
        value = getattr(getattr(training, strategy), "value", getattr(training, strategy))
        if flag in args.given and flag not in from_recipe and strategy in args.given and value == "no":
            problems.append(f"--{flag} {getattr(training, flag):g}: nothing is {done} with --{strategy} no; drop one "
                            "of the two")
    return problems


def model_config_problems(model, training) -> list[str]:
    """A --model_config or --pretrained_model that does not exist (or holds no weights to start from), unless a
    resume takes the model from its checkpoint."""
    resume = training.resume_from_checkpoint
    if (resume == "auto" and checkpoints_in(training.output_dir)) or (resume and resume != "auto"):
        return []  # a checkpoint given by name that does not exist is resume_problems' to report
    if model.model_config and not Path(model.model_config).exists():
        return [f"--model_config {model.model_config}: does not exist"]
    if model.pretrained_model and not Path(model.pretrained_model).exists():
        return [f"--pretrained_model {model.pretrained_model}: does not exist"]
    if model.pretrained_model:
        return pretrained_weights_problems(model.pretrained_model)
    return []


# The pip package of each --report_to backend whose name is not its package's.
REPORT_PACKAGES = {"tensorboard": "tensorboard", "comet_ml": "comet-ml", "azure_ml": "azureml-core",
                   "dagshub": "dagshub mlflow", "flyte": "flytekit", "neptune": "neptune"}


def report_to_problems(report_to) -> list[str]:
    """Every --report_to backend installed, found in seconds rather than after the prepare (the Trainer
    only looks when it starts)."""
    from transformers.integrations import get_available_reporting_integrations
    from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK

    wanted = [report_to] if isinstance(report_to, str) else list(report_to or [])
    available = set(get_available_reporting_integrations())
    problems = []
    for name in wanted:
        if name in ("none", "all"):
            continue
        if name not in INTEGRATION_TO_CALLBACK:
            problems.append(f"--report_to {name}: not a backend the Trainer knows ({', '.join(sorted(INTEGRATION_TO_CALLBACK))})")
        elif name not in available:
            problems.append(f"--report_to {name}: not installed here; pip install {REPORT_PACKAGES.get(name, name)}")
    return problems


def data_defaults(args: Args, training) -> tuple[dict, dict[str, str]]:
    """Our flags a training run sets when the user did not give them: ({config group: new config},
    {flag: "value (why)"}), printed with the Trainer's fast defaults.

    - `--eval_strategy` other than `no` with neither --validation_split_percentage nor --eval_dataset: a
      percentage split (`default_validation_percentage`), so evaluation always has data, decided here,
      before any prepare.
      So does `--eval_steps` without `--eval_strategy` (the Trainer's default `no` would ignore it).
    - `--mode sft` with packing: `--mask_across_documents`, so the samples bin-packed into one row never
      attend to each other; only `--no_mask_across_documents` on the command line turns it off, never a
      value replayed from a recipe."""
    configs, reasons = {}, {}
    strategy = getattr(training.eval_strategy, "value", training.eval_strategy)
    if strategy == "no" and "eval_steps" in args.given and "eval_strategy" not in args.given:
        strategy = "steps"  # learning_defaults turns it on once there is held-out data
    if strategy != "no" and not args.sources.has_validation:
        percentage, why = default_validation_percentage(args.sources)
        configs["sources"] = dataclasses.replace(args.sources, validation_split_percentage=percentage)
        reasons["validation_split_percentage"] = f"{percentage:g} (--eval_strategy {strategy} needs held-out data: {why})"
    from_recipe = set(args.replayed["replayed"]) if args.replayed else set()
    if args.stage.mode == "sft" and args.packing.packing and not args.model.mask_across_documents and (
            "mask_across_documents" not in args.given or "mask_across_documents" in from_recipe):
        configs["model"] = dataclasses.replace(args.model, mask_across_documents=True)
        reasons["mask_across_documents"] = ("True (--mode sft: the samples packed into one row must not attend to "
                                            "each other; only --no_mask_across_documents on the command line allows "
                                            "it" + (f", not {args.recipe}" if "mask_across_documents" in from_recipe
                                                    else "") + ")")
    return configs, reasons


def default_validation_percentage(sources: SourcesConfig) -> tuple[float, str]:
    """A few percent of the documents, capped near DEFAULT_VALIDATION_TOKENS tokens by the input size
    (a token per ~3 bytes, as the disk-space estimate reads it); the plain percentage when a size is
    unknown (a hub source). (percentage, why)"""
    from rankzero.data.inputs.specs import resolve_source
    from rankzero.data.space import BYTES_PER_TOKEN

    try:
        sizes = [resolve_source(spec).total_bytes() for spec in sources.dataset]
    except RankzeroError:  # a missing source: the prepare reports it in its own words
        sizes = [None]
    if any(size is None for size in sizes) or not sum(sizes):
        return DEFAULT_VALIDATION_PERCENTAGE, f"{DEFAULT_VALIDATION_PERCENTAGE:g}% of the documents; the input size is unknown"
    tokens = sum(sizes) / BYTES_PER_TOKEN
    percentage = float(f"{min(DEFAULT_VALIDATION_PERCENTAGE, 100 * DEFAULT_VALIDATION_TOKENS / tokens):.3g}")
    return percentage, (f"{DEFAULT_VALIDATION_PERCENTAGE:g}% of the documents, at most ~{DEFAULT_VALIDATION_TOKENS:,} "
                        f"of the ~{tokens:,.0f} tokens estimated from {sum(sizes):,} input bytes")


def training_number_problems(training) -> list[str]:
    """Numbers TrainingArguments accepts but training cannot use: caught here, before anything is written."""
    problems = []

    def need(flag: str, ok: bool, rule: str) -> None:
        if not ok:
            problems.append(f"--{flag} {getattr(training, flag)}: {rule}")

    def finite(name: str) -> bool:
        value = getattr(training, name)
        return isinstance(value, (int, float)) and math.isfinite(value)

    need("per_device_train_batch_size", training.per_device_train_batch_size >= 1, "must be at least 1")
    need("gradient_accumulation_steps", training.gradient_accumulation_steps >= 1, "must be at least 1")
    need("learning_rate", finite("learning_rate") and training.learning_rate >= 0, "must be a finite number >= 0")
    need("weight_decay", finite("weight_decay") and training.weight_decay >= 0, "must be a finite number >= 0")
    need("max_grad_norm", finite("max_grad_norm") and training.max_grad_norm >= 0,
         "must be a finite number >= 0 (0: no clipping)")
    need("adam_beta1", finite("adam_beta1") and 0 <= training.adam_beta1 < 1, "must be in [0, 1)")
    need("adam_beta2", finite("adam_beta2") and 0 <= training.adam_beta2 < 1, "must be in [0, 1)")
    need("adam_epsilon", finite("adam_epsilon") and training.adam_epsilon > 0, "must be a finite number above 0")
    need("dataloader_num_workers", training.dataloader_num_workers >= 0, "must be at least 0")
    if training.max_steps <= 0:
        need("num_train_epochs", finite("num_train_epochs") and training.num_train_epochs > 0,
             "must be above 0 (or give --max_steps)")
    if training.save_strategy == "steps":
        need("save_steps", finite("save_steps") and training.save_steps > 0, "must be above 0 (or --save_strategy no)")
    return problems


def position_problems(max_seq_length: int, model) -> list[str]:
    """--max_seq_length against the model's positions, read from its config JSON (the model is not built).

    Longer rows are an error: positions past the table were never trained, and a learned position table
    fails outright. With RoPE scaling in the config they are allowed, with a warning that says why."""
    source = model.model_config or (model.pretrained_model and str(Path(model.pretrained_model) / "config.json"))
    try:
        config = json.loads(Path(source).read_text(encoding="utf-8")) if source else None
    except (OSError, ValueError):  # missing or not JSON: building the model reports it with its own words
        return []
    if not isinstance(config, dict):
        return []
    config = config if any(key in config for key in POSITION_KEYS) else config.get("text_config") or {}
    key = next((key for key in POSITION_KEYS if isinstance(config.get(key), int)), None)
    if key is None or max_seq_length <= config[key]:
        return []
    scaling = rope_scaling(config)
    if scaling:
        logger.warning("--max_seq_length %d is longer than %s %d in %s: allowed because its RoPE scaling (%s) "
                       "extends the positions; make sure the model is meant to run that long",
                       max_seq_length, key, config[key], source, scaling)
        return []
    return [f"--max_seq_length {max_seq_length}: longer than the model's {key} {config[key]} ({source}); "
            "positions past it were never trained. Lower --max_seq_length, or use a config with rope_scaling"]


def rope_scaling(config: dict) -> str | None:
    """A description of the config's RoPE scaling, or None when it has none ('default' is none)."""
    for key in ("rope_scaling", "rope_parameters"):  # transformers < 5 / >= 5
        value = config.get(key)
        candidates = [value] if isinstance(value, dict) and ("rope_type" in value or "type" in value) else (
            [v for v in value.values() if isinstance(v, dict)] if isinstance(value, dict) else [])
        for candidate in candidates:
            kind = candidate.get("rope_type") or candidate.get("type")
            if kind and kind != "default":
                factor = candidate.get("factor")
                return f"{kind}" + (f", factor {factor}" if factor is not None else "")
    return None
