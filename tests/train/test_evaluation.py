"""Training a user can watch: evaluation on held-out data (eval_loss, perplexity) with 2 real ranks,
defaults that learn from scratch, training_curves.png, the end-of-run summary, TensorBoard, and samples
that never show a character cut in half."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from helpers import REPO, TINY, flag_argv, free_port, log_history, losses, run, spawn, train_flags, wait_all


def test_two_ranks_evaluate_held_out_data_and_log_eval_loss_perplexity_curves_and_events(tmp_path, tokenizer_dir,
                                                                                           large_corpus):
    out = tmp_path / "run"
    flags = train_flags(large_corpus, tokenizer_dir, tmp_path / "cache", out, max_steps=6, logging_steps=3,
                        validation_split_percentage=5, eval_strategy="steps", eval_steps=3, report_to="tensorboard",
                        save_strategy="steps", save_steps=3)
    port = free_port()
    results = wait_all([spawn(flags, rank, 2, port=port) for rank in (0, 1)], timeout=600)
    assert all(code == 0 for code, *_ in results), "\n".join(err[-6000:] for _, _, err, _ in results)
    history = log_history(out)
    evaluations = [entry for entry in history if "eval_loss" in entry]
    assert [entry["step"] for entry in evaluations] == [3, 6]  # at --eval_steps, the last one also the end's
    for entry in evaluations:
        assert entry["eval_perplexity"] == pytest.approx(math.exp(entry["eval_loss"]), rel=1e-3)
    manifest = json.loads((out / "data_manifest.json").read_text())
    assert manifest["validation"]["sequences"] > 0
    stdout = results[0][1]
    assert "eval step 3/6 | eval_loss" in stdout and "| perplexity" in stdout
    assert "step 3/6 | loss" in stdout  # training lines are not held back by the evaluations
    # The summary, on rank 0 only.
    assert f"done: 6 steps," in stdout and f"model: {out}" in stdout and "eval loss" in stdout
    assert f"continue: ./pretrain_cont.sh {out}" in stdout and "done: " not in results[1][1]
    # The picture (rewritten at each save and at the end) and TensorBoard's event files.
    curves = out / "training_curves.png"
    assert curves.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and curves.stat().st_size > 10_000
    assert list(out.rglob("events.out.tfevents.*")), "tensorboard wrote no event file"
    tokens = [entry["tokens_seen"] for entry in history if "tokens_seen" in entry]
    assert tokens == sorted(tokens) and tokens[-1] == 6 * 2 * 4 * 64  # steps × ranks × rows × tokens: all real


def test_from_scratch_without_a_recipe_the_loss_falls(tmp_path, tokenizer_dir, train_corpus):
    """No learning rate, schedule or optimizer flag: the pretraining defaults, printed, make it learn."""
    out = tmp_path / "run"
    flags = {"dataset": train_corpus, "tokenizer_path": tokenizer_dir, "cache_dir": tmp_path / "cache",
             "output_dir": out, "model_config": TINY, "max_seq_length": 64, "per_device_train_batch_size": 8,
             "max_steps": 200, "logging_steps": 10, "save_strategy": "no", "report_to": "none",
             "dataloader_num_workers": 0}
    result = run([sys.executable, REPO / "train.py", *flag_argv(flags)], timeout=900)
    assert "training.learning_rate = 0.001  (default: 0.001 (from scratch" in result.stdout
    assert "training.lr_scheduler_type" in result.stdout and "cosine" in result.stdout
    steps = losses(out)
    assert steps[200] < steps[10] - 1.0, steps


def test_a_missing_report_to_backend_fails_before_the_prepare(tmp_path, tokenizer_dir, corpus):
    import importlib.util

    if importlib.util.find_spec("wandb") is not None:
        pytest.skip("wandb is installed here")
    result = run([sys.executable, REPO / "train.py", *train_flags(corpus, tokenizer_dir, tmp_path / "cache",
                                                                   tmp_path / "out", report_to="wandb")], check=False)
    assert result.returncode == 2 and "--report_to wandb: not installed here; pip install wandb" in result.stderr
    assert not (tmp_path / "cache").exists(), "nothing was prepared"


def test_samples_never_show_a_character_cut_in_half(tokenizer_dir):
    from transformers import AutoTokenizer

    from rankzero.train.evaluation import whole_characters  # scripts/generate.py's and each evaluation's samples

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    text = "한국어 문장은 여러 바이트로 된 글자로 이루어진다. 🙂 끝"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    cut = [len(ids[:end]) for end in range(1, len(ids) + 1) if tokenizer.decode(ids[:end]).endswith("\ufffd")]
    assert cut, "no prefix ends mid-character: the test proves nothing with this tokenizer"
    for end in range(1, len(ids) + 1):
        shown = whole_characters(tokenizer, ids[:end])
        assert "\ufffd" not in shown and text.startswith(shown), (end, shown)
    assert whole_characters(tokenizer, ids) == text


def test_generate_has_help_and_chat(tmp_path):
    result = run([sys.executable, REPO / "scripts" / "generate.py", "--help"])
    for flag in ("--chat", "--temperature", "--top_p", "--top_k", "--greedy", "--seed", "--max_new_tokens"):
        assert flag in result.stdout


def test_a_40_step_run_logs_its_loss_by_default_and_shows_it_everywhere(tmp_path, tokenizer_dir, train_corpus):
    """No --logging_steps: about max_steps/50 (here every step), printed; the training loss then reaches the
    log, TensorBoard (train/loss; the perplexity under eval/) and the summary."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "run"
    flags = train_flags(train_corpus, tokenizer_dir, tmp_path / "cache", out, max_steps=40, report_to="tensorboard",
                        validation_split_percentage=10)
    del flags[flags.index("--logging_steps"):flags.index("--logging_steps") + 2]
    result = run([sys.executable, REPO / "train.py", *flags], timeout=600)
    assert "training.logging_steps = 1  (default: 1 (about 40 steps (--max_steps) / 50" in result.stdout
    assert "training.eval_steps = 10  (default: 10 (every 10 logging steps))" in result.stdout
    steps = losses(out)
    assert sorted(steps) == list(range(1, 41))
    assert f"last train loss {steps[40]:.4f} (step 40)" in result.stdout
    [events] = out.rglob("events.out.tfevents.*")
    tags = EventAccumulator(str(events)).Reload().Tags()["scalars"]
    assert {"train/loss", "train/learning_rate", "eval/loss", "eval/perplexity"} <= set(tags), tags
    assert "train/perplexity" not in tags


def test_the_curves_plot_what_was_logged_against_tokens_or_else_steps():
    from rankzero.train.report import panels

    # HF's logging_steps 500 in a 200-step run: evaluations only, no token counts.
    label, shown, _ = panels([{"step": 100, "eval_loss": 5.0}, {"step": 200, "eval_loss": 4.0}])
    assert label == "optimizer steps"
    assert [(title, [name for name, *_ in curves]) for title, _, curves in shown] == [("loss", ["eval loss"])]
    assert shown[0][2][0][1:] == ([100.0, 200.0], [5.0, 4.0])

    logged = [{"step": step, "loss": 6.0 - step / 10, "learning_rate": 1e-3, "tokens_seen": 256 * step}
              for step in (10, 20)] + [{"step": 20, "eval_loss": 5.5}]
    label, shown, _ = panels(logged)  # no tokens/s logged: no empty panel for it
    assert label == "tokens trained" and [title for title, *_ in shown] == ["loss", "learning rate"]
    assert dict((name, xs) for name, xs, _ in shown[0][2]) == {"train loss": [2560, 5120], "eval loss": [5120.0]}
