"""The command line: typed configs, one parser that answers before torch, recipes, --help, the checks
made before any data work."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys

import pytest

from helpers import REPO, TINY, free_port, quiet_env, run
from rankzero.args import our_flags, parse_args
from rankzero.config import (CONFIGS, DEFAULT_SEED, CacheConfig, PackingConfig, SourcesConfig, StageConfig,
                             WorkersConfig)
from rankzero.errors import ConfigError


def base(tokenizer_dir, *more):
    return ["--dataset", "x.jsonl", "--tokenizer_path", str(tokenizer_dir), "--model_config", str(TINY), *more]


def prepare_only(tokenizer_dir, *more):
    return ["--tokenize_only", "--dataset", "x.jsonl", "--tokenizer_path", str(tokenizer_dir), *more]


# ------------------------------------------------------------------ configs


def test_every_flag_we_define_is_read_by_the_code():
    """Each config field is read somewhere outside config.py and args.py (`--help` lists them all)."""
    sources = "\n".join(p.read_text() for p in [REPO / "train.py", *(REPO / "rankzero").rglob("*.py")]
                        if p.name not in ("config.py", "args.py"))
    unread = [name for name in our_flags() if not re.search(rf"(\.{name}\b|\"{name}\")", sources)]
    assert not unread, f"flags nobody reads: {unread}"


def test_configs_check_themselves_and_name_every_bad_flag(tmp_path):
    with pytest.raises(ConfigError) as error:
        WorkersConfig(dataset_num_proc=0, prep_engine="spark")
    assert error.value.problems == ["--prep_engine spark: choose one of local, ray",
                                    "--dataset_num_proc 0: must be at least 1 (env DATASET_NUM_PROC)"]
    with pytest.raises(ConfigError, match="--max_seq_length 1: must be at least 2"):
        PackingConfig(max_seq_length=1)
    with pytest.raises(ConfigError, match=rf"--tokenizer_path {tmp_path / 'no'}: no such directory"):
        StageConfig(tokenizer_path=str(tmp_path / "no"))
    assert SourcesConfig(dataset=["a.jsonl"]).dataset == ("a.jsonl",)  # frozen and hashable: a tuple


def test_env_knobs_flag_wins_over_env_over_default(monkeypatch, tmp_path):
    monkeypatch.setenv("DATASET_NUM_PROC", "3")
    monkeypatch.setenv("DATASET_BATCH_SIZE", "17")
    assert WorkersConfig(dataset_batch_size=5).dataset_num_proc == 3
    assert WorkersConfig(dataset_batch_size=5).dataset_batch_size == 5
    assert WorkersConfig().dataset_writer_batch_size == 1000
    monkeypatch.setenv("DATASET_WRITER_BATCH_SIZE", "lots")
    with pytest.raises(ValueError, match="DATASET_WRITER_BATCH_SIZE"):
        WorkersConfig()


# The knobs that were read from the environment wherever they were used (an `abc` there was a traceback from
# deep inside the handoff or the Ray engine; RANKZERO_RAY_TASK_BYTES was read once, at import).
ENV_KNOBS = [(CacheConfig, "prep_probe_s", "RANKZERO_PROBE_S", 10.0),
             (CacheConfig, "prep_startup_grace_s", "RANKZERO_STARTUP_GRACE_S", 60.0),
             (WorkersConfig, "ray_task_mb", "RANKZERO_RAY_TASK_MB", 64.0)]


@pytest.mark.parametrize("config, name, env, default", ENV_KNOBS)
@pytest.mark.parametrize("value", ["abc", "0", "-1", "nan", "inf"])
def test_environment_knobs_are_validated_config_fields_naming_the_variable(monkeypatch, config, name, env, default,
                                                                           value):
    assert getattr(config(), name) == default
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigError) as error:
        config()
    assert len(error.value.problems) == 1 and env in error.value.problems[0]
    monkeypatch.setenv(env, "0.25")
    assert getattr(config(), name) == 0.25
    assert getattr(config(**{name: 3.0}), name) == 3.0  # the flag wins


def test_the_replaced_ray_task_variable_is_an_error_not_silence(monkeypatch):
    monkeypatch.setenv("RANKZERO_RAY_TASK_BYTES", "20000")
    with pytest.raises(ConfigError, match="RANKZERO_RAY_TASK_BYTES is no longer read: set RANKZERO_RAY_TASK_MB"):
        WorkersConfig()


def test_the_knobs_reach_the_code_that_waits(tokenizer_dir, tmp_path, monkeypatch):
    """--prep_probe_s bounds how long a rank on another node looks for rank 0's probe."""
    import time

    from rankzero.data.handoff import elect_scope
    from rankzero.runtime import Runtime

    other_node = Runtime(rank=2, world_size=4, local_rank=0, local_world_size=2, node_rank=1, hostname="n1")
    args = parse_args(prepare_only(tokenizer_dir, "--cache_dir", str(tmp_path), "--prep_probe_s", "0.3"))
    started = time.monotonic()
    assert elect_scope(args.cache.prep_scope, other_node, tmp_path, args.cache.prep_probe_s) == "node"
    assert time.monotonic() - started >= 0.3  # looked for the probe that long (no upper bound: a busy machine)


