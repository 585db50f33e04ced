"""Command-line and YAML arguments: our dataclasses plus Hugging Face `TrainingArguments`.

`parse_args(argv)` is the single entry. Every `TrainingArguments` flag passes through untouched;
ours are grouped by concern (data preparation, model). A first positional `*.yaml` file is a
recipe: its keys become flags, and flags given on the command line after it win.

`--tokenize_only` with nothing but data flags (and `--seed`) is parsed by plain argparse built from
DataArguments (`prep_only_parser`), without importing transformers or torch (~1-3 s of start-up);
any other flag falls back to the full parser, so a typo is still an error, never silently ignored.
Flags and recipe keys match exactly: argparse's prefix matching (`--learning_rat` for
`--learning_rate`) is off in both parsers.
"""

from __future__ import annotations

import difflib
import json
import logging
import math
import os
import sys
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

logger = logging.getLogger(__name__)

DEFAULT_CACHE_DIR = os.path.join(os.path.expanduser("~"), ".cache", "rankzero")
DEFAULT_SEED = 42  # TrainingArguments' default; tests/test_args.py keeps the two in step

# The seed's flag names, kept so existing scripts keep working: alias → TrainingArguments field.
TRAINING_ALIASES = {
    "--batch_size": "--per_device_train_batch_size",
    "--num_epochs": "--num_train_epochs",
}


@dataclass
class DataArguments:
    """What to prepare, and how. Everything here except the worker/batch knobs and the engines (tokenizer and
    prepare: how, not what) enters the fingerprint."""

    dataset: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Sources: files (.jsonl .json .parquet .csv .txt .arrow), directories, globs, "
            "save_to_disk dirs or hub names 'name[:config]'; 'SPEC@WEIGHT' mixes by share of tokens.",
            "nargs": "+",
        },
    )
    text_column: str | None = field(
        default=None, metadata={"help": "Column holding plain text (default: detect text/content/document)."}
    )
    txt_sample_by: str = field(
        default="line",
        metadata={"help": "How .txt files split into documents.", "choices": ["line", "paragraph", "document"]},
    )
    tokenizer_path: str | None = field(default=None, metadata={"help": "Directory of an HF fast tokenizer."})
    max_seq_length: int = field(default=2048, metadata={"help": "Tokens per training sequence."})
    packing: bool = field(
        default=True,
        metadata={"help": "Pack documents into blocks of exactly max_seq_length (no padding). --no_packing: "
                  "one row per document, long ones split into chunks."},
    )
    mode: str = field(
        default="pretrain",
        metadata={"help": "pretrain: learn every token; sft: mask prompt tokens (labels -100).",
                  "choices": ["pretrain", "sft"]},
    )
    tokenizer_engine: str = field(
        default="auto",
        metadata={"help": "Who encodes: fastokens when installed and it gives the HF tokenizer's ids on a check "
                  "(auto), always fastokens (an error if it cannot), or the HF tokenizer (hf). Never changes the output.",
                  "choices": ["auto", "fastokens", "hf"]},
    )
    quality_filter: str = field(
        default="none", metadata={"help": "Quality filter.", "choices": ["none", "ko"]}
    )
    quality_config: str | None = field(
        default=None, metadata={"help": "YAML file overriding quality-filter thresholds (see configs/quality_ko.yaml)."}
    )
    skip_bad_records: bool = field(
        default=False, metadata={"help": "Count and skip malformed records instead of stopping with file:line."}
    )
    on_decode_error: str = field(
        default="error",
        metadata={"help": "Undecodable bytes: stop naming file and offset, or replace them and count.",
                  "choices": ["error", "replace"]},
    )
    cache_dir: str = field(
        default=os.environ.get("RANKZERO_CACHE", DEFAULT_CACHE_DIR),
        metadata={"help": "Where prepared datasets are published, one dir per fingerprint (env RANKZERO_CACHE)."},
    )
    tokenize_only: bool = field(default=False, metadata={"help": "Prepare the data, print 'prepared: DIR', exit."})
    dataset_num_proc: int | None = field(
        default=None, metadata={"help": "Preparation worker processes (env DATASET_NUM_PROC; default all usable cores)."}
    )
    dataset_batch_size: int | None = field(
        default=None, metadata={"help": "Documents per worker task (env DATASET_BATCH_SIZE; default 1000)."}
    )
    dataset_writer_batch_size: int | None = field(
        default=None, metadata={"help": "Rows per Arrow record batch written (env DATASET_WRITER_BATCH_SIZE; default 1000)."}
    )
    prep_engine: str = field(
        default="local",
        metadata={"help": "Where the builder prepares: this machine (local), or every CPU of a Ray cluster (ray: "
                  "--ray_address, else RAY_ADDRESS, else a local cluster; needs pip install 'rankzero[ray]').",
                  "choices": ["local", "ray"]},
    )
    ray_address: str | None = field(
        default=None, metadata={"help": "Ray cluster to join with --prep_engine ray (default: RAY_ADDRESS, else start one)."}
    )
    prep_scope: str = field(
        default="auto",
        metadata={"help": "Who builds: one rank per job (global), one per node (node), or detect whether "
                  "the cache dir is shared (auto).", "choices": ["auto", "global", "node"]},
    )
    prep_timeout_s: float = field(
        default=6 * 3600.0, metadata={"help": "Last resort: waiting ranks give up after this many seconds."}
    )
    verify_data: bool = field(
        default=False,
        metadata={"help": "Before using a prepared dataset, check every file's checksum, not only its size "
                  "(~0.05 s per GB from the page cache; reads the whole dataset from disk otherwise)."},
    )
    fingerprint_content: str = field(
        default="stat",
        metadata={"help": "How input files enter the fingerprint: path+size+mtime (stat), plus a hash of each "
                  "file's first and last MiB (sample), or of all its bytes (full).",
                  "choices": ["stat", "sample", "full"]},
    )

    def resolve_env(self) -> None:
        """Flag > env var > default for the worker knobs (they never change the output)."""
        from rankzero.runtime import usable_cpu_count

        self.dataset_num_proc = _flag_env_default(self.dataset_num_proc, "DATASET_NUM_PROC", usable_cpu_count())
        self.dataset_batch_size = _flag_env_default(self.dataset_batch_size, "DATASET_BATCH_SIZE", 1000)
        self.dataset_writer_batch_size = _flag_env_default(
            self.dataset_writer_batch_size, "DATASET_WRITER_BATCH_SIZE", 1000
        )


