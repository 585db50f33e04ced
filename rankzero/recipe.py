"""A run's `recipe.yaml`: the run as it was trained, as a recipe that replays it.

    recipe = effective_recipe(args, training)      # training: the TrainingArguments the run trains with
    write_recipe(output_dir / "recipe.yaml", recipe)
    train.py recipe.yaml --resume_from_checkpoint auto      # pretrain_cont.sh: the same run, from anywhere

What it holds:
- every flag given (command line or recipe). The Trainer's as given, before TrainingArguments processes
  them: afterwards `--fsdp full_shard` is True with its options moved into `fsdp_config`, which has
  defaults added, and `--report_to` is a list — none of which reads back as the same flags;
- what decides the run's result whether given or not, as the run used it: rankzero's data and model
  settings, the seed, and the Trainer's batch, length, optimizer, schedule, logging, evaluation and saving
  (RECORDED_TRAINING). A replay then trains the same run where a default would differ: a continued run,
  whose defaults are not a from-scratch run's, or another rankzero or transformers;
- paths made absolute, so that it replays from any directory.
What fits the machine (device, precision, kernels, DataLoader workers, the progress bar) is decided again
where the recipe is replayed; run_config.json keeps this run's. Decisions for one start (ONCE) are left out.
tests/test_recipe.py checks that parsing a recording gives the same TrainingArguments and configs.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
from pathlib import Path
from typing import Any

import yaml

from rankzero.config import Args, split_weight

# Whole: every field changes the data or the model. Workers and cache say how and where, and fall back to
# environment variables, which a recording would override: those only as given.
RECORDED_GROUPS = ("sources", "stage", "packing", "dedup", "model")
RECORDED_TRAINING = (
    "output_dir", "per_device_train_batch_size", "gradient_accumulation_steps", "max_steps", "num_train_epochs",
    "optim", "learning_rate", "lr_scheduler_type", "lr_scheduler_kwargs", "warmup_steps", "weight_decay",
    "adam_beta1", "adam_beta2", "adam_epsilon", "max_grad_norm", "logging_strategy", "logging_steps",
    "eval_strategy", "eval_steps", "per_device_eval_batch_size", "save_strategy", "save_steps", "save_total_limit",
    "report_to",
)
ONCE = ("resume_from_checkpoint", "allow_data_change", "overwrite_output_dir", "tokenize_only")
PATHS = ("tokenizer_path", "quality_config", "model_config", "pretrained_model", "cache_dir", "output_dir",
         "logging_dir", "fsdp_config", "deepspeed", "accelerator_config")
SPECS = ("dataset", "eval_dataset")
HEADER = ("# The effective run: every flag given and every setting that decides the result (rankzero/recipe.py).\n"
          "# Replay: ./pretrain_cont.sh {dir} (continue from its model) or RESUME=1 ./pretrain_cont.sh {dir}\n")


def effective_recipe(args: Args, training) -> dict[str, Any]:
    """flag name → plain value (YAML-safe), in the order --help lists rankzero's flags, then the Trainer's."""
    recipe: dict[str, Any] = {}
    for group in RECORDED_GROUPS:
        recipe.update(dataclasses.asdict(getattr(args, group)))
    for group in ("workers", "cache"):
        recipe.update({name: value for name, value in dataclasses.asdict(getattr(args, group)).items()
                       if name in args.given})
    recipe["seed"] = args.seed
    recipe.update({name: getattr(training, name) for name in RECORDED_TRAINING})
    if training.report_to == [] or training.report_to == "none":
        recipe["report_to"] = "none"  # an empty list would replay as nothing, the Trainer's default differs by version
    recipe.update({name: _dict_if_json(value) for name, value in args.training_given.items()
                   if name not in RECORDED_TRAINING})
    return absolute_paths({name: _plain(value) for name, value in recipe.items()
                           if name not in ONCE and value not in (None, "", [], ())})


def write_recipe(path: Path, recipe: dict[str, Any]) -> None:
    text = HEADER.format(dir=path.parent) + yaml.safe_dump(recipe, allow_unicode=True, sort_keys=False)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)  # a resume that dies here leaves the old recipe whole, never half a new one


def _dict_if_json(value: Any) -> Any:
    """A dict flag given as JSON text (`--fsdp_config '{...}'`, as TrainingArguments reads it) as the dict."""
    if isinstance(value, str) and value.startswith("{"):
        try:
            return json.loads(value)
        except ValueError:
            return value  # TrainingArguments has said what is wrong with it before anything is recorded
    return value


def _plain(value: Any) -> Any:
    """A value as YAML holds it and the command line reads it back: enums by value, tuples as lists."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


def absolute_paths(values: dict[str, Any]) -> dict[str, Any]:
    """Flag values with every path made absolute (against the current directory)."""
    return {name: _absolute(name, value) for name, value in values.items()}


def _absolute(name: str, value: Any) -> Any:
    if name in SPECS:
        return type(value)(_absolute_spec(spec) for spec in value)
    if name in PATHS and isinstance(value, str) and not value.startswith("{"):  # a JSON dict is no path
        path = os.path.expanduser(value)
        # A hub name (`org/model`) stays as it is; whatever is here, or is to be made here, becomes absolute.
        if name in ("output_dir", "cache_dir") or os.path.exists(path):
            return os.path.abspath(path)
    return value


def _absolute_spec(spec: str) -> str:
    """A --dataset spec with its path made absolute (a file, dir or glob here); a hub name as it is."""
    from rankzero.data.walk import GLOB_CHARS, glob_files

    location, weight = split_weight(spec)
    path = os.path.expanduser(location)
    if os.path.exists(path) or (GLOB_CHARS & set(location) and glob_files(path)):
        return os.path.abspath(path) + (spec[len(location):] if weight is not None else "")
    return spec
