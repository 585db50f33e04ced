"""The command line: rankzero's flags (the typed configs of config.py) and every TrainingArguments flag.

    args = parse_args(sys.argv[1:])      # an Args; ConfigError (a ValueError) lists every problem at once

Two steps, so that a mistake costs no start-up:
1. Before any heavy import: a YAML recipe (a first positional *.yaml: its keys become flags, flags after
   it win), rankzero's own flags into the configs (each checks itself), and the name of every other flag
   against TrainingArguments' (trainer_flags.py reads them without importing transformers). Names
   match exactly: argparse's prefix matching is off, so `--learning_rat` is an error with the closest
   name, never the learning rate. `--help` prints rankzero's flags; `--help_all` adds the Trainer's.
2. Only for training: the Trainer's flags into `TrainingArguments` (HfArgumentParser, unchanged), then
   the checks that involve the model or more than one config (checks.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import logging
import os
import sys
import types
import typing
from dataclasses import fields
from pathlib import Path

import yaml

from rankzero import strict_yaml
from rankzero.config import CONFIGS, DEFAULT_SEED, Args, ModelConfig
from rankzero.errors import ConfigError
from rankzero.trainer_flags import BOOL, LIST, NEGATIVE_NUMBER, VALUE, training_options

logger = logging.getLogger(__name__)

RUN_FLAGS = {"tokenize_only": "prepare the data, print 'prepared: DIR' and exit",
             "seed": f"shuffles the prepared rows and seeds training (default {DEFAULT_SEED})",
             "overwrite_output_dir": "start from scratch in an --output_dir holding an earlier run's checkpoints "
                                     "(they move to run_history/)"}
# Trainer flags whose one value a recipe may write as a list (as TrainingArguments itself holds them):
# flag → what joins the items into the value the flag takes.
LIST_AS_ONE_VALUE = {"--report_to": ",", "--fsdp": " "}
TRAINER_DOCS = "https://huggingface.co/docs/transformers/main_classes/trainer#transformers.TrainingArguments"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print its usage and exit; we collect the problem
        raise ConfigError([message])


# ---------------------------------------------------------------------------------------------
# rankzero's own flags


def _base(hint):
    """X | None → X."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return next(h for h in typing.get_args(hint) if h is not type(None))
    return hint


def _kind(hint) -> str:
    hint = _base(hint)
    if hint is bool:
        return BOOL
    return LIST if typing.get_origin(hint) is tuple else VALUE


def our_flags() -> dict[str, tuple[str, object, dict]]:
    """name → (group, type, metadata) for every flag rankzero defines, in --help order."""
    flags = {}
    for group, cls in CONFIGS.items():
        hints = typing.get_type_hints(cls)
        for f in fields(cls):
            metadata = dict(f.metadata)
            if f.default not in (None, False, ()) and "default" not in metadata["help"]:
                metadata["help"] += f" (default {f.default:g})" if isinstance(f.default, float) else \
                    f" (default {f.default})"
            flags[f.name] = (group, hints[f.name], metadata)
    flags["tokenize_only"] = ("run", bool, {"help": RUN_FLAGS["tokenize_only"]})
    flags["seed"] = ("run", int, {"help": RUN_FLAGS["seed"]})
    flags["overwrite_output_dir"] = ("run", bool, {"help": RUN_FLAGS["overwrite_output_dir"]})
    return flags


def _parser() -> _Parser:
    """argparse for rankzero's flags; defaults suppressed, so the namespace holds exactly what was given."""
    parser = _Parser(prog="train.py", add_help=False, allow_abbrev=False, argument_default=argparse.SUPPRESS)
    for name, (_, hint, metadata) in our_flags().items():
        kind = _kind(hint)
        base = _base(hint)
        names = [f"--{name}", *metadata.get("aliases", ())] + ([f"--{name.replace('_', '-')}"] if "_" in name else [])
        if kind == BOOL:
            parser.add_argument(*names, dest=name, type=string_to_bool, nargs="?", const=True)
            parser.add_argument(f"--no_{name}", dest=name, action="store_false")
        elif kind == LIST:
            parser.add_argument(*names, dest=name, nargs="+")
        else:
            parser.add_argument(*names, dest=name, type=base)
    return parser


