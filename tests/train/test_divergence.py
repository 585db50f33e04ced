"""A diverged run is said to be one (issue 29, item 3): `--learning_rate 1e6 --max_grad_norm 0` makes the
gradients NaN within a few steps; the run logs NaN (never 0.0000), stops after STOP_AFTER_NONFINITE_STEPS
non-finite steps in a row, writes no checkpoint or model of NaN weights and ends with an error naming
its last good checkpoint. Real train.py on CPU, tiny model."""

from __future__ import annotations

import math
import re
import subprocess
import sys

import pytest

from rankzero.train.divergence import STOP_AFTER_NONFINITE_STEPS
from rankzero.train.report import _series
from rankzero.train.trainer import perplexity
from helpers import REPO, log_history, quiet_env, train_flags


@pytest.fixture(scope="module")
def diverged(tmp_path_factory, train_corpus, tokenizer_dir):
    base = tmp_path_factory.mktemp("diverged")
    out = base / "run"
    result = subprocess.run([sys.executable, str(REPO / "train.py"),
                             *train_flags(train_corpus, tokenizer_dir, base / "cache", out, max_steps=40,
                                          logging_steps=1, learning_rate=1e6, max_grad_norm=0, save_strategy="steps",
                                          save_steps=2)],
                            capture_output=True, text=True, timeout=600, env=quiet_env(), cwd=REPO)
    return out, result


def test_a_diverged_run_stops_with_an_error_naming_its_last_good_checkpoint(diverged):
    from safetensors.torch import load_file

    out, result = diverged
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    [line] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    found = re.match(r"error: training diverged: the gradient norm was not finite \(NaN or inf\) for (\d+) optimizer "
                     r"steps in a row \(steps (\d+)-(\d+)\); .* the last good checkpoint is (\S+): start from its "
                     r"weights with --pretrained_model", line)
    assert found, line
    count, first, last, checkpoint = int(found[1]), int(found[2]), int(found[3]), found[4]
    assert count == STOP_AFTER_NONFINITE_STEPS == last - first + 1
    # Stopped there: no step after the last non-finite one, no checkpoint from the first on, no model.
    history = log_history(out)
    assert max(entry["step"] for entry in history) == last
    steps = sorted(int(path.name.split("-")[1]) for path in out.glob("checkpoint-*"))
    assert steps and max(steps) < first and checkpoint == str(out / f"checkpoint-{max(steps)}")
    assert all(math.isfinite(value) for tensor in load_file(f"{checkpoint}/model.safetensors").values()
               for value in tensor.float().flatten().tolist()[:1000])
    assert not (out / "model.safetensors").exists() and "model saved" not in result.stdout
    # Reported as what it is: NaN, never the earlier losses' mean or 0.
    losses = {entry["step"]: entry["loss"] for entry in history if "loss" in entry}
    norms = {entry["step"]: entry["grad_norm"] for entry in history if "grad_norm" in entry}
    assert all(math.isnan(norms[step]) for step in range(first, last + 1))
    assert math.isnan(losses[last]) and "loss 0.0000" not in result.stdout
    assert f"step {last}/40 | loss nan" in result.stdout
    assert "last train loss nan" in result.stdout and "continue:" not in result.stdout
    assert (out / "training_curves.png").stat().st_size > 0


def test_the_curves_leave_a_gap_where_the_loss_was_not_finite():
    history = [{"step": step, "loss": loss, "tokens_seen": 100 * step, "learning_rate": 1e-3}
               for step, loss in [(1, 7.0), (2, 6.5), (3, math.nan), (4, math.inf), (5, math.nan)]]
    _, series = _series(history)
    tokens, values = series["train loss"]
    assert tokens == [100, 200, 300, 400, 500] and values[:2] == [7.0, 6.5]
    assert all(math.isnan(value) for value in values[2:])  # a gap, not a line falling to 0
    assert series["loss not finite"][0] == [300, 400, 500]


def test_perplexity_of_a_nan_loss_is_nan_not_inf():
    assert math.isnan(perplexity(math.nan))
    assert perplexity(800.0) == math.inf and perplexity(math.inf) == math.inf
    assert perplexity(1.0) == pytest.approx(math.e, rel=1e-4)