# ------------------------------------------------------------------ parsing


def test_the_torch_free_path_reads_every_kind_of_flag(tokenizer_dir):
    args = parse_args(["--tokenize_only", "true", "--dataset", "a.jsonl", "b.txt@2", f"--tokenizer_path={tokenizer_dir}",
                       "--no_packing", "--max_seq_length", "77", "--quality_filter", "ko", "--skip_bad_records",
                       "--dataset_num_proc", "3", "--prep_timeout_s", "12.5", "--seed", "7", "--dedup", "none"])
    assert args.training is None and args.tokenize_only and args.seed == 7
    assert args.sources.dataset == ("a.jsonl", "b.txt@2")
    assert (args.packing.packing, args.packing.max_seq_length) == (False, 77)
    assert args.stage.quality_filter == "ko" and args.stage.skip_bad_records is True
    assert (args.workers.dataset_num_proc, args.cache.prep_timeout_s, args.dedup.dedup) == (3, 12.5, "none")
    assert {"packing", "max_seq_length", "dataset", "seed"} <= args.given and "mode" not in args.given


def test_a_prepare_imports_neither_torch_nor_transformers_to_parse(tokenizer_dir):
    """The property that makes a mistyped flag cheap: nothing heavy is imported to answer it."""
    code = ("import sys; from rankzero.args import parse_args\n"
            f"try: parse_args({base(tokenizer_dir, '--learning_rat', '1e-3')!r})\n"
            "except ValueError as error: print(error)\n"
            f"parse_args({prepare_only(tokenizer_dir)!r})\n"
            "print(sorted(m for m in ('torch', 'transformers', 'datasets') if m in sys.modules))")
    result = run([sys.executable, "-c", code])
    assert "unknown flag --learning_rat (did you mean --learning_rate?)" in result.stdout
    assert result.stdout.strip().endswith("[]"), result.stdout


def test_a_mistyped_flag_exits_2_with_the_closest_name(tokenizer_dir, tmp_path):
    result = run([sys.executable, REPO / "train.py", *base(tokenizer_dir, "--learning_rat", "1e-3")], check=False)
    assert result.returncode == 2
    assert "unknown flag --learning_rat (did you mean --learning_rate?)" in result.stderr
    assert "unexpected argument" not in result.stderr  # the typo's value goes with it
    with pytest.raises(ValueError, match=r"unknown flag --max_seq_len \(did you mean --max_seq_length\?\)"):
        parse_args(prepare_only(tokenizer_dir, "--max_seq_len", "64"))
    with pytest.raises(ValueError, match=r"unknown flag --max_stpes \(did you mean --max_steps\?\)"):
        parse_args(prepare_only(tokenizer_dir, "--max_stpes", "5"))  # under --tokenize_only too
    with pytest.raises(ValueError, match=r"unexpected argument 'stray.jsonl'"):
        parse_args(base(tokenizer_dir, "--output_dir", str(tmp_path), "--max_steps", "5", "stray.jsonl"))


