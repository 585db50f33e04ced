"""A run's recipe.yaml replayed into another run (rankzero/recipe.py: replay): a resume takes every key; a new
run continued from it (pretrain_cont.sh) takes what still describes it, by the REPLAY table, and prints the
rest; an SFT run masks across its samples whatever a recipe says; a recipe value never silences a flag given
on the command line (`eval_strategy: no` beside `--validation_split_percentage`)."""

from __future__ import annotations

import dataclasses
import json
import re
import sys

import pytest

from helpers import REPO, TINY, quiet_env, run, train_flags, write_corpus, write_jsonl
from rankzero.args import parse_args
from rankzero.config import CONFIGS
from rankzero.errors import ConfigError
from rankzero.recipe import GROUP_OF, ONCE, RECORDED_GROUPS, RECORDED_TRAINING, describe, effective_recipe, write_recipe
from rankzero.train.defaults import CONTINUED_MIN_LR_RATE, CONTINUED_RATE_SHARE, learning_rate_for
from test_recipe import PARAMETERS, effective


def record(tmp_path, name: str, argv: list[str]):
    """A run's recipe.yaml, as the run writes it (every default applied), from its command line."""
    args = parse_args(argv)
    path = tmp_path / name / "recipe.yaml"
    path.parent.mkdir()
    write_recipe(path, effective_recipe(args, effective(args)))
    return path


@pytest.fixture
def base(tmp_path, tokenizer_dir):
    """A from-scratch run's recipe: its schedule defaulted, the Korean filter and near dedup on, no evaluation."""
    corpus = write_corpus(tmp_path / "docs.jsonl")
    return record(tmp_path, "base", ["--dataset", str(corpus), "--tokenizer_path", str(tokenizer_dir), "--model_config",
                                     str(TINY), "--output_dir", str(tmp_path / "base"), "--quality_filter", "ko",
                                     "--max_seq_length", "64", "--max_steps", "100", "--eval_strategy", "no"])


def continued(recipe, source, *flags):
    """What pretrain_cont.sh runs for a new run from `source` (the recipe first, its flags after)."""
    return parse_args([str(recipe), "--model_config", "", "--pretrained_model", str(source),
                       "--output_dir", str(source.parent / "new"), *map(str, flags)])


def test_every_recorded_key_has_a_group():
    recorded = {f.name for group in (*RECORDED_GROUPS, "workers", "cache") for f in dataclasses.fields(CONFIGS[group])}
    assert (recorded | set(RECORDED_TRAINING) | {"seed"}) - set(ONCE) <= set(GROUP_OF)


def test_continuing_a_from_scratch_run_takes_its_data_not_its_schedule(base, tokenizer_dir, capsys):
    args = continued(base, tokenizer_dir, "--max_steps", 7)
    assert args.sources.dataset == (str(base.parent.parent / "docs.jsonl"),)  # the same data, its filter too
    assert args.stage.quality_filter == "ko" and args.packing.max_seq_length == 64
    schedule = effective(args)
    rate = float(f"{learning_rate_for(PARAMETERS) * CONTINUED_RATE_SHARE:.2g}")
    assert (schedule.learning_rate, schedule.lr_scheduler_type.value) == (rate, "cosine_with_min_lr")
    assert schedule.lr_scheduler_kwargs == {"min_lr_rate": CONTINUED_MIN_LR_RATE}
    lines = describe(args.replayed)
    assert "(pretraining from scratch → continued pretraining)" in lines[0] and "dataset" in lines[0]
    assert "not replayed" in lines[1] and f"learning_rate {learning_rate_for(PARAMETERS)}" in lines[1]
    assert "lr_scheduler_type cosine" in lines[1] and "quality_filter" not in lines[1]

    # A resume is the same run: every key, the from-scratch schedule included.
    resumed = parse_args([str(base), "--resume_from_checkpoint", "auto"])
    assert resumed.training.learning_rate == learning_rate_for(PARAMETERS)
    assert "replayed" in describe(resumed.replayed)[0] and "learning_rate" in describe(resumed.replayed)[0]
    # A flag given wins over the continued-pretraining default.
    assert effective(continued(base, tokenizer_dir, "--learning_rate", 2e-4)).learning_rate == 2e-4


