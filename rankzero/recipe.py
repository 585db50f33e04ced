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

Replayed into what (`replay`, called by args.py for any recipe that comes first on a command line):
- a resume (`--resume_from_checkpoint` given) is the same run on the same data: every key;
- a run continued from a recorded one (pretrain_cont.sh) is a new run: each key belongs to a group of
  REPLAY, and a group is left out where it would describe another run (DROPPED_WHEN): the schedule of a
  from-scratch run is not a continued run's, a pretraining run's data settings and rows are not SFT's.
  What was replayed and what was not, and why, is printed (`describe`) and kept in run_config.json;
- any recipe: a value a flag on the command line would otherwise be silenced by (`eval_strategy: no`
  beside `--validation_split_percentage`) yields to the flag (SILENCED_BY).
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
from rankzero.trainer_flags import NEGATIVE_NUMBER

# Whole: every field changes the data or the model. Workers and cache say how and where, and fall back to
# environment variables, which a recording would override: those only as given.
RECORDED_GROUPS = ("sources", "stage", "packing", "dedup", "model", "benchmarks")
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
RECORDED_MARK = "# The effective run:"  # the first line of every recipe.yaml a run writes
HEADER = (RECORDED_MARK + " every flag given and every setting that decides the result (rankzero/recipe.py).\n"
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
    from rankzero.data.inputs.walk import GLOB_CHARS, glob_files

    location, weight = split_weight(spec)
    path = os.path.expanduser(location)
    if os.path.exists(path) or (GLOB_CHARS & set(location) and glob_files(path)):
        return os.path.abspath(path) + (spec[len(location):] if weight is not None else "")
    return spec


# ---------------------------------------------------------------------------------------------
# Replaying a recorded run into another one

# Every key a run records, by what it describes. A run continued from a recorded one takes a group only where
# it still holds (DROPPED_WHEN); a resume takes every key. A Trainer flag not named here is "run".
REPLAY = {
    # How the run computes and where it writes: the same for every run continued from it.
    "run": ("tokenizer_path", "tokenizer_engine", "mode", "fingerprint_content", "max_seq_length", "packing",
            "model_config", "pretrained_model", "attn_implementation", "pad_to_multiple_of", "seed", "output_dir",
            "per_device_train_batch_size", "gradient_accumulation_steps", "per_device_eval_batch_size", "optim",
            "adam_epsilon", "max_grad_norm", "save_total_limit", "report_to",
            "dataset_num_proc", "dataset_batch_size", "dataset_writer_batch_size", "prep_engine", "ray_address",
            "dedup_memory_mb", "ray_task_mb", "cache_dir", "prep_scope", "prep_timeout_s", "prep_probe_s",
            "prep_startup_grace_s", "verify_data", "benchmarks", "benchmark_shots", "benchmark_max_items",
            "lm_loss", "activation_checkpointing", "float8"),
    # What a row is: pretraining documents or SFT samples (an SFT run masks across its samples, checks.py).
    "rows": ("mask_across_documents",),
    # The data and how it was prepared: the source run's corpus and filters, not another's.
    "data": ("dataset", "eval_dataset", "validation_split_percentage", "txt_sample_by", "max_document_mb",
             "text_column", "quality_filter", "quality_config", "skip_bad_records", "on_decode_error", "pii",
             "decontaminate", "decontaminate_benchmarks", "dedup", "dedup_threshold"),
    # The optimizer's schedule, the run's length and the cadences measured in its steps: each kind of run has
    # its own defaults (defaults.learning_defaults).
    "schedule": ("learning_rate", "lr_scheduler_type", "lr_scheduler_kwargs", "warmup_steps", "warmup_ratio",
                 "weight_decay", "adam_beta1", "adam_beta2", "max_steps", "num_train_epochs", "logging_strategy",
                 "logging_steps", "logging_first_step", "eval_strategy", "eval_steps", "eval_delay", "eval_on_start",
                 "save_strategy", "save_steps", "load_best_model_at_end", "metric_for_best_model",
                 "greater_is_better", "train_new_embeddings_steps"),
}
GROUP_OF = {key: group for group, keys in REPLAY.items() for key in keys}
# A group is left out when the new run differs from the recorded one in any of these: "mode" (pretraining or
# SFT), "kind" (from scratch, continued, SFT), "dataset" (given on the command line).
DROPPED_WHEN = {"run": (), "rows": ("mode",), "data": ("mode", "dataset"), "schedule": ("kind",)}
# A recipe value that would silence a flag given on the command line: key → (value, the flags it silences).
SILENCED_BY = {"eval_strategy": ("no", ("validation_split_percentage", "eval_dataset", "eval_steps")),
               "save_strategy": ("no", ("save_steps",)),
               "logging_strategy": ("no", ("logging_steps",))}
KINDS = {"scratch": "pretraining from scratch", "continued": "continued pretraining", "sft": "SFT"}


def replay_argv(recipe_argv: list[str], path: str, argv: list[str], names: dict[str, str]
                ) -> tuple[list[str], dict[str, Any]]:
    """`replay` on flags: a recipe's (args.recipe_to_argv: each key once, as --key, then its values) and the
    command line's after it (`names`: option string → field). (the recipe's flags to apply, what was done)"""
    recipe: dict[str, list[str]] = {}
    for token in recipe_argv:
        if token.startswith("--"):
            recipe[token[2:]] = []
        else:
            recipe[next(reversed(recipe))].append(token)
    given: dict[str, list[str]] = {}
    current = None
    for arg in argv:
        if arg.startswith("-") and not NEGATIVE_NUMBER.match(arg):
            option, _, value = arg.partition("=")
            current = names.get(option)
            if current is not None:
                negated = option.startswith(("--no_", "--no-")) and current == option[5:].replace("-", "_")
                given[current] = [value] if value else ["False"] if negated else []
        elif current is not None:
            given[current].append(arg)
    kept, done = replay({key: _one(tokens) for key, tokens in recipe.items()}, path,
                        {key: _one(tokens) for key, tokens in given.items()}, is_recorded(path))
    return [token for key, tokens in recipe.items() if key in kept for token in (f"--{key}", *tokens)], done


def _one(tokens: list[str]) -> Any:
    """A flag's value tokens as one value: True for a bare flag, the token, or the list."""
    return True if not tokens else tokens[0] if len(tokens) == 1 else tokens


def is_recorded(path: str | os.PathLike) -> bool:
    """Whether a recipe file is a run's own recipe.yaml (its first line), not one written by hand."""
    with open(path, encoding="utf-8") as handle:
        return handle.readline().startswith(RECORDED_MARK)


def kind_of(values: dict[str, Any]) -> str:
    if values.get("mode") == "sft":
        return "sft"
    return "continued" if values.get("pretrained_model") else "scratch"


def replay(recipe: dict[str, Any], path: str, command_line: dict[str, Any], recorded: bool
           ) -> tuple[set[str], dict[str, Any]]:
    """(the recipe's keys to apply, what was done). `recipe` and `command_line`: flag name → value, the
    command line's being the flags given after the recipe."""
    kept, dropped, silenced = set(recipe), {}, []
    for key, (value, flags) in SILENCED_BY.items():
        given = [flag for flag in flags if flag in command_line]
        if str(recipe.get(key)) == value and key not in command_line and given:
            kept.discard(key)
            silenced.append(f"{key} {value} (recipe) not applied: --{given[0]} on the command line asks for it")
    done = {"recipe": str(path), "recorded": recorded, "silenced": silenced}
    if recorded and not command_line.get("resume_from_checkpoint"):  # a resume is the same run: every key
        source, new = kind_of(recipe), kind_of({**recipe, **command_line})
        changed = {"mode": (source == "sft") != (new == "sft"), "kind": source != new,
                   "dataset": "dataset" in command_line}
        for key in sorted(kept, key=list(recipe).index):
            if key not in command_line and any(changed[why] for why in DROPPED_WHEN[GROUP_OF.get(key, "run")]):
                dropped[key] = recipe[key]
                kept.discard(key)
        done |= {"from": KINDS[source], "to": KINDS[new], "other_data": changed["dataset"], "dropped": dropped}
    done["replayed"] = [key for key in recipe if key in kept and key not in command_line]
    return kept, done


def describe(done: dict[str, Any]) -> list[str]:
    """The lines rank 0 prints about a recipe that was replayed, or that yielded to the command line."""
    lines = [f"  {note}" for note in done["silenced"]]
    if "from" in done:
        data = ", on other data" if done["other_data"] else ""
        lines.insert(0, f"replayed {done['recipe']} ({done['from']} → {done['to']}{data}): "
                        + ", ".join(done["replayed"]))
        if done["dropped"]:
            groups = "/".join(sorted({GROUP_OF.get(key, "run") for key in done["dropped"]}))
            values = ", ".join(f"{key} {value}" for key, value in done["dropped"].items())
            lines.insert(1, f"  not replayed (the source run's {groups}: this run's own defaults apply, a flag "
                            f"sets one): {values}")
    elif done["recorded"]:
        lines.insert(0, f"replayed {done['recipe']} (a resume: every key): " + ", ".join(done["replayed"]))
    elif lines:
        lines.insert(0, f"recipe {done['recipe']}:")
    return lines