def string_to_bool(value: str) -> bool:
    lowered = value.lower()
    if lowered in ("yes", "true", "t", "y", "1"):
        return True
    if lowered in ("no", "false", "f", "n", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected yes/no, true/false, t/f, y/n or 1/0, got {value!r}")


# ---------------------------------------------------------------------------------------------
# Recipes


def recipe_to_argv(path: str | Path) -> list[str]:
    """A YAML recipe's keys as flags, so that the recipe and the command line meet the same checks."""
    try:
        with open(path, encoding="utf-8") as handle:
            recipe = strict_yaml.load(handle)
    except OSError as error:
        raise ConfigError([f"recipe {path}: cannot be read ({error.strerror})"]) from None
    except strict_yaml.RecipeYAMLError as error:
        raise ConfigError([f"recipe {strict_yaml.where(error, path)}: {error.problem}"]) from None
    except yaml.YAMLError as error:
        where = strict_yaml.where(error, path)
        problem = getattr(error, "problem", None) or str(error)
        if isinstance(error, yaml.constructor.ConstructorError):
            problem = f"{problem}: a recipe holds plain values (no !!python tags or other constructors)"
        raise ConfigError([f"recipe {where}: not valid YAML ({problem})"]) from None
    if recipe is None:
        return []
    if not isinstance(recipe, dict):
        raise ConfigError([f"recipe {path}: a recipe is a mapping of flag names to values, got {type(recipe).__name__}"])
    kinds = {f"--{name}": _kind(hint) for name, (_, hint, _) in our_flags().items()}
    kinds.update({option: kind for option, (_, kind) in training_options().items()})
    argv, problems = [], []
    for key, value in recipe.items():
        flag = f"--{key}"
        if value is None:
            continue
        kind = kinds.get(flag, LIST)
        if isinstance(value, list):
            if not all(isinstance(item, (str, int, float, bool)) for item in value):
                problems.append(f"recipe {path}: '{key}' is a list of plain values, got {value}")
            elif flag in LIST_AS_ONE_VALUE:
                argv += [flag, LIST_AS_ONE_VALUE[flag].join(map(str, value))]
            elif kind != LIST:
                problems.append(f"recipe {path}: '{key}' takes one value, got a list {value}")
            else:
                argv += [flag, *map(str, value)]
        elif isinstance(value, dict):
            argv += [flag, json.dumps(value)]
        elif value is True and kind == BOOL:
            argv.append(flag)  # the bare flag: `--fsdp True` would be read as FSDP options named "True"
        elif value is False and flag == "--fsdp":
            continue  # off, its default (`fsdp` is `str | None` whose bare flag means True)
        else:
            argv += [flag, str(value)]
    if problems:
        raise ConfigError(problems)
    return argv


def _expand(argv: list[str]) -> tuple[list[str], str | None, set[str], dict | None]:
    """(flags, the recipe file or None, the flags that came from the recipe, what recipe.replay did)."""
    if not (argv and argv[0].endswith((".yaml", ".yml")) and not argv[0].startswith("-")):
        return argv, None, set(), None
    from rankzero.recipe import replay_argv

    recipe = argv[0]
    if not Path(recipe).is_file():
        raise ConfigError([f"recipe {recipe} does not exist"])
    recipe_argv, done = replay_argv(recipe_to_argv(recipe), recipe, argv[1:], _option_names())
    return recipe_argv + argv[1:], recipe, {arg for arg in recipe_argv if arg.startswith("--")}, done


def _option_names() -> dict[str, str]:
    """Every option string the command line accepts (aliases, dashes, --no_) → the field it sets."""
    names = {option: name for option, (name, _) in training_options().items()}
    for name, (_, _, metadata) in our_flags().items():
        for option in (f"--{name}", f"--{name.replace('_', '-')}", f"--no_{name}", *metadata.get("aliases", ())):
            names[option] = name
    return names


# ---------------------------------------------------------------------------------------------
# Parsing


def parse_args(argv: list[str] | None = None) -> Args:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--help_all" in argv or "-h" in argv or "--help" in argv:
        print(help_text(every_trainer_flag="--help_all" in argv))
        raise SystemExit(0)
    argv, recipe, from_recipe, replayed = _expand(argv)
    namespace, rest = _parser().parse_known_args(argv)
    given_ours = vars(namespace)
    training_argv, given_training, problems = _split_training_flags(rest, recipe, from_recipe)
    tokenize_only = bool(given_ours.pop("tokenize_only", False))
    overwrite = bool(given_ours.pop("overwrite_output_dir", False))
    seed = given_ours.pop("seed", DEFAULT_SEED)
    derived = derived_defaults(given_ours)
    defaults = {name: f"{value} ({why})" for name, (value, why) in derived.items()}
    configs = {}
    for group, cls in CONFIGS.items():
        values = {f.name: given_ours[f.name] for f in fields(cls) if f.name in given_ours}
        values |= {f.name: derived[f.name][0] for f in fields(cls) if f.name in derived}
        if cls is ModelConfig and tokenize_only:
            values = {}  # nothing is trained: model flags (from a recipe, say) are not looked at
        try:
            configs[group] = cls(**values)
        except ConfigError as error:
            problems += error.problems
    if tokenize_only:
        problems += _tokenize_only_problems(given_training, from_recipe, given_ours, warn=not problems)
    if problems and replayed and replayed.get("dropped"):  # a missing --dataset, say: the recipe held one
        problems.append(f"{recipe}: not replayed into this {replayed['to']} run (the {replayed['from']} run's): "
                        f"{', '.join(replayed['dropped'])}; give the ones this run needs")
    if problems:
        raise ConfigError(problems)
    given = frozenset(given_ours) | frozenset(given_training) | ({"seed"} if "--seed" in argv else frozenset())
    args = Args(**configs, training=None, tokenize_only=tokenize_only, seed=seed, given=given, recipe=recipe,
                defaults=defaults, overwrite_output_dir=overwrite, replayed=replayed)
    if tokenize_only:
        return args
    from rankzero.checks import benchmark_suites, check_training_arguments, data_defaults

    training, as_given = _training_arguments(training_argv + (["--seed", str(seed)] if "seed" in given else []),
                                             given_training)
    check_training_arguments(args, training)
    configs, more_defaults = data_defaults(args, training)
    return Args(**{**{name: getattr(args, name) for name in args.__dataclass_fields__}, **configs,
                   "training": training, "training_given": as_given, "defaults": {**defaults, **more_defaults},
                   "suites": benchmark_suites(args.benchmarks)})


def derived_defaults(given: dict) -> dict[str, tuple]:
    """The one home of our flags set because the user did not give them, from others they gave:
    {flag: (value, why)}, printed with the run's other defaults (and by --tokenize_only)."""
    derived = {}
    model = given.get("pretrained_model")
    if "tokenizer_path" not in given and model and (Path(model) / "tokenizer_config.json").is_file():
        # HF checkpoints and rankzero runs save the tokenizer beside the weights.
        derived["tokenizer_path"] = (model, "the tokenizer saved with --pretrained_model")
    benchmarks = tuple(given.get("benchmarks", ()))
    if benchmarks and given.get("decontaminate_benchmarks", True):
        # By real path: a file named twice would count its items twice, and an n-gram in COMMON_ITEMS items is
        # not indexed (decontaminate.py).
        named = tuple(given.get("decontaminate", ()))
        seen = {os.path.realpath(os.path.expanduser(path)) for path in named}
        missing = tuple(path for path in benchmarks if os.path.realpath(os.path.expanduser(path)) not in seen)
        if missing:
            derived["decontaminate"] = (named + missing, "the --benchmarks files: what is measured is not trained "
                                                         "on; --decontaminate_benchmarks false trains on them")
    if "dedup" not in given and given.get("mode") == "sft":
        derived["dedup"] = ("exact", "--mode sft: chat samples share templates and system prompts, near dedup would "
                                     "take too many")
    return derived


def _split_training_flags(rest: list[str], recipe: str | None, from_recipe: set[str]):
    """What rankzero did not take: Trainer flags and their values, checked by name only (no import)."""
    options = training_options()
    argv, given, problems = [], {}, []
    current = None  # (option, kind, values so far) of the flag being read
    ours = [f"--{name}" for name in our_flags()]

    def close():
        if current is not None and current[0] in options and current[1] == VALUE and len(current[2]) != 1:
            problems.append(f"--{options[current[0]][0]}: expects one value, got {len(current[2])}"
                            + (f" ({' '.join(current[2])})" if current[2] else ""))

    for arg in rest:
        if arg.startswith("-") and not NEGATIVE_NUMBER.match(arg):
            close()
            option = arg.split("=", 1)[0]
            if option not in options:  # its values, if any, go with it
                current = (option, LIST, [])
                problems.append(_unknown(option, ours + list(options), recipe if option in from_recipe else None))
                continue
            name, kind = options[option]
            given[name] = option
            current = (option, kind, [arg.split("=", 1)[1]] if "=" in arg else [])
            argv.append(arg)
            continue
        if current is None or (current[1] != LIST and len(current[2]) >= 1):
            problems.append(f"unexpected argument {arg!r}" + (f" after {current[0]}" if current else "")
                            + " (a recipe YAML file goes first; every other argument is a --flag and its value)")
        else:
            current[2].append(arg)
            if current[0] in options:
                argv.append(arg)
    close()
    return argv, given, problems


def _unknown(option: str, known: list[str], recipe: str | None) -> str:
    close = difflib.get_close_matches(option, known, n=1, cutoff=0.75)
    if recipe is not None:
        hint = f" (did you mean {close[0][2:]}?)" if close else ""
        return f"recipe {recipe}: unknown key '{option[2:]}'{hint}"
    return f"unknown flag {option}" + (f" (did you mean {close[0]}?)" if close else "")


def _tokenize_only_problems(given_training: dict[str, str], from_recipe: set[str], given_ours: dict,
                            warn: bool) -> list[str]:
    """--tokenize_only trains nothing: a resume asked for on the command line is an error; other training
    and model flags from the command line are reported as ignored (a recipe's are expected)."""
    if "resume_from_checkpoint" in given_training:
        return ["--resume_from_checkpoint: --tokenize_only prepares the data and exits, nothing is resumed; drop "
                "one of the two"]
    model_flags = {f"--{f.name}" for f in fields(ModelConfig)}
    ignored = sorted({option for option in given_training.values() if option not in from_recipe}
                     | {f"--{name}" for name in given_ours if f"--{name}" in model_flags - from_recipe})
    if ignored and warn:
        logger.warning("--tokenize_only prepares the data and exits: %s ignored", ", ".join(ignored))
    return []


def _training_arguments(argv: list[str], given: dict[str, str]):
    """TrainingArguments from the Trainer's flags (names already checked), via HfArgumentParser; and the
    given ones' values as parsed, before TrainingArguments processes them (`--fsdp` becomes True, its
    options move into `fsdp_config`): what a recipe replays."""
    from transformers import HfArgumentParser

    # Our subclass defers device (and process group) set-up until the Trainer needs it: the data is
    # prepared first, with no process group, so a long preparation never sits in a collective.
    from rankzero.train.sharding import deepspeed_problems
    from rankzero.train.training_args import TrainingArguments

    class Parser(HfArgumentParser):
        def error(self, message: str):
            raise ConfigError([message])

    # HfArgumentParser.parse_args_into_dataclasses in two steps, to see the values between them.
    namespace, rest = Parser(TrainingArguments, allow_abbrev=False).parse_known_args(argv)
    if rest:
        raise ConfigError([f"unexpected arguments: {' '.join(rest)}"])
    problems = deepspeed_problems(namespace.deepspeed, namespace.fsdp)  # transformers: a traceback, or a late stop
    if problems:
        raise ConfigError(problems)
    inputs = {f.name: getattr(namespace, f.name) for f in dataclasses.fields(TrainingArguments) if f.init}
    try:
        training = TrainingArguments(**inputs)
    except ValueError as error:  # TrainingArguments.__post_init__'s own checks
        raise ConfigError([f"training arguments: {error}"]) from None
    return training, {name: inputs[name] for name in [*given, "seed"] if name in inputs and
                      (name != "seed" or "--seed" in argv)}


# ---------------------------------------------------------------------------------------------
# --help


def help_text(every_trainer_flag: bool = False) -> str:
    lines = ["usage: train.py [RECIPE.yaml] --dataset SPEC [SPEC ...] --tokenizer_path DIR [--flag VALUE ...]",
             "",
             "Prepares the data once per job (or per node), then trains a Hugging Face causal LM on it.",
             "A recipe's keys are flags and flags after it win; a flag wins over its environment variable.",
             "Booleans: --flag, --flag false, --no_flag."]
    group_of = None
    for name, (group, hint, metadata) in our_flags().items():
        if group != group_of:
            group_of = group
            title = CONFIGS[group].__doc__.strip().splitlines()[0] if group in CONFIGS else "run"
            lines += ["", title]
        metavar = {BOOL: "", LIST: " SPEC [...]"}.get(_kind(hint), " " + _metavar(name, hint, metadata))
        env = f" [{metadata['env']}]" if "env" in metadata else ""
        lines.append(f"  --{name}{metavar}".ljust(36) + f" {metadata['help']}{env}")
    lines += ["", "training: every transformers.TrainingArguments flag passes through; the usual ones:",
              "  --output_dir DIR --max_steps N --per_device_train_batch_size N --learning_rate LR",
              "  --save_steps N --resume_from_checkpoint DIR|auto --report_to NAME --deepspeed JSON --fsdp MODE",
              f"  all {_training_field_count()} of them: train.py --help_all, or the Trainer's docs:", f"  {TRAINER_DOCS}"]
    text = "\n".join(lines)
    if every_trainer_flag:
        from transformers import HfArgumentParser

        from rankzero.train.training_args import TrainingArguments

        text += "\n\n" + HfArgumentParser(TrainingArguments).format_help()
    return text


def _metavar(name: str, hint, metadata: dict) -> str:
    if "choices" in metadata:
        return "{" + ",".join(metadata["choices"]) + "}"
    base = _base(hint)
    if base in (int, float):
        return "S" if name.endswith("_s") else "N"
    return "FILE" if name.endswith("_config") else "DIR" if name.endswith(("_dir", "_path", "_model")) else "VALUE"


def _training_field_count() -> int:
    return len({name for name, _ in training_options().values()})
