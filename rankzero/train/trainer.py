"""The HF Trainer with our numbers in its logs, whole checkpoints only, and regional torch.compile.

    trainer = RankzeroTrainer(model=…, args=…, train_dataset=…, data_collator=…,
                              meter=ThroughputCallback(…), preemption=PreemptionCallback())

Overrides, each of an extension point of `transformers.Trainer` (5.x):
- `training_step` takes the collator's `num_tokens` out of the batch and hands it to the meter, and raises
  its `data_problem` (an id no tokenizer made: a published shard changed on disk) as one error line;
- `_get_grad_norm` hands each step's gradient norm to the divergence guard (divergence.py), and
  `_maybe_log_save_evaluate` zeroes the loss sum after a log (the Trainer's own reset keeps a NaN);
- `prediction_step` and `evaluation_loop` score each evaluation batch by source and in bits per UTF-8 byte
  (evaluation.py: one pass, the sums gathered as the Trainer gathers its losses), and `evaluate` keeps every
  random stream as it was (an evaluation, the one before the first step included, changes no training step) and
  writes the fixed prompt's sample;
- `log` merges the meter's metrics into each training log, and `eval_perplexity` into each evaluation log,
  *before* the Trainer stores it, so they land in `trainer_state.json`'s log_history and every
  `--report_to` integration (a callback's `on_log` runs after the history is written and cannot add to it);
- `_save_checkpoint` writes `checkpoint-N` under `.checkpoint-staging/` and renames it into the output
  dir once every rank has written its part, so a `checkpoint-N` directory is complete by construction
  and `--resume_from_checkpoint auto` never picks one a kill cut short; each one also records the data
  it was trained on (checkpoints/) and, under FSDP, the config and tokenizer beside the shards; a save that fails on any rank (a full disk: said so, with
  the free space) removes the staged checkpoint and stops every rank with the same error;
- `_build_accelerator_args` and `create_accelerator_and_postprocess` set FSDP2 up (sharding.py): gradients
  reduced in fp32 under bf16, and sharding on CPU too;
- `_load_optimizer_and_scheduler` under FSDP loads the optimizer state of exactly the parameters the checkpoint
  holds one for (checkpoints.sharded.optimizer_as_saved: a checkpoint saved inside --train_new_embeddings_steps);
- `_issue_warnings_after_load` does not warn on a resume that the tied `lm_head.weight` is missing (it is
  never saved);
- `_build_accelerator_args` turns on accelerate's regional compilation when `--torch_compile` is given:
  each decoder layer (and the embedding, norm and head) is compiled on its own and the model's forward
  stays eager. Compiled whole, transformers' packed-sequence detection cannot tell under tracing that
  the default batch holds one document per row, and hands SDPA a 4-D mask with `is_causal=False`
  (no flash kernel, K/V heads repeated for GQA); eager, it returns no mask and SDPA gets
  `attn_mask=None, is_causal=True`. Compiling one layer and reusing it for the others also compiles
  in a fraction of the time. Under FSDP2 accelerate compiles each layer in place (`module.compile()`) before
  `fully_shard`, so FSDP2's hooks run outside the compiled code; checkpointing is transformers' own, inside
  the layer's forward (defaults.fsdp_defaults says why).
The progress bar stays (steps, rate, ETA); its printing of raw log dicts is replaced by the meter's
one line per logging step.
"""

from __future__ import annotations

import math
import os
import shutil

from transformers import PrinterCallback, ProgressCallback, Trainer
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints

from rankzero.data.published import damaged_message
from rankzero.errors import RankzeroError
from rankzero.train.checkpoints.full_disk import (checkpoint_size_text, failures_on_every_rank, free_bytes,
                                                  no_space_message, save_failure)
from rankzero.train.checkpoints.records import write_data_record
from rankzero.train.checkpoints.sharded import gathered_state_dict, optimizer_as_saved, save_model_files
from rankzero.train.divergence import DivergenceGuard
from rankzero.train.evaluation import EvalScores, FixedPromptSample, kept_rng_state
from rankzero.train.preemption import PreemptionCallback
from rankzero.train.sharding import mixed_precision_policy, quiet_checkpoint_logs, shard_on_cpu
from rankzero.train.throughput import ThroughputCallback

STAGING_DIR = ".checkpoint-staging"  # hidden: neither `checkpoint-*` globs nor get_last_checkpoint see it


def perplexity(loss: float) -> float:
    """exp of the mean token loss: inf past ~700 (no longer a float), NaN for a NaN loss (not inf: nothing
    was measured)."""
    return float("inf") if loss >= 700 else round(math.exp(loss), 4)


class QuietProgressCallback(ProgressCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):
        pass  # ThroughputCallback prints the line