@dataclass
class ModelArguments:
    """Which model to train and the speed switches around it (TF32, bf16, optimizer: see TrainingArguments)."""

    model_config: str | None = field(
        default=None, metadata={"help": "HF config JSON to build a model from scratch (see configs/)."}
    )
    pretrained_model: str | None = field(
        default=None,
        metadata={"help": "HF causal-LM checkpoint dir to continue from.", "aliases": ["--model_name_or_path"]},
    )
    attn_implementation: str = field(
        default="sdpa",
        metadata={"help": "Attention kernel (flash_attention_2 only when the flash-attn package is installed).",
                  "choices": ["sdpa", "eager", "flash_attention_2", "flex_attention"]},
    )
    mask_across_documents: bool = field(
        default=False,
        metadata={"help": "Stop attention at document boundaries inside packed blocks (position ids restart per document)."},
    )
    pad_to_multiple_of: int = field(
        default=8, metadata={"help": "Unpacked data: pad each batch to the longest row, rounded up to this multiple."}
    )
    allow_data_change: bool = field(
        default=False,
        metadata={"help": "With --resume_from_checkpoint: continue although the checkpoint was trained on other data "
                  "(its data fingerprint differs from this run's)."},
    )


@dataclass
class RunArguments:
    data: DataArguments
    model: ModelArguments
    training: Any  # transformers.TrainingArguments, or None on the --tokenize_only fast path
    seed: int
    given: frozenset[str] = frozenset()  # dataclass fields set on the CLI or in the recipe (defaults apply elsewhere)


def recipe_to_argv(path: str | os.PathLike) -> list[str]:
    """Turn a YAML recipe into flags, so the CLI parser (and its errors) treat both the same."""
    with open(path, encoding="utf-8") as handle:
        recipe = yaml.safe_load(handle) or {}
    if not isinstance(recipe, dict):
        raise ValueError(f"{path}: a recipe is a mapping of flag names to values, got {type(recipe).__name__}")
    argv: list[str] = []
    for key, value in recipe.items():
        flag = f"--{key}"
        if isinstance(value, list):
            argv += [flag, *map(str, value)]
        elif isinstance(value, dict):
            argv += [flag, json.dumps(value)]
        elif value is None:
            continue
        else:
            argv += [flag, str(value)]
    return argv