def test_two_ranks_stop_at_the_same_step_and_both_exit_1(tmp_path, train_corpus, tokenizer_dir):
    from helpers import free_port, spawn, wait_all

    out = tmp_path / "run"
    flags = train_flags(train_corpus, tokenizer_dir, tmp_path / "cache", out, max_steps=40, logging_steps=1,
                        learning_rate=1e6, max_grad_norm=0, save_strategy="steps", save_steps=2)
    port = free_port()
    results = wait_all([spawn(flags, rank, 2, port=port) for rank in (0, 1)], timeout=600)
    errors = []
    for code, _, stderr, _ in results:
        assert code == 1 and "Traceback" not in stderr, stderr[-3000:]
        [line] = [line for line in stderr.splitlines() if line.startswith("error: training diverged")]
        errors.append(line)
    assert errors[0] == errors[1]  # the same steps and checkpoint on both ranks: they judged the same norm
    assert not (out / "model.safetensors").exists()


def test_the_nan_filter_is_off_and_giving_it_says_it_is_ignored(tmp_path):
    from rankzero.runtime import Runtime
    from rankzero.train.defaults import Facts, fast_defaults, resolve
    from rankzero.train.training_args import TrainingArguments

    runtime = Runtime(rank=0, world_size=1, local_rank=0, local_world_size=1, node_rank=0, hostname="h")
    args, applied, warnings = resolve(TrainingArguments(output_dir=str(tmp_path)),
                                      Facts(frozenset(), runtime), (fast_defaults,))
    assert args.logging_nan_inf_filter is False and "logging_nan_inf_filter" in applied
    assert not [w for w in warnings if "nan_inf" in w]  # not given: nothing ignored
    given = TrainingArguments(output_dir=str(tmp_path), logging_nan_inf_filter=True)
    args, _, warnings = resolve(given, Facts(frozenset({"logging_nan_inf_filter"}), runtime), (fast_defaults,))
    assert args.logging_nan_inf_filter is False
    assert any(w.startswith("--logging_nan_inf_filter is ignored: a NaN or inf loss is logged") for w in warnings)


def test_an_inf_loss_with_finite_gradients_is_logged_once_and_training_goes_on(tmp_path, tokenizer_dir):
    """One impossible token makes the loss inf and leaves the gradients finite: logged as inf at its step, the
    next log finite again (the Trainer's `tr_loss -= tr_loss` would keep inf - inf = NaN for good), no stop."""
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer
    from test_train_units import runtime_of, tiny_model

    from rankzero.train.collator import BlockCollator
    from rankzero.train.divergence import DivergenceGuard
    from rankzero.train.throughput import ThroughputCallback
    from rankzero.train.trainer import RankzeroTrainer
    from rankzero.train.training_args import TrainingArguments, set_up_devices

    class OneInfLoss(RankzeroTrainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            # + a constant: the gradient is the loss's own, finite
            return loss + (torch.inf if self.state.global_step == 2 else 0.0)

    model = tiny_model().train()
    dataset = Dataset.from_dict({"input_ids": [list(range(10, 26))] * 16}).with_format("numpy")
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=5, logging_steps=1, save_strategy="no",
                             per_device_train_batch_size=2, use_cpu=True, report_to="none", disable_tqdm=True,
                             remove_unused_columns=False, logging_nan_inf_filter=False)
    set_up_devices(args, runtime_of(1))
    guard = DivergenceGuard()
    trainer = OneInfLoss(model=model, args=args, train_dataset=dataset, data_collator=BlockCollator(),
                         processing_class=AutoTokenizer.from_pretrained(tokenizer_dir),
                         meter=ThroughputCallback(model, seq_length=16), guard=guard)
    trainer.train()
    losses = {entry["step"]: entry["loss"] for entry in trainer.state.log_history if "loss" in entry}
    assert losses[3] == math.inf and all(math.isfinite(losses[step]) for step in (1, 2, 4, 5)), losses
    assert not guard.failed and trainer.state.global_step == 5