def test_the_trainer_flag_table_matches_hf_argument_parser():
    """trainer_flags.py reads TrainingArguments from source; HfArgumentParser is the truth."""
    from transformers import HfArgumentParser

    from rankzero.train.training_args import TrainingArguments
    from rankzero.trainer_flags import BOOL, LIST, VALUE, training_options

    actions = HfArgumentParser(TrainingArguments)._option_string_actions
    expected = {}
    for option, action in actions.items():
        if option.startswith("--") and option != "--help":
            kind = BOOL if action.nargs in ("?", 0) else LIST if action.nargs == "+" else VALUE
            expected[option] = (action.dest, kind)
    assert training_options() == expected


def test_trainer_flags_by_their_own_names_and_the_shared_seed(tokenizer_dir, tmp_path):
    # The seed's aliases (--batch_size, --num_epochs) are gone: no launcher, recipe or doc used them.
    for alias in ("--batch_size", "--num_epochs"):
        with pytest.raises(ConfigError, match=f"unknown flag {alias}"):
            parse_args(base(tokenizer_dir, "--output_dir", str(tmp_path), alias, "3"))
    args = parse_args(base(tokenizer_dir, "--output_dir", str(tmp_path), "--per_device_train_batch_size", "3",
                           "--num_train_epochs", "2"))
    assert args.training.per_device_train_batch_size == 3 and args.training.num_train_epochs == 2
    assert {"per_device_train_batch_size", "num_train_epochs", "model_config"} <= args.given
    assert args.seed == args.training.seed == DEFAULT_SEED  # one default for the data and the Trainer
    args = parse_args(["--dataset", "x", "--tokenizer_path", str(tokenizer_dir), "--model_name_or_path", str(REPO),
                       "--output_dir", str(tmp_path), "--no_packing", "--seed", "5"])
    assert args.model.pretrained_model == str(REPO) and args.packing.packing is False
    assert args.seed == args.training.seed == 5
    assert {"packing", "pretrained_model", "seed"} <= args.given


def test_missing_model_is_reported_with_the_other_problems(tmp_path):
    with pytest.raises(ValueError) as error:
        parse_args(["--dataset", "x", "--tokenizer_path", str(tmp_path / "nope"), "--output_dir", str(tmp_path)])
    assert "--tokenizer_path" in str(error.value)
    with pytest.raises(ValueError, match="--model_config FILE.json"):
        parse_args(["--dataset", "x", "--tokenizer_path", str(tmp_path), "--output_dir", str(tmp_path)])


def test_tokenize_only_refuses_a_resume_and_names_what_it_ignores(tokenizer_dir, caplog):
    with pytest.raises(ValueError, match="--resume_from_checkpoint: --tokenize_only prepares the data and exits"):
        parse_args(prepare_only(tokenizer_dir, "--resume_from_checkpoint", "auto"))
    with caplog.at_level(logging.WARNING):
        args = parse_args(prepare_only(tokenizer_dir, "--learning_rate", "1e-3", "--model_config", "nowhere.json"))
    assert args.training is None
    assert "--tokenize_only prepares the data and exits: --learning_rate, --model_config ignored" in caplog.text


def test_parsing_under_a_launcher_creates_no_process_group(tokenizer_dir, tmp_path):
    """With WORLD_SIZE=2 and no peer, creating the group would block: parsing must not try."""
    code = ("import sys, torch.distributed as dist; from rankzero.args import parse_args; "
            f"a = parse_args({base(tokenizer_dir, '--output_dir', str(tmp_path))!r}); "
            "print('initialized', dist.is_initialized())")
    env = quiet_env(RANK=0, WORLD_SIZE=2, LOCAL_RANK=0, LOCAL_WORLD_SIZE=2, MASTER_ADDR="127.0.0.1",
                    MASTER_PORT=free_port())
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=90)
    assert "initialized False" in result.stdout, result.stderr[-2000:]