def test_sft_from_a_pretraining_run_masks_dedups_exactly_and_filters_nothing(base, tokenizer_dir, tmp_path):
    chats = write_jsonl(tmp_path / "chats.jsonl", [{"prompt": f"질문 {i}?", "response": f"답 {i}."} for i in range(5)])
    run = record(tmp_path, "cont", [str(base), "--model_config", "", "--pretrained_model", str(tokenizer_dir),
                                    "--output_dir", str(tmp_path / "cont")])  # continued pretraining, no masking
    args = continued(run, tokenizer_dir, "--mode", "sft", "--dataset", chats)
    assert args.model.mask_across_documents and args.dedup.dedup == "exact" and args.stage.quality_filter == "none"
    assert args.sources.dataset == (str(chats),) and "learning_rate" not in args.given
    lines = "\n".join(describe(args.replayed))
    assert "(continued pretraining → SFT, on other data)" in lines
    for key in ("mask_across_documents False", "dedup near", "quality_filter ko", "learning_rate"):
        assert key in lines.split("not replayed")[1], key
    asked = continued(run, tokenizer_dir, "--mode", "sft", "--dataset", chats, "--quality_filter", "ko")
    assert asked.stage.quality_filter == "ko"  # unless asked
    with pytest.raises(ConfigError, match=r"--dataset: give at least one source(.|\n)*recipe.yaml: not replayed "
                                          r"into this SFT run \(the continued pretraining run's\): dataset, "):
        continued(run, tokenizer_dir, "--mode", "sft")  # the pretraining corpus is not SFT data


def test_an_sft_run_masks_across_documents_whatever_its_recipe_says(tmp_path, tokenizer_dir):
    chats = write_jsonl(tmp_path / "chats.jsonl", [{"prompt": "질문?", "response": "답."}])
    common = ["--dataset", str(chats), "--tokenizer_path", str(tokenizer_dir), "--pretrained_model", str(tokenizer_dir),
              "--mode", "sft"]
    run = record(tmp_path, "sft", [*common, "--output_dir", str(tmp_path / "sft"), "--no_mask_across_documents"])
    assert "mask_across_documents: false" in run.read_text()
    args = continued(run, tokenizer_dir, "--max_steps", 3)
    assert args.model.mask_across_documents and "only --no_mask_across_documents on the command line" in \
        args.defaults["mask_across_documents"]
    hand = tmp_path / "hand.yaml"
    hand.write_text("mask_across_documents: false\n")
    assert parse_args([str(hand), *common, "--output_dir", str(tmp_path / "h")]).model.mask_across_documents
    # The command line still decides.
    assert not continued(run, tokenizer_dir, "--no_mask_across_documents").model.mask_across_documents


def test_a_recipe_never_silences_an_evaluation_flag(base, tokenizer_dir, tmp_path):
    args = continued(base, tokenizer_dir, "--validation_split_percentage", 10)
    assert "eval_strategy" not in args.given and args.sources.validation_split_percentage == 10
    assert any("eval_strategy no (recipe) not applied: --validation_split_percentage" in line
               for line in describe(args.replayed))
    resumed = parse_args([str(base), "--resume_from_checkpoint", "auto", "--eval_steps", "5"])
    assert resumed.sources.validation_split_percentage and effective(resumed).eval_strategy.value == "steps"
    hand = tmp_path / "hand.yaml"
    hand.write_text("eval_strategy: 'no'\n")
    flags = ["--dataset", str(base.parent.parent / "docs.jsonl"), "--tokenizer_path", str(tokenizer_dir),
             "--model_config", str(TINY), "--output_dir", str(tmp_path / "h")]
    held_out = write_corpus(tmp_path / "held_out.jsonl", copies=1)
    assert effective(parse_args([str(hand), *flags, "--eval_dataset", str(held_out)])).eval_strategy.value == "steps"
    with pytest.raises(ConfigError, match="--eval_steps 5: nothing is evaluated with --eval_strategy no"):
        parse_args([*flags, "--eval_strategy", "no", "--eval_steps", "5"])


def test_sft_through_pretrain_cont_from_a_pretraining_run(tmp_path, train_corpus, tokenizer_dir):
    """The launcher end to end: the SFT run masks, dedups exactly, keeps the pretraining schedule out and says
    what it replayed; the prepared data was deduplicated exactly (its manifest)."""
    base = tmp_path / "base"
    run([sys.executable, REPO / "train.py", *train_flags(train_corpus, tokenizer_dir, tmp_path / "cache", base,
                                                          max_steps=1)])
    out = tmp_path / "sft"
    result = run([REPO / "pretrain_cont.sh", base, "--mode", "sft", "--dataset", REPO / "data/sample/chat.jsonl",
                  "--max_seq_length", 128, "--max_steps", 1], env=quiet_env(NGPU=0, OUTPUT_DIR=out))
    assert f"replayed {base / 'recipe.yaml'} (pretraining from scratch → SFT, on other data): " in result.stdout
    assert re.search(r"not replayed .*: .*dedup near, .*learning_rate 0\.003", result.stdout), result.stdout[:3000]
    assert "model.mask_across_documents = True  (default: True (--mode sft" in result.stdout
    config = json.loads((out / "run_config.json").read_text())
    assert config["dedup"]["dedup"] == "exact" and config["training"]["learning_rate"] != 3e-3
    manifest = json.loads((out / "data_manifest.json").read_text())
    assert (manifest["dedup"], manifest["mode"], manifest["quality_filter"]) == ("exact", "sft", "none")