def _expand_argv(argv: list[str]) -> tuple[list[str], str | None, set[str]]:
    """(flags, the recipe file or None, the flags that came from the recipe)."""
    recipe, from_recipe = None, set()
    if argv and argv[0].endswith((".yaml", ".yml")) and not argv[0].startswith("-"):
        if not Path(argv[0]).is_file():
            raise ValueError(f"recipe {argv[0]} does not exist")
        recipe, recipe_argv = argv[0], recipe_to_argv(argv[0])
        from_recipe = {arg for arg in recipe_argv if arg.startswith("--")}
        argv = recipe_argv + argv[1:]
    return [TRAINING_ALIASES.get(arg, arg) for arg in argv], recipe, from_recipe


def _unknown_arguments(parser, remaining: list[str], recipe: str | None, from_recipe: set[str]) -> str:
    """One line per unknown flag or recipe key, with the closest real name."""
    known = [option for option in parser._option_string_actions if option.startswith("--")]
    lines = []
    for arg in remaining:
        if not arg.startswith("-"):
            continue
        flag = arg.split("=", 1)[0]
        close = difflib.get_close_matches(flag, known, n=1, cutoff=0.75)
        hint = f" (did you mean {close[0]}?)" if close else ""
        if flag in from_recipe:
            lines.append(f"recipe {recipe}: unknown key '{flag[2:]}'{hint and f' (did you mean {close[0][2:]}?)'}")
        else:
            lines.append(f"unknown flag {flag}{hint}")
    if not lines:
        lines.append(f"unexpected arguments {remaining}")
    return "invalid arguments (names must match exactly):\n  - " + "\n  - ".join(lines)


def parse_args(argv: list[str] | None = None) -> RunArguments:
    argv, recipe, from_recipe = _expand_argv(list(sys.argv[1:] if argv is None else argv))
    light = prep_only_parser()
    namespace, remaining = light.parse_known_args(argv)
    if namespace.tokenize_only and not remaining:
        data = DataArguments(**{f.name: getattr(namespace, f.name) for f in fields(DataArguments)})
        model, training, seed = ModelArguments(), None, namespace.seed
    else:
        from transformers import HfArgumentParser

        # Our subclass defers device (and process group) set-up until the Trainer needs it: the data is
        # prepared first, with no process group, so a long preparation never sits in a collective.
        from rankzero.train.training_args import TrainingArguments

        light = HfArgumentParser((DataArguments, ModelArguments, TrainingArguments), allow_abbrev=False)
        data, model, training, remaining = light.parse_args_into_dataclasses(argv, return_remaining_strings=True)
        if remaining:
            raise ValueError(_unknown_arguments(light, remaining, recipe, from_recipe))
        seed = training.seed
    data.resolve_env()
    check_arguments(data, model, training)
    return RunArguments(data=data, model=model, training=training, seed=seed, given=given_fields(light, argv))


def prep_only_parser():
    """DataArguments + --seed as plain argparse, the way HfArgumentParser maps them (tests/test_args.py
    checks both parse alike). Used only for `--tokenize_only` with nothing but data flags: importing
    transformers for HfArgumentParser costs ~1.2 s, a sizeable share of preparing a small corpus."""
    import argparse
    import types
    import typing

    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    hints = typing.get_type_hints(DataArguments)
    for f in fields(DataArguments):
        kind = hints[f.name]
        if typing.get_origin(kind) in (typing.Union, types.UnionType):  # X | None
            kind = next(t for t in typing.get_args(kind) if t is not type(None))
        default = f.default_factory() if f.default_factory is not MISSING else f.default
        options = {"dest": f.name, "default": default}
        if "choices" in f.metadata:
            options["choices"] = f.metadata["choices"]
        if kind is bool:
            options.update(type=_string_to_bool, nargs="?", const=True)
            if default is True:
                parser.add_argument(f"--no_{f.name}", dest=f.name, action="store_false")
        elif typing.get_origin(kind) is list:
            options.update(type=typing.get_args(kind)[0], nargs="+")
        else:
            options["type"] = kind
        parser.add_argument(f"--{f.name}", *f.metadata.get("aliases", []), **options)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    return parser


def _string_to_bool(value: str) -> bool:
    lowered = value.lower()
    if lowered in ("yes", "true", "t", "y", "1"):
        return True
    if lowered in ("no", "false", "f", "n", "0"):
        return False
    import argparse

    raise argparse.ArgumentTypeError(f"Truthy value expected: got {value} but expected one of yes/no, true/false, t/f, y/n, 1/0.")