def test_evaluation_without_eval_data_gets_a_split_at_argument_time(tokenizer_dir, tmp_path):
    """--eval_strategy asks for held-out data: without a split flag one is set here, sized by the input, so
    evaluation cannot find itself without data after the prepare."""
    small, big = tmp_path / "small.jsonl", tmp_path / "big.jsonl"
    small.write_text('{"text": "짧은 문서"}\n' * 100)
    with open(big, "wb") as handle:
        handle.truncate(3 * 10 ** 9)  # sparse: ~1e9 tokens by the estimate
    given = ["--tokenizer_path", str(tokenizer_dir), "--model_config", str(TINY), "--output_dir", str(tmp_path)]
    args = parse_args(["--dataset", str(small), *given, "--eval_strategy", "steps"])
    assert args.sources.validation_split_percentage == 5
    assert args.defaults["validation_split_percentage"].startswith("5 (--eval_strategy steps needs held-out data")
    args = parse_args(["--dataset", str(big), *given, "--eval_strategy", "epoch"])
    assert args.sources.validation_split_percentage == 0.2  # capped near 2M tokens of the ~1e9
    for more in (["--validation_split_percentage", "7"], ["--eval_dataset", str(small), "--dataset", str(big)]):
        args = parse_args(["--dataset", str(small), *given, "--eval_strategy", "steps", *more])
        assert "validation_split_percentage" not in args.defaults
        assert args.sources.validation_split_percentage == (7 if "7" in more else None)
    assert parse_args(["--dataset", str(small), *given]).sources.validation_split_percentage is None


def test_sft_masks_across_samples_unless_told_otherwise(tokenizer_dir, tmp_path):
    given = ["--dataset", "x.jsonl", "--tokenizer_path", str(tokenizer_dir), "--model_config", str(TINY),
             "--output_dir", str(tmp_path)]
    args = parse_args([*given, "--mode", "sft"])
    assert args.model.mask_across_documents is True and "mask_across_documents" in args.defaults
    assert parse_args([*given, "--mode", "sft", "--no_mask_across_documents"]).model.mask_across_documents is False
    assert parse_args([*given, "--mode", "sft", "--no_packing"]).model.mask_across_documents is False
    assert parse_args(given).model.mask_across_documents is False and not parse_args(given).defaults


@pytest.mark.parametrize("weight", ["abc", "inf", "nan", "0", "-1", "1e999"])
def test_a_bad_weight_is_an_error_naming_the_spec(tokenizer_dir, weight):
    spec = f"x.jsonl@{weight}"
    with pytest.raises(ValueError, match=rf"--dataset {re.escape(spec)}: the weight after '@' must be"):
        parse_args(["--tokenize_only", "--dataset", spec, "--tokenizer_path", str(tokenizer_dir)])


def test_bad_training_numbers_name_their_flag_before_anything_is_written(tmp_path, tokenizer_dir):
    output = tmp_path / "out"
    result = run([sys.executable, REPO / "train.py", "--dataset", "x.jsonl", "--tokenizer_path", tokenizer_dir,
                  "--model_config", TINY, "--output_dir", output, "--cache_dir", tmp_path / "cache",
                  "--per_device_train_batch_size", "0", "--learning_rate", "nan", "--gradient_accumulation_steps", "0"],
                 check=False)
    assert result.returncode == 2, result.stderr[-3000:]
    for problem in ("--per_device_train_batch_size 0: must be at least 1", "--learning_rate nan: must be a finite",
                    "--gradient_accumulation_steps 0: must be at least 1"):
        assert problem in result.stderr, result.stderr[-3000:]
    assert not output.exists() and not (tmp_path / "cache").exists()