class RankzeroTrainer(Trainer):
    def __init__(self, *args, meter: ThroughputCallback, preemption: PreemptionCallback | None = None,
                 data_record: dict | None = None, guard: DivergenceGuard | None = None,
                 scores: EvalScores | None = None, sampler: FixedPromptSample | None = None, **kwargs):
        self._staging = False
        self.scores, self.sampler = scores, sampler
        self.data_record = data_record  # written into every checkpoint (checkpoints/records.py)
        super().__init__(*args, **kwargs)
        self.meter = meter
        self.guard = guard
        # Order matters: callbacks run in the order added. The guard cancels any save asked for at a
        # non-finite step (the preemption callback's too), and the meter must see the saves that remain
        # (it leaves them out of the throughput).
        if preemption is not None:
            self.add_callback(preemption)
        if guard is not None:
            guard.step_was_skipped = lambda: self.accelerator.optimizer_step_was_skipped
            self.add_callback(guard)
        self.add_callback(meter)
        for noisy in (PrinterCallback, ProgressCallback):
            if self.pop_callback(noisy) is not None and noisy is ProgressCallback:
                self.add_callback(QuietProgressCallback)

    def _build_accelerator_args(self, **kwargs):
        args = super()._build_accelerator_args(**kwargs)
        if self.args.torch_compile and args.get("dynamo_plugin") is not None:
            args["dynamo_plugin"].use_regional_compilation = True
        self._fsdp_plugin = args.get("fsdp_plugin")
        if self._fsdp_plugin is not None:
            self._fsdp_plugin.mixed_precision_policy = mixed_precision_policy(self.args)
            self._fsdp_plugin.cpu_ram_efficient_loading = False  # rankzero loads rank 0's weights itself (sharding.py)
        return args

    def create_accelerator_and_postprocess(self):
        super().create_accelerator_and_postprocess()
        if self.args.fsdp and not self.is_fsdp_enabled:  # a CPU run (sharding.py says why), or an error
            shard_on_cpu(self.accelerator, self._fsdp_plugin)
            self.is_fsdp_enabled = True
        if self.is_fsdp_enabled:
            quiet_checkpoint_logs()

    def training_step(self, model, inputs, num_items_in_batch=None):
        self.meter.add_tokens(inputs.pop("num_tokens", 0))
        self._raise_data_problem(inputs)
        return super().training_step(model, inputs, num_items_in_batch)

    def _prepare_inputs(self, inputs):
        inputs = super()._prepare_inputs(inputs)
        inputs.pop("num_tokens", None)  # evaluation batches: the model takes no such argument
        self._raise_data_problem(inputs)
        return inputs

    def evaluate(self, *args, **kwargs):
        with kept_rng_state():
            metrics = super().evaluate(*args, **kwargs)
            if self.sampler is not None and self.is_world_process_zero():
                with self.autocast_smart_context_manager():
                    self.sampler.write(self.accelerator.unwrap_model(self.model), self.state.global_step)
        return metrics

    def evaluation_loop(self, *args, **kwargs):
        if self.scores is not None:
            self.scores.reset()
        output = super().evaluation_loop(*args, **kwargs)
        if self.scores is not None:
            output.metrics.update(self.scores.metrics(kwargs.get("metric_key_prefix", "eval")))
        return output

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        token_sources = inputs.pop("token_sources", None)
        if self.scores is None or inputs.get("labels") is None:
            return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys)
        # Without labels the model computes no loss: the token losses below are computed once, and give it.
        labels = inputs.pop("labels")
        _, logits, _ = super().prediction_step(model, inputs, False, ignore_keys)
        rows = self.scores.row_sums(logits, labels.to(logits.device), token_sources)
        loss = (rows[..., 0].sum() / rows[..., 1].sum().clamp(min=1)).float()  # the model's: mean nats per label
        # Every rank, every batch: gather_for_metrics is a collective, and drops the rows repeated to even out the
        # last batch across ranks, as it does for the losses.
        self.scores.add(self.accelerator.gather_for_metrics(rows))
        return (loss, None, None) if prediction_loss_only else (loss, logits, labels)

    def _raise_data_problem(self, inputs) -> None:
        """The collator's report of a batch no tokenizer could have made (collator.py), raised on this process."""
        problem = inputs.pop("data_problem", None)
        if problem:
            prepared_dir = (self.data_record or {}).get("prepared_dir", "the prepared dataset")
            raise RankzeroError(damaged_message(prepared_dir, problem))

    def _get_grad_norm(self, model, grad_norm=None):
        grad_norm = super()._get_grad_norm(model, grad_norm)
        if self.guard is not None:
            self.guard.observe_grad_norm(grad_norm)
        return grad_norm

    def _maybe_log_save_evaluate(self, tr_loss, *args, **kwargs):
        super()._maybe_log_save_evaluate(tr_loss, *args, **kwargs)
        if self._globalstep_last_logged == self.state.global_step:
            # Logged: the Trainer resets the sum with `tr_loss -= tr_loss`, which leaves NaN after an inf
            # (inf - inf) and would log every later, finite loss as NaN.
            tr_loss.zero_()

    def log(self, logs, start_time=None):
        if "loss" in logs and "train_runtime" not in logs:  # a training log, reached on every rank
            logs.update(self.meter.metrics(self.args))
        if "eval_loss" in logs:  # eval_*: TensorBoard and the other reporters file it under eval/, not train/
            logs["eval_perplexity"] = perplexity(logs["eval_loss"])
        super().log(logs, start_time)

    def _issue_warnings_after_load(self, load_result) -> None:
        # transformers 5 forgives missing keys only when they are `_keys_to_ignore_on_save`, so every resume of a
        # model with tied embeddings warned that `lm_head.weight` was missing: the tied copy is never saved.
        tied = set(getattr(self.accelerator.unwrap_model(self.model), "all_tied_weights_keys", None) or ())
        if load_result.missing_keys and set(load_result.missing_keys) <= tied:
            self.model.tie_weights()
            load_result = load_result._replace(missing_keys=[])
        super()._issue_warnings_after_load(load_result)

    def _get_output_dir(self, trial) -> str:
        run_dir = super()._get_output_dir(trial)
        return os.path.join(run_dir, STAGING_DIR) if self._staging else run_dir

    def _save_checkpoint(self, model, trial) -> None:
        run_dir = super()._get_output_dir(trial)
        name = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        staged, final = os.path.join(run_dir, STAGING_DIR, name), os.path.join(run_dir, name)
        if self.args.should_save:
            shutil.rmtree(staged, ignore_errors=True)  # left by a save that was killed
        free = free_bytes(run_dir)
        self.accelerator.wait_for_everyone()
        self._staging = True
        error = None
        try:
            super()._save_checkpoint(model, trial)  # every rank writes its part (RNG state, shards) into `staged`
            if self.args.should_save and self.data_record is not None:
                write_data_record(staged, self.data_record)
            if self.args.should_save and self.is_fsdp_enabled:
                save_model_files(staged, self.model, self.processing_class)
        except BaseException as caught:  # told to every rank below, so that none waits for it in a barrier
            if not save_failure(caught):  # Ctrl-C, SystemExit
                raise
            error = caught
        finally:
            self._staging = False
        failures = failures_on_every_rank(error, run_dir)  # also the barrier: every rank has written its part
        if failures:
            if self.args.should_save:
                shutil.rmtree(os.path.join(run_dir, STAGING_DIR), ignore_errors=True)
            raise self._save_error(failures, error, run_dir, name, free)
        if self.args.should_save:
            if os.path.isdir(final):  # the same step saved again (a restart from scratch over an old run)
                shutil.rmtree(final)
            os.replace(staged, final)
            shutil.rmtree(os.path.join(run_dir, STAGING_DIR), ignore_errors=True)
            if self.state.best_model_checkpoint == staged:
                self.state.best_model_checkpoint = final
            rotate_checkpoints(output_dir=run_dir, save_total_limit=self.args.save_total_limit,
                               best_model_checkpoint=self.state.best_model_checkpoint, use_mtime=True)
        self.accelerator.wait_for_everyone()

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        if checkpoint is None or not self.is_fsdp_enabled:
            return super()._load_optimizer_and_scheduler(checkpoint)
        with optimizer_as_saved(self.model, self.optimizer, checkpoint):  # saved inside the new-embeddings steps
            super()._load_optimizer_and_scheduler(checkpoint)

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        if self.is_fsdp_enabled and not _internal_call:
            # The finished model as one plain HF dir: the Trainer writes nothing for a sharded state dict, and a
            # checkpoint's own save (_internal_call) keeps its DCP shards (checkpoints/sharded.py).
            state_dict = gathered_state_dict(self.model)  # every rank takes part; rank 0 gets the weights
            if self.args.should_save:
                self._save(output_dir or self.args.output_dir, state_dict=state_dict)
            return
        super().save_model(output_dir, _internal_call)

    def _save_error(self, failures, error, run_dir: str, name: str, free: int | None) -> BaseException:
        if any(full for _, full, _ in failures):
            return RankzeroError(no_space_message(run_dir, name, free, checkpoint_size_text(run_dir, self.model),
                                                  "the partial checkpoint was removed"))
        if error is not None:
            return error
        rank, _, what = failures[0]
        return RankzeroError(f"rank {rank} failed while saving {name} in {run_dir} ({what}); the partial checkpoint "
                             "was removed")
