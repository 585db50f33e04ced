"""recipe.yaml, the effective run: parse → record → parse the record gives the same TrainingArguments and
configs for every shipped recipe and every flag family, with absolute paths; and a newcomer's flow through
the launchers: a TensorBoard run → pretrain_cont.sh → RESUME=1 from another directory, without the model
config file."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from helpers import REPO, TINY, losses, quiet_env, run, single_rank, train_flags, write_corpus
from rankzero.args import parse_args
from rankzero.config import CONFIGS
from rankzero.recipe import absolute_paths, effective_recipe, write_recipe
from rankzero.train.defaults import CONTINUED_RATE_SHARE

PARAMETERS = 164_160  # the tiny model's: the from-scratch learning rate depends on it


def effective(args, steps_per_epoch: int = 7):
    """The TrainingArguments a run trains with: the parsed ones and the defaults train() applies."""
    from rankzero.train.defaults import BEFORE_MODEL, WITH_MODEL, Facts, resolve

    facts = Facts(args.given, single_rank(), parameters=PARAMETERS, from_scratch=not args.model.pretrained_model,
                  has_eval=args.sources.has_validation, steps_per_epoch=steps_per_epoch)
    return resolve(args.training, facts, BEFORE_MODEL + WITH_MODEL)[0]


def round_trip(argv: list[str], tmp_path: Path) -> tuple[dict, Path]:
    """Parse argv, record the run, parse the record: both must be the same run, and recording it again
    writes the same recipe (a resume never rewrites it differently)."""
    first = parse_args(argv)
    recorded = effective_recipe(first, effective(first))
    path = tmp_path / "recipe.yaml"
    write_recipe(path, recorded)
    second = parse_args([str(path)])
    assert effective(second).to_dict() == effective(first).to_dict()
    for group in CONFIGS:  # a path given relative to this directory is recorded absolute
        assert dataclasses.asdict(getattr(second, group)) == absolute_paths(dataclasses.asdict(getattr(first, group)))
    assert second.seed == first.seed
    assert effective_recipe(second, effective(second)) == recorded
    return recorded, path


@pytest.fixture
def common(tmp_path, tokenizer_dir):
    corpus = write_corpus(tmp_path / "a.jsonl")
    shutil.copy(corpus, tmp_path / "b.txt")
    return ["--dataset", str(corpus), f"{tmp_path / 'b.txt'}@2", "--tokenizer_path", str(tokenizer_dir),
            "--output_dir", str(tmp_path / "run"), "--cache_dir", str(tmp_path / "cache")]


@pytest.mark.parametrize("recipe", sorted((REPO / "configs" / "recipes").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_recipe_records_and_replays_to_the_same_run(recipe, common, tmp_path):
    shipped = yaml.safe_load(recipe.read_text())
    # A continued-pretraining recipe names no model: its model comes on the command line, as its header says
    # (one that holds the recipe's 4096 positions).
    model_config = REPO / "configs" / "model_config_1b.json"
    model = [] if "model_config" in shipped else ["--model_config", str(model_config)]
    recorded, _ = round_trip([str(recipe), *common, *model], tmp_path)
    for name, value in shipped.items():  # what the recipe says, its paths made absolute
        if name in ("model_config", "dataset"):
            continue
        assert recorded[name] == value, name
    assert recorded["model_config"] == (str(REPO / shipped["model_config"]) if "model_config" in shipped else str(model_config))


FAMILIES = {
    "lists and bools": ["--eval_dataset", "{tmp}/held.jsonl", "--no_packing", "--mask_across_documents",
                        "--debug", "underflow_overflow", "--dedup", "exact"],
    "JSON": ["--lr_scheduler_type", "cosine_with_min_lr", "--lr_scheduler_kwargs", '{"min_lr_rate": 0.1}',
             "--activation_checkpointing_kwargs", '{"use_reentrant": false}'],
    "FSDP bare": ["--fsdp", "--fsdp_config", "{tmp}/fsdp.json"],
    "FSDP legacy string": ["--fsdp", "full_shard auto_wrap", "--fsdp_config",
                           '{"transformer_layer_cls_to_wrap": "LlamaDecoderLayer"}'],
    "report_to": ["--report_to", "tensorboard", "--logging_steps", "3", "--eval_strategy", "steps"],
    "epochs, no max_steps": ["--num_train_epochs", "2", "--learning_rate", "3e-4", "--warmup_steps", "5",
                             "--seed", "7", "--dataset_num_proc", "1", "--optim", "adamw_torch"],
}


@pytest.mark.parametrize("family", FAMILIES)
def test_every_flag_family_records_and_replays_to_the_same_run(family, common, tmp_path, tokenizer_dir):
    (tmp_path / "held.jsonl").write_text(json.dumps({"text": "검증용 문서입니다."}) + "\n")
    (tmp_path / "fsdp.json").write_text(json.dumps({"reshard_after_forward": True, "version": 2}))
    extra = [arg.replace("{tmp}", str(tmp_path)) for arg in FAMILIES[family]]
    recorded, path = round_trip([*common, "--model_config", str(TINY), "--max_steps", "20", *extra], tmp_path)
    text = path.read_text()
    assert "True\n" not in text.split("fsdp:")[-1].split("\n")[0]  # never `--fsdp True`
    if family == "FSDP bare":
        assert recorded["fsdp"] is True and recorded["fsdp_config"] == str(tmp_path / "fsdp.json")
    if family == "FSDP legacy string":
        assert recorded["fsdp"] == "full_shard auto_wrap"  # as given, not the processed True + config
        assert recorded["fsdp_config"] == {"transformer_layer_cls_to_wrap": "LlamaDecoderLayer"}
    if family == "report_to":
        assert recorded["report_to"] == ["tensorboard"]


def test_the_record_holds_every_default_applied_and_absolute_paths(tmp_path, tokenizer_dir, monkeypatch):
    """Relative paths as a newcomer types them; the record replays from another directory."""
    work = tmp_path / "work"
    (work / "configs").mkdir(parents=True)
    shutil.copy(TINY, work / "configs" / "tiny.json")
    write_corpus(work / "docs.jsonl")
    shutil.copytree(tokenizer_dir, work / "tok")
    monkeypatch.chdir(work)
    args = parse_args(["--dataset", "docs.jsonl", "--tokenizer_path", "tok", "--model_config", "configs/tiny.json",
                       "--output_dir", "runs/d", "--max_steps", "200", "--report_to", "tensorboard"])
    recorded = effective_recipe(args, effective(args))
    assert recorded["dataset"] == [str(work / "docs.jsonl")] and recorded["tokenizer_path"] == str(work / "tok")
    assert recorded["model_config"] == str(work / "configs" / "tiny.json")
    assert recorded["output_dir"] == str(work / "runs" / "d")
    # The defaults a from-scratch run gets, none of them given: a replay must not fall back to HF's.
    assert {name: recorded[name] for name in ("learning_rate", "lr_scheduler_type", "warmup_steps", "weight_decay",
                                               "adam_beta1", "adam_beta2", "optim", "logging_steps", "seed")} == {
        "learning_rate": 1e-3, "lr_scheduler_type": "cosine", "warmup_steps": 0.02, "weight_decay": 0.1,
        "adam_beta1": 0.9, "adam_beta2": 0.95, "optim": args.training.optim, "logging_steps": 4, "seed": 42}
    # What fits the machine is decided where the recipe is replayed.
    assert not {"use_cpu", "dataloader_num_workers", "disable_tqdm", "bf16", "dataset_num_proc"} & set(recorded)
    write_recipe(work / "recipe.yaml", recorded)
    monkeypatch.chdir(tmp_path)
    again = parse_args([str(work / "recipe.yaml")])
    assert again.sources.dataset == (str(work / "docs.jsonl"),) and again.training.report_to == ["tensorboard"]


@pytest.mark.parametrize("text, expected", [
    ("report_to: [tensorboard]\n", {"report_to": ["tensorboard"]}),  # as main wrote it
    ("report_to: none\n", {"report_to": []}),
    ("fsdp: true\n", {"fsdp": True}),  # as main wrote it: replayed as the bare flag
    ("fsdp: false\n", {"fsdp": None}),
])
def test_recipes_written_before_read_back(text, expected, tmp_path, tokenizer_dir):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(text)
    args = parse_args([str(recipe), "--dataset", "x.jsonl", "--tokenizer_path", str(tokenizer_dir), "--model_config",
                       str(TINY), "--output_dir", str(tmp_path)])
    assert {name: getattr(args.training, name) for name in expected} == expected
    overridden = parse_args([str(recipe), "--dataset", "x.jsonl", "--tokenizer_path", str(tokenizer_dir),
                             "--model_config", str(TINY), "--output_dir", str(tmp_path), "--report_to", "none"])
    assert overridden.training.report_to == []  # a flag after the recipe wins


def test_tensorboard_run_then_pretrain_cont_then_resume_from_another_directory(tmp_path, tokenizer_dir):
    """The newcomer's flow, with real processes: relative paths, TensorBoard; continue with pretrain_cont.sh
    (the run's optimizer and continued pretraining's schedule, not HF's fine-tuning defaults nor the
    from-scratch schedule); the model config file deleted; RESUME=1 by absolute path from another directory,
    twice (the first resume's recipe must read back too)."""
    work = tmp_path / "work"
    (work / "configs").mkdir(parents=True)
    shutil.copy(TINY, work / "configs" / "tiny.json")
    write_corpus(work / "docs.jsonl")
    shutil.copytree(tokenizer_dir, work / "tok")
    flags = train_flags(Path("docs.jsonl"), "tok", "cache", "runs/d", model_config="configs/tiny.json",
                        max_steps=6, save_strategy="steps", save_steps=3, report_to="tensorboard")
    for flag in ("--learning_rate", "--logging_steps"):  # the defaults: from scratch, and every step of 6
        del flags[flags.index(flag):flags.index(flag) + 2]
    env = quiet_env(NGPU=0)
    run([REPO / "pretrain.sh", *flags], env=env, cwd=work)
    out = work / "runs" / "d"
    first = json.loads((out / "run_config.json").read_text())["training"]
    assert json.loads((out / "run_config.json").read_text())["training_given"]["report_to"] == "tensorboard"

    result = run([REPO / "pretrain_cont.sh", "runs/d", "--max_steps", "2", "--logging_steps", "1"],
                 env={**env, "OUTPUT_DIR": str(work / "runs" / "cont")}, cwd=work)
    continued = json.loads((work / "runs" / "cont" / "run_config.json").read_text())["training"]
    for name in ("optim", "max_grad_norm", "adam_beta1", "adam_beta2", "weight_decay"):  # the run's, and pretraining's
        assert continued[name] == first[name], name
    # Not the from-scratch schedule: continued pretraining's own (defaults.learning_defaults).
    assert continued["learning_rate"] == float(f"{first['learning_rate'] * CONTINUED_RATE_SHARE:.2g}")
    assert (first["lr_scheduler_type"], continued["lr_scheduler_type"]) == ("cosine", "cosine_with_min_lr")
    assert continued["report_to"] == ["tensorboard"]
    assert "replayed runs/d/recipe.yaml (pretraining from scratch → continued pretraining): " in result.stdout

    (work / "configs" / "tiny.json").unlink()  # a resume builds the model from its checkpoint's config
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for steps in (8, 9):
        result = run([REPO / "pretrain_cont.sh", out, "--max_steps", steps], env={**env, "RESUME": "1"},
                     cwd=elsewhere)
        assert f"done: {steps} steps" in result.stdout
        assert max(losses(out)) == steps
    recipe = yaml.safe_load((out / "recipe.yaml").read_text())
    assert recipe["max_steps"] == 9 and recipe["report_to"] == ["tensorboard"]
    assert recipe["dataset"] == [str(work / "docs.jsonl")] and os.path.isabs(recipe["cache_dir"])


def test_an_fsdp_run_replays_from_its_recipe_to_the_same_losses(tmp_path, train_corpus, tokenizer_dir):
    """`--fsdp full_shard` recorded as given (not as the processed `fsdp: true`): RESUME=1 of a checkpoint under
    2 gloo processes shards again and reproduces the uninterrupted run's losses."""
    out = tmp_path / "run"
    flags = train_flags(train_corpus, tokenizer_dir, tmp_path / "cache", out, max_steps=6, logging_steps=1,
                        save_strategy="steps", save_steps=3, fsdp="full_shard")
    run([REPO / "pretrain.sh", *flags], env=quiet_env(NGPU=2), timeout=600)
    assert yaml.safe_load((out / "recipe.yaml").read_text())["fsdp"] == "full_shard"
    uninterrupted = losses(out)
    result = run([REPO / "pretrain_cont.sh", out / "checkpoint-3"], env=quiet_env(NGPU=2, RESUME=1), timeout=600)
    assert "data_parallel = FSDP2 full_shard over 2 process(es)" in result.stdout
    resumed = losses(out)
    for step in (4, 5, 6):
        assert resumed[step] == pytest.approx(uninterrupted[step], abs=1e-4), (step, resumed, uninterrupted)