def test_a_row_longer_than_the_model_positions(tmp_path, tokenizer_dir, caplog):
    config = json.loads(TINY.read_text())
    config["max_position_embeddings"] = 128
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    argv = ["--dataset", "x.jsonl", "--tokenizer_path", str(tokenizer_dir), "--output_dir", str(tmp_path / "out"),
            "--max_seq_length", "256"]
    with pytest.raises(ValueError, match=r"--max_seq_length 256: longer than the model's max_position_embeddings 128"):
        parse_args([*argv, "--model_config", str(path)])
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"max_position_embeddings 128 \(.*checkpoint/config.json\)"):
        parse_args([*argv, "--pretrained_model", str(checkpoint)])
    config["rope_parameters"] = {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0}
    path.write_text(json.dumps(config))
    with caplog.at_level(logging.WARNING):
        assert parse_args([*argv, "--model_config", str(path)]).packing.max_seq_length == 256
    assert "allowed because its RoPE scaling (yarn, factor 4.0) extends the positions" in caplog.text
    assert parse_args([*argv[:-2], "--max_seq_length", "128", "--model_config", str(path)])


# ------------------------------------------------------------------ recipes


def test_recipe_with_cli_override(tokenizer_dir, tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"dataset: [a.jsonl, b.txt]\ntokenizer_path: {tokenizer_dir}\nmodel_config: {TINY}\n"
                      f"output_dir: {tmp_path}\nlearning_rate: 1.0e-3\nmax_steps: 50\nmask_across_documents: true\n")
    args = parse_args([str(recipe), "--max_steps", "7"])
    assert args.training.max_steps == 7 and args.training.learning_rate == 1e-3
    assert args.sources.dataset == ("a.jsonl", "b.txt") and args.model.mask_across_documents is True
    assert args.recipe == str(recipe)


@pytest.mark.parametrize("text, problem", [
    ("learning_rate: 1.0e-3\nmax_steps: [5\n", r"r.yaml:3: not valid YAML"),
    ("learning_rate: !!python/object/apply:os.system ['true']\n",
     r"r.yaml:1: not valid YAML .*no !!python tags"),
    ("max_steps: [5, 6]\n", r"r.yaml: 'max_steps' takes one value, got a list \[5, 6\]"),
    ("fsdp: [full_shard, {auto_wrap: 1}]\n", r"r.yaml: 'fsdp' is a list of plain values"),
    ("warmup_step: 10\n", r"r.yaml: unknown key 'warmup_step' \(did you mean warmup_steps\?\)"),
    ("- a\n- b\n", r"r.yaml: a recipe is a mapping of flag names to values, got list"),
])
def test_a_bad_recipe_is_an_error_naming_the_file_and_line(tmp_path, tokenizer_dir, text, problem):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(text)
    with pytest.raises(ConfigError, match=problem):
        parse_args([str(recipe), *base(tokenizer_dir, "--output_dir", str(tmp_path))])


def test_every_shipped_recipe_parses(tokenizer_dir, tmp_path):
    import yaml

    for recipe in sorted((REPO / "configs" / "recipes").glob("*.yaml")):
        # A continued-pretraining recipe (no model_config) takes its model on the command line: one of its length.
        model = [] if "model_config" in yaml.safe_load(recipe.read_text()) else \
            ["--model_config", str(REPO / "configs" / "model_config_1b.json")]
        args = parse_args([str(recipe), "--dataset", "x.jsonl", "--tokenizer_path", str(tokenizer_dir),
                           "--output_dir", str(tmp_path), *model])
        assert args.training is not None, recipe


# ------------------------------------------------------------------ --help


def test_help_is_short_grouped_and_says_where_the_trainer_flags_are():
    result = run([sys.executable, REPO / "train.py", "--help"])
    lines = result.stdout.splitlines()
    assert len(lines) <= 150, len(lines)
    for name in our_flags():
        assert sum(line.lstrip().startswith(f"--{name} ") or line.strip() == f"--{name}" for line in lines) == 1, name
    for title in (cls.__doc__.splitlines()[0] for cls in CONFIGS.values()):
        assert title in lines
    assert "--help_all" in result.stdout and "TrainingArguments" in result.stdout
    every = run([sys.executable, REPO / "train.py", "--help_all"]).stdout
    for flag in ("--max_steps", "--resume_from_checkpoint", "--deepspeed", "--fsdp", "--lr_scheduler_type"):
        assert flag in every
