"""Divergence: a run whose gradients stop being finite is stopped, said so, and never saved as a model.

    guard = DivergenceGuard()
    trainer = RankzeroTrainer(..., guard=guard)   # hands it each step's gradient norm; it is a callback too
    trainer.train()
    if guard.failed:                               # every rank alike
        raise RankzeroError(guard.message(output_dir, learning_rate))

A step is non-finite when its gradient norm is NaN or inf and the optimizer applied it (fp16's loss scaler
skips such steps on purpose and lowers its scale: those are no divergence). The norm is the one the Trainer
computes for clipping (or, with `--max_grad_norm 0`, for its log): the same on every rank, since the ranks
reduce their gradients first, so every rank counts the same steps and stops at the same one without a
collective of its own. A non-finite loss makes non-finite gradients; a non-finite loss with finite
gradients (an inf from one impossible token) leaves the weights whole and is only logged.

After one non-finite update AdamW's moments, and so the weights, are NaN for good; the guard still waits
for STOP_AFTER_NONFINITE_STEPS in a row before it stops the run, so that the log shows what happened, and
from the first such step on it cancels every save and evaluation: a checkpoint is only ever written at a
finite step, so the newest one before the divergence is the last good one, and the message names it.
Reading the norm costs one host sync per optimizer step, in place of the one per micro-batch that
Hugging Face's `logging_nan_inf_filter` made (that filter is turned off: it replaced a NaN loss by the mean
of the earlier ones, and a diverged run logged a loss falling to 0).
"""

from __future__ import annotations

import math
from pathlib import Path

from transformers import TrainerCallback

# Optimizer steps with a non-finite gradient norm, in a row, after which training stops. One is enough to
# ruin the weights; three let the log show the run staying that way rather than a single odd step.
STOP_AFTER_NONFINITE_STEPS = 3


class DivergenceGuard(TrainerCallback):
    def __init__(self, limit: int = STOP_AFTER_NONFINITE_STEPS):
        assert limit >= 1
        self.limit = limit
        self.grad_norm: float | None = None  # of the step being finished
        self.step_was_skipped = lambda: False  # set by the trainer: fp16's scaler skipped the step
        self.streak = 0  # non-finite steps in a row, up to the current one
        self.first_bad_step: int | None = None  # of the current streak
        self.last_good_step = 0
        self.stopped_at: int | None = None

    @property
    def failed(self) -> bool:
        """The run ended non-finite (stopped by the guard, or out of steps in a non-finite streak)."""
        return self.streak > 0

    def observe_grad_norm(self, grad_norm) -> None:
        self.grad_norm = grad_norm

    def on_train_begin(self, args, state, control, **kwargs):
        self.last_good_step = state.global_step  # a resumed run's checkpoint was finite

    def on_step_end(self, args, state, control, **kwargs):
        norm = self.grad_norm
        value = float(norm.item() if hasattr(norm, "item") else norm) if norm is not None else 0.0
        self.grad_norm = None
        if math.isfinite(value) or self.step_was_skipped():
            self.streak, self.first_bad_step, self.last_good_step = 0, None, state.global_step
            return
        self.streak += 1
        self.first_bad_step = self.first_bad_step or state.global_step
        self._hold(control)
        if self.streak >= self.limit:
            control.should_training_stop = True
            control.should_log = True  # the last non-finite values belong in the history
            self.stopped_at = state.global_step

    def on_epoch_end(self, args, state, control, **kwargs):
        if self.failed:
            self._hold(control)

    @staticmethod
    def _hold(control) -> None:
        control.should_save = False  # never a checkpoint of non-finite weights
        control.should_evaluate = False

    def message(self, output_dir: str | Path, learning_rate: float) -> str:
        """The error a diverged run ends with: what happened, when, and the checkpoint to go back to."""
        from rankzero.train.checkpoints.runs import checkpoints_in

        steps = (f"steps {self.first_bad_step}-{self.first_bad_step + self.streak - 1}" if self.streak > 1
                 else f"step {self.first_bad_step}")
        why = (f"for {self.streak} optimizer steps in a row" if self.stopped_at is not None
               else f"at the last {'steps' if self.streak > 1 else 'step'} of the run")
        good = [path for path in checkpoints_in(output_dir)
                if int(path.name.split("-")[1]) <= self.last_good_step]
        if good:
            back = (f"the last good checkpoint is {good[0]}: start from its weights with --pretrained_model "
                    f"{good[0]} and a lower --learning_rate (this run's: {learning_rate:g}) or --max_grad_norm 1.0")
        else:
            back = (f"no checkpoint was saved before step {self.first_bad_step}: start again with a lower "
                    f"--learning_rate (this run's: {learning_rate:g}) or --max_grad_norm 1.0")
        return (f"training diverged: the gradient norm was not finite (NaN or inf) {why} ({steps}); the weights are "
                f"no longer numbers, so no model was saved and no checkpoint was written from step "
                f"{self.first_bad_step} on; {back}")
