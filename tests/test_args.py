"""Arguments: every flag we define is read, the seed's aliases work, recipes with CLI overrides,
and parsing creates no process group (the data is prepared before one exists)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from rankzero.args import DataArguments, ModelArguments, parse_args
from trainutil import REPO, TINY, free_port, quiet_env


def base(tokenizer_dir, *more):
    return ["--dataset", "x.jsonl", "--tokenizer_path", str(tokenizer_dir), "--model_config", str(TINY), *more]


def test_every_flag_we_define_is_read_by_the_code():
    """Each field of our dataclasses is read somewhere outside its definition (`--help` lists them all)."""
    sources = "\n".join(p.read_text() for p in [REPO / "train.py", *(REPO / "rankzero").rglob("*.py")]
                        if p.name != "args.py")
    sources += (REPO / "rankzero" / "args.py").read_text().split("def check_arguments", 1)[1]
    unread = []
    for cls in (DataArguments, ModelArguments):
        for name in cls.__dataclass_fields__:
            if not re.search(rf"(\.{name}\b|getattr\([^)]*\"{name}\"|\"{name}\")", sources):
                unread.append(name)
    assert not unread, f"flags nobody reads: {unread}"


def test_help_lists_our_flags_and_training_arguments():
    result = subprocess.run([sys.executable, str(REPO / "train.py"), "--help"], capture_output=True, text=True,
                            env=quiet_env(), timeout=120)
    assert result.returncode == 0
    for flag in ("--dataset", "--model_config", "--pretrained_model", "--mask_across_documents", "--max_steps",
                 "--resume_from_checkpoint", "--deepspeed", "--fsdp"):
        assert flag in result.stdout


def test_seed_aliases(tokenizer_dir, tmp_path):
    args = parse_args(base(tokenizer_dir, "--output_dir", str(tmp_path), "--batch_size", "3", "--num_epochs", "2"))
    assert args.training.per_device_train_batch_size == 3 and args.training.num_train_epochs == 2
    assert {"per_device_train_batch_size", "num_train_epochs", "model_config"} <= args.given
    args = parse_args(["--dataset", "x", "--tokenizer_path", str(tokenizer_dir), "--model_name_or_path", str(REPO),
                       "--output_dir", str(tmp_path), "--no_packing"])
    assert args.model.pretrained_model == str(REPO) and args.data.packing is False
    assert "packing" in args.given and "pretrained_model" in args.given


def test_recipe_with_cli_override(tokenizer_dir, tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"dataset: [a.jsonl, b.txt]\ntokenizer_path: {tokenizer_dir}\nmodel_config: {TINY}\n"
                      f"output_dir: {tmp_path}\nlearning_rate: 1.0e-3\nmax_steps: 50\nmask_across_documents: true\n")
    args = parse_args([str(recipe), "--max_steps", "7"])
    assert args.training.max_steps == 7 and args.training.learning_rate == 1e-3
    assert args.data.dataset == ["a.jsonl", "b.txt"] and args.model.mask_across_documents is True


def test_missing_model_is_reported_with_the_other_problems(tmp_path):
    with pytest.raises(ValueError) as error:
        parse_args(["--dataset", "x", "--tokenizer_path", str(tmp_path / "nope"), "--output_dir", str(tmp_path)])
    assert "--model_config FILE.json" in str(error.value) and "--tokenizer_path" in str(error.value)


def test_parsing_under_a_launcher_creates_no_process_group(tokenizer_dir, tmp_path):
    """With WORLD_SIZE=2 and no peer, creating the group would block: parsing must not try."""
    code = ("import sys, torch.distributed as dist; from rankzero.args import parse_args; "
            f"a = parse_args({base(tokenizer_dir, '--output_dir', str(tmp_path))!r}); "
            "print('initialized', dist.is_initialized())")
    env = quiet_env(RANK=0, WORLD_SIZE=2, LOCAL_RANK=0, LOCAL_WORLD_SIZE=2, MASTER_ADDR="127.0.0.1",
                    MASTER_PORT=free_port())
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=90)
    assert "initialized False" in result.stdout, result.stderr[-2000:]


@pytest.mark.parametrize("argv", [
    ["--tokenize_only", "--dataset", "a.jsonl", "b.txt@2", "--tokenizer_path", "/tmp"],
    ["--tokenize_only", "true", "--dataset", "a.jsonl", "--tokenizer_path", "/tmp", "--no_packing",
     "--max_seq_length", "77", "--quality_filter", "ko", "--skip_bad_records", "--dataset_num_proc", "3"],
    ["--tokenize_only", "--dataset=x", "--tokenizer_path=/tmp", "--packing", "false", "--mode", "sft",
     "--prep_timeout_s", "12.5", "--text_column", "body", "--on_decode_error", "replace", "--seed", "7"],
])
def test_the_torch_free_prepare_parser_agrees_with_hf_argument_parser(argv):
    from transformers import HfArgumentParser

    from rankzero.args import DataArguments, ModelArguments, parse_args
    from rankzero.train.training_args import TrainingArguments

    fast = parse_args(argv)
    assert fast.training is None, "data-only --tokenize_only must take the torch-free path"
    data, _, training = HfArgumentParser((DataArguments, ModelArguments, TrainingArguments)).parse_args_into_dataclasses(argv)
    data.resolve_env()
    assert fast.data == data and fast.seed == training.seed


def test_tokenize_only_with_a_training_flag_uses_the_full_parser():
    from rankzero.args import parse_args

    args = parse_args(["--tokenize_only", "--dataset", "a", "--tokenizer_path", "/tmp", "--max_steps", "5"])
    assert args.training is not None and args.training.max_steps == 5
    with pytest.raises(ValueError, match="--max_stpes"):  # a typo is an error, never silently ignored
        parse_args(["--tokenize_only", "--dataset", "a", "--tokenizer_path", "/tmp", "--max_stpes", "5"])
