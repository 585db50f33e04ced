"""The HF Trainer with our numbers in its logs and one quiet progress bar.

    trainer = RankzeroTrainer(model=…, args=…, train_dataset=…, data_collator=…, meter=ThroughputCallback(…))

Two small overrides, both documented extension points of `transformers.Trainer`:
- `training_step` takes the collator's `num_tokens` out of the batch and hands it to the meter;
- `log` merges the meter's metrics into each training log *before* the Trainer stores it, so they
  land in `trainer_state.json`'s log_history and every `--report_to` integration (a callback's
  `on_log` runs after the history is written and cannot add to it).
The progress bar stays (steps, rate, ETA); its printing of raw log dicts is replaced by the meter's
one line per logging step.
"""

from __future__ import annotations

from transformers import PrinterCallback, ProgressCallback, Trainer

from rankzero.train.throughput import ThroughputCallback


class QuietProgressCallback(ProgressCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):
        pass  # ThroughputCallback prints the line


class RankzeroTrainer(Trainer):
    def __init__(self, *args, meter: ThroughputCallback, **kwargs):
        super().__init__(*args, **kwargs)
        self.meter = meter
        self.add_callback(meter)
        for noisy in (PrinterCallback, ProgressCallback):
            if self.pop_callback(noisy) is not None and noisy is ProgressCallback:
                self.add_callback(QuietProgressCallback)

    def training_step(self, model, inputs, num_items_in_batch=None):
        self.meter.add_tokens(inputs.pop("num_tokens", 0))
        return super().training_step(model, inputs, num_items_in_batch)

    def _prepare_inputs(self, inputs):
        inputs = super()._prepare_inputs(inputs)
        inputs.pop("num_tokens", None)  # evaluation batches: the model takes no such argument
        return inputs

    def log(self, logs, start_time=None):
        if "loss" in logs and "train_runtime" not in logs:  # a training log, reached on every rank
            logs.update(self.meter.metrics(self.args))
        super().log(logs, start_time)