def given_fields(parser, argv: list[str]) -> frozenset[str]:
    """Names of the dataclass fields that argv sets explicitly (`--no_packing` sets `packing`)."""
    actions = parser._option_string_actions  # argparse keeps no public map from option string to field
    given = set()
    for arg in argv:
        if arg.startswith("--"):
            action = actions.get(arg.split("=", 1)[0])
            if action is not None:
                given.add(action.dest)
    return frozenset(given)


def check_arguments(data: DataArguments, model: ModelArguments, training: Any) -> None:
    """Report every problem in the arguments at once, before any heavy work starts."""
    from rankzero.data.sources import check_weight

    problems = []
    if not data.dataset:
        problems.append("--dataset: give at least one source (a file, directory, glob or hub name)")
    problems += [problem for spec in data.dataset if (problem := check_weight(spec))]
    if not data.tokenizer_path:
        problems.append("--tokenizer_path: give the directory of an HF fast tokenizer")
    elif not Path(data.tokenizer_path).is_dir():
        problems.append(f"--tokenizer_path {data.tokenizer_path}: no such directory")
    if data.max_seq_length < 2:
        problems.append(f"--max_seq_length {data.max_seq_length}: must be at least 2")
    if data.tokenizer_engine == "fastokens":
        from rankzero.data.tokenize import fastokens_installed

        if not fastokens_installed():
            problems.append("--tokenizer_engine fastokens: the fastokens package is not installed (pip install fastokens)")
    if data.prep_engine == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            problems.append("--prep_engine ray: Ray is not installed (pip install 'rankzero[ray]')")
    elif data.ray_address:
        problems.append(f"--ray_address {data.ray_address}: only used with --prep_engine ray")
    if data.quality_config and not Path(data.quality_config).is_file():
        problems.append(f"--quality_config {data.quality_config}: no such file")
    for name in ("dataset_num_proc", "dataset_batch_size", "dataset_writer_batch_size"):
        value = getattr(data, name)
        if value is not None and value < 1:
            problems.append(f"--{name} {value}: must be at least 1 (env {name.upper()})")
    if data.prep_timeout_s <= 0:
        problems.append(f"--prep_timeout_s {data.prep_timeout_s}: must be positive")
    if training is not None and not data.tokenize_only:
        if not model.model_config and not model.pretrained_model:
            problems.append("--model_config FILE.json (from scratch) or --pretrained_model DIR (continue): give one")
        if model.model_config and model.pretrained_model:
            problems.append("--model_config and --pretrained_model: give only one")
        for flag, path in (("--model_config", model.model_config), ("--pretrained_model", model.pretrained_model)):
            if path and not Path(path).exists():
                problems.append(f"{flag} {path}: does not exist")
        problems += _training_number_problems(training)
        problems += _position_problems(data, model)
        from rankzero.train.output_dir import output_dir_problems
        from rankzero.train.training_args import max_steps_problems

        problems += max_steps_problems(training) + output_dir_problems(training.output_dir)
    if training is not None:
        from rankzero.train.checkpoints import resume_problems

        problems += resume_problems(data.tokenize_only, training.resume_from_checkpoint, model.allow_data_change)
    if problems:
        raise ValueError("invalid arguments:\n  - " + "\n  - ".join(problems))


def _training_number_problems(training) -> list[str]:
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


POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")


def _position_problems(data: DataArguments, model: ModelArguments) -> list[str]:
    """--max_seq_length against the model's positions, read from its config JSON (the model is not built).

    Longer blocks are an error: positions past the table were never trained, and a learned position table
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
    if key is None or data.max_seq_length <= config[key]:
        return []
    scaling = _rope_scaling(config)
    if scaling:
        logger.warning("--max_seq_length %d is longer than %s %d in %s: allowed because its RoPE scaling (%s) "
                       "extends the positions; make sure the model is meant to run that long",
                       data.max_seq_length, key, config[key], source, scaling)
        return []
    return [f"--max_seq_length {data.max_seq_length}: longer than the model's {key} {config[key]} ({source}); "
            "positions past it were never trained. Lower --max_seq_length, or use a config with rope_scaling"]


def _rope_scaling(config: dict) -> str | None:
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


def _flag_env_default(flag_value: int | None, env_name: str, default: int) -> int:
    if flag_value is not None:
        return flag_value
    raw = os.environ.get(env_name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"environment variable {env_name}={raw!r}: expected a whole number") from None
    if value < 1:
        raise ValueError(f"environment variable {env_name}={raw!r}: must be at least 1")
    return value
