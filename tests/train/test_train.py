"""End-to-end training through train.py: two gloo processes, exact resume, every shipped recipe."""

from __future__ import annotations

import shutil
import sys

import pytest

from helpers import REPO, free_port, log_history, losses, run, train_flags


def test_torchrun_two_processes_learn_and_save_a_loadable_model(tmp_path, train_corpus, tokenizer_dir):
    out = tmp_path / "run"
    flags = train_flags(train_corpus, tokenizer_dir, tmp_path / "cache", out, max_steps=30, logging_steps=10)
    result = run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", 2, "--master_port", free_port(),
                  REPO / "train.py", *flags])
    assert result.stdout.count("resolved configuration:") == 1  # rank 0 only
    assert result.stdout.count("prepared: ") == 1 and result.stderr.count("data ready in") == 1  # so is the data's
    assert "data_parallel = DDP over 2 process(es), find_unused_parameters=False" in result.stdout
    assert "find_unused_parameters=True" not in result.stderr  # DDP's warning about the extra autograd traversal
    assert "step 30/30 | loss" in result.stdout
    history = log_history(out)
    steps = losses(out)
    assert steps[30] < steps[10] - 0.3, steps
    logged = [entry for entry in history if "loss" in entry]
    assert all(entry["tokens_per_second"] > 0 and "tokens_per_second_per_device" in entry for entry in logged)
    assert logged[-1]["tokens_per_second"] == pytest.approx(2 * logged[-1]["tokens_per_second_per_device"], rel=0.01)
    assert {"run_config.json", "recipe.yaml", "data_manifest.json", "tokenizer.json"} <= {p.name for p in out.iterdir()}

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out)
    assert next(model.parameters()).dtype == torch.float32
    inputs = tokenizer("서울은", return_tensors="pt", add_special_tokens=False)
    generated = model.generate(**inputs, max_new_tokens=8, do_sample=False)
    assert generated.shape[1] > inputs["input_ids"].shape[1]


def test_resume_from_checkpoint_matches_uninterrupted_run(tmp_path, train_corpus, tokenizer_dir):
    cache = tmp_path / "cache"
    whole = tmp_path / "whole"
    common = dict(max_steps=20, save_strategy="steps", save_steps=10, logging_steps=5, mask_across_documents="true")
    run([sys.executable, REPO / "train.py", *train_flags(train_corpus, tokenizer_dir, cache, whole, **common)])
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    shutil.copytree(whole / "checkpoint-10", resumed / "checkpoint-10")
    result = run([sys.executable, REPO / "train.py",
                  *train_flags(train_corpus, tokenizer_dir, cache, resumed, resume_from_checkpoint="auto", **common)])
    assert "step 20/20" in result.stdout and "step 5/20" not in result.stdout  # it did not start over
    assert "missing keys" not in result.stderr  # the tied lm_head.weight is never saved, and that is no warning
    assert losses(resumed)[20] == pytest.approx(losses(whole)[20], abs=1e-4)


@pytest.mark.parametrize("recipe", sorted((REPO / "configs" / "recipes").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_recipe_trains(recipe, tmp_path, train_corpus, tokenizer_dir):
    """Each recipe as shipped, with tiny overrides after it (CLI flags win over the recipe)."""
    out = tmp_path / "out"
    overrides = train_flags(train_corpus, tokenizer_dir, tmp_path / "cache", out, max_steps=2, logging_steps=1,
                            quality_filter="none", gradient_accumulation_steps=1, warmup_steps=0)
    run([sys.executable, REPO / "train.py", recipe, *overrides])
    assert set(losses(out)) == {1, 2}
    assert (out / "model.safetensors").is_file()


def test_sft_applies_the_chat_template_and_learns_only_answers(tmp_path, tokenizer_dir):
    """--mode sft on the shipped chat sample: ChatML rendering, prompt tokens masked, training runs."""
    import json

    import datasets
    from transformers import AutoTokenizer

    out = tmp_path / "sft"
    result = run([sys.executable, REPO / "train.py",
                  *train_flags(REPO / "data/sample/chat.jsonl", tokenizer_dir, tmp_path / "cache", out, max_steps=4,
                               logging_steps=2, mode="sft", max_seq_length=128)])
    prepared = next(line.split("prepared: ")[1] for line in result.stdout.splitlines() if line.startswith("prepared: "))
    rows = datasets.load_from_disk(prepared)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    ids = [token for row in rows["input_ids"] for token in row]
    labels = [label for row in rows["labels"] for label in row]
    text = tokenizer.decode(ids)
    learned = tokenizer.decode([t for t, label in zip(ids, labels) if label != -100])
    assert "<|im_start|>user" in text and "<|im_start|>assistant" in text  # the template was applied
    assert "<|im_start|>user" not in learned and "<|im_start|>assistant\n" not in learned  # prompts masked
    first = json.loads((REPO / "data/sample/chat.jsonl").read_text(encoding="utf-8").splitlines()[0])
    answer = first.get("output") or first["messages"][-1]["content"]
    assert answer[:20] in learned
    assert set(losses(out)) == {2, 4}
