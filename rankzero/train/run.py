"""Train on a prepared dataset: tokenizer → dataset → defaults and devices → model → Trainer → saved model.

    from rankzero.train.run import train
    train(args, runtime, prepared_dir)     # called by train.py once the data is ready on every rank

Called with no process group: `set_up_devices` creates it (gloo on CPU, NCCL on GPUs) once every
rank holds the prepared data. The output dir ends up with the model, tokenizer and config
(`AutoModelForCausalLM` / `AutoTokenizer` load it), `trainer_state.json`, `run_config.json` (the
resolved configuration and the run's id), `recipe.yaml` (the effective run, rankzero/recipe.py: replayed by
pretrain_cont.sh)
and `data_manifest.json` (the prepared data's manifest), with the prepare's `*_samples.jsonl` (what its quality
filter, dedup and PII masking did) and, with held-out data, `eval_samples.jsonl` (evaluation.py).

A run whose gradients stop being finite (divergence.py) stops, saves no model and ends with an error
naming its last good checkpoint. SIGTERM or SIGUSR1 during training (preemption.py): all ranks finish the same step, save
`checkpoint-<step>`, print how to resume and return normally; no final model is written, since the
run is not finished. `--resume_from_checkpoint auto` continues from the newest intact checkpoint, once
checkpoints/ has checked it and the data it was trained on; every checkpoint records that data, and
an earlier run's run_config.json and recipe.yaml are kept in run_history/.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import logging
import os
import shutil
import time
import warnings
from pathlib import Path

import torch

from rankzero.config import Args
from rankzero.errors import ConfigError, RankzeroError
from rankzero.runtime import Runtime

logger = logging.getLogger(__name__)


def train(args: Args, runtime: Runtime, prepared_dir: Path) -> None:
    from transformers import AutoTokenizer, set_seed
    from transformers.utils import logging as hf_logging

    from rankzero.train.benchmark_callback import benchmark_scorer
    from rankzero.train.checkpoints.records import batch_layout, data_record
    from rankzero.train.checkpoints.resume import resolve_resume
    from rankzero.train.checkpoints.runs import new_run_id, run_id_of
    from rankzero.train.collator import BlockCollator
    from rankzero.train.defaults import BEFORE_MODEL, WITH_MODEL, Facts, resolve
    from rankzero.train.divergence import DivergenceGuard
    from rankzero.train.evaluation import evaluation_parts
    from rankzero.train.losses import resolve_lm_loss, use_lm_loss
    from rankzero.train.model import build_model, resolve_attention
    from rankzero.train.preemption import PreemptionCallback
    from rankzero.train.recompute import use_checkpointing, use_float8
    from rankzero.train.report import CurvesCallback, summary
    from rankzero.train.run_config import describe_setup, print_config, resolved_config, write_run_files
    from rankzero.train.sharding import RankZeroWeights, rank_zero_loads, zero3
    from rankzero.train.throughput import ThroughputCallback, full_numel
    from rankzero.train.trainer import RankzeroTrainer
    from rankzero.train.training_args import set_up_devices
    from rankzero.train.vocabulary import NewEmbeddingsFirst, new_embeddings_problems, new_rows_start

    # DataLoader workers are forked from here; if this rank prepared the data, the Rust tokenizer pool
    # has run and tokenizers would disable it in every child with a warning. Nothing tokenizes there.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    hf_logging.disable_progress_bar()  # a bar per shard at every checkpoint save; the Trainer's own bar stays
    prepared_dir = Path(prepared_dir)
    tokenizer = AutoTokenizer.from_pretrained(args.stage.tokenizer_path)
    if args.stage.mode == "sft":
        use_chat_rendering(tokenizer, runtime)
    dataset = load_prepared(prepared_dir, args.stage.mode)
    eval_dataset = load_validation(prepared_dir, args.stage.mode)
    # The samples each step takes, recorded with the data: a resume must take as many (checkpoints/records.py).
    data = {**data_record(prepared_dir), "batch": batch_layout(args.training, runtime.world_size)}
    # Before the model is built: a damaged checkpoint, other data or another batch stops the run at once.
    resume = resolve_resume(args.training.resume_from_checkpoint, args.training.output_dir, data,
                            args.model.allow_data_change, report=runtime.is_main, max_steps=args.training.max_steps)
    if resume and runtime.is_main:
        step = json.loads((Path(resume) / "trainer_state.json").read_text(encoding="utf-8"))["global_step"]
        print(f"resuming from {resume} (step {step})", flush=True)  # `auto` chose it: say which
    # A resume continues the dir's run; a start from scratch is a new one (only rank 0's id is ever written).
    run_id = (resume and run_id_of(args.training.output_dir)) or new_run_id()
    data = {**data, "run_id": run_id}  # into every checkpoint: `auto` takes only this run's

    set_seed(args.training.seed)  # the Trainer seeds too, but only after the model exists: seed its init
    # Under FSDP only rank 0 reads the weights, the others get their shards from it; a resume reads every rank's
    # shards from the checkpoint (sharding.py).
    rank_zero = rank_zero_loads(args.training, runtime)
    sharded = bool(args.training.fsdp) or zero3(args.training)
    empty = rank_zero and (runtime.rank > 0 or resume is not None)
    facts = Facts(given=args.given, runtime=runtime)
    training, defaults, more_notes = resolve(args.training, facts, BEFORE_MODEL)
    # Devices and the process group, now that every rank holds the data; before the model, which ZeRO-3 partitions
    # over the group as it is built (deepspeed.zero.Init). The copies the later defaults make keep the set-up.
    set_up_devices(training, runtime)
    documents = args.model.mask_across_documents and args.packing.packing
    attention, notes = resolve_attention(args.model.attn_implementation, chosen="attn_implementation" in args.given,
                                         mask_across_documents=documents)
    model, extension = build_model(args.model, tokenizer, sample_max_token_id(dataset), attention, checkpoint=resume,
                                   load_weights=not empty)
    first_new_row = new_rows_start(args.model, tokenizer, extension, resume)
    data = {**data, "new_rows_from": first_new_row}  # where a resume finds the new rows again (vocabulary.py)
    epoch_steps = steps_per_epoch(dataset, training, runtime)
    new_rows_first = None
    if first_new_row is not None:  # a run of --num_train_epochs has a length only now, with the data
        problems = new_embeddings_problems(args.model.train_new_embeddings_steps, training, epoch_steps)
        if problems:
            raise ConfigError(problems)
        if args.model.train_new_embeddings_steps:
            new_rows_first = NewEmbeddingsFirst(model, first_new_row, args.model.train_new_embeddings_steps)
    # What the backward recomputes (before FSDP's defaults, which read --gradient_checkpointing) and float8.
    training = use_checkpointing(args.model.activation_checkpointing, training, model)
    float8_scales = use_float8(model, training) if args.model.float8 else None
    facts = dataclasses.replace(facts, model=model, parameters=sum(full_numel(p) for p in model.parameters()),
                                from_scratch=not args.model.pretrained_model, has_eval=eval_dataset is not None,
                                resuming=resume is not None, steps_per_epoch=epoch_steps)
    training, later, later_notes = resolve(training, facts, WITH_MODEL)
    training, lm_loss, loss_reason = resolve_lm_loss(args.model.lm_loss, model, training)
    use_lm_loss(model, lm_loss, compile=training.torch_compile)
    # ours (checks.py: data_defaults) with the Trainer's, printed together
    defaults = {**args.defaults, **defaults, **later,
                **({"lm_loss": loss_reason} if args.model.lm_loss == "auto" else {})}
    scores, sampler, eval_notes = evaluation_parts(tokenizer, eval_dataset, prepared_dir, training, sharded=sharded)
    notes += more_notes + later_notes + eval_notes
    if args.model.mask_across_documents and not args.packing.packing:
        notes.append("--mask_across_documents is ignored: without packing every row holds one document")
    if args.model.train_new_embeddings_steps and first_new_row is None:
        notes.append(f"--train_new_embeddings_steps {args.model.train_new_embeddings_steps} is ignored: the tokenizer "
                     f"has no token that --pretrained_model {args.model.pretrained_model} lacks")
    for note in notes:
        warnings.warn(note, stacklevel=1)

    collator = BlockCollator(
        pad_token_id=pad_id(tokenizer),
        mask_across_documents=documents,
        flatten=attention == "flash_attention_2",
        pad_to_multiple_of=args.model.pad_to_multiple_of,
        vocab_size=len(tokenizer),
    )
    meter = ThroughputCallback(model, seq_length=args.packing.max_seq_length)  # counts parameters before any wrapping
    preemption = PreemptionCallback()
    guard = DivergenceGuard()
    trainer = RankzeroTrainer(
        model=model,
        args=training,
        train_dataset=dataset,
        eval_dataset=eval_dataset,
        data_collator=collator,
        processing_class=tokenizer,
        meter=meter,
        preemption=preemption,
        data_record=data,
        guard=guard,
        scores=scores,
        sampler=sampler,
    )
    output_dir = Path(training.output_dir)
    trainer.add_callback(CurvesCallback(output_dir))
    if rank_zero and resume is None:  # a resume reads each shard from the checkpoint
        trainer.add_callback(RankZeroWeights(model, runtime))
    if float8_scales is not None:
        trainer.add_callback(float8_scales)
    if new_rows_first is not None:
        trainer.add_callback(new_rows_first)
    scorer = benchmark_scorer(trainer, args)  # after RankZeroWeights: scored with the weights in place
    if trainer.is_world_process_zero():
        setup = describe_setup(trainer, attention, documents)
        if extension is not None:
            setup["vocabulary"] = extension.describe(f"--pretrained_model {args.model.pretrained_model}")
        config = resolved_config(args, training, runtime, defaults, notes, prepared_dir, model, setup, run_id)
        write_run_files(output_dir, config, args, training)
        copy_data_samples(prepared_dir, output_dir)
        print_config(config, defaults)
    try:
        # Installed before train() forks the DataLoader workers, so they inherit it (preemption.py says why).
        with preemption.handling_signals():
            started = time.perf_counter()
            trainer.train(resume_from_checkpoint=resume)
            finished = preemption.stopped_at is None and not guard.failed  # a diverged model is not saved
            if finished:
                evaluate_at_end(trainer)
                if scorer is not None:
                    scorer.at_end()
                save_final(trainer, model, output_dir, prepared_dir)
            elif guard.failed:
                trainer.save_state()  # trainer_state.json: the log history, NaN included, without the weights
            elif trainer.is_world_process_zero():
                print(resume_hint(preemption, trainer, output_dir), flush=True)
            tokens = meter.tokens_trained(training)  # a collective: every rank
            if trainer.is_world_process_zero():
                CurvesCallback(output_dir).on_train_end(training, trainer.state, None)  # with the last evaluation
                print(summary(trainer.state.log_history, output_dir=output_dir, wall_s=time.perf_counter() - started,
                              tokens=tokens, steps=trainer.state.global_step, saved=finished,
                              tensorboard="tensorboard" in training.report_to, tokens_before=meter.tokens_at_start,
                              steps_before=meter.step_at_start, diverged=guard.failed,
                              stopped_at=None if preemption.stopped_at is None else
                              output_dir / f"checkpoint-{preemption.stopped_at}"),
                      flush=True)
        trainer.accelerator.wait_for_everyone()  # gloo's queue is empty before anything is torn down
        if guard.failed:  # every rank alike: the gradient norm it judged is the same on all of them
            raise RankzeroError(guard.message(output_dir, training.learning_rate))
    finally:
        # Free DDP's Reducer while the process group is still registered, so freeing it only drops a
        # reference. Otherwise the group dies inside the Reducer's dealloc, which holds the GIL while it
        # joins gloo's threads, and a thread still releasing a collective's tensors needs the GIL: deadlock.
        trainer = model = None
        gc.collect()
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def use_chat_rendering(tokenizer, runtime: Runtime) -> None:
    """Say how the SFT samples were rendered, and make it the saved tokenizer's chat template: the model is
    then prompted as it was trained (apply_chat_template, scripts/generate.py --chat)."""
    from rankzero.data.inputs.records import PLAIN_CHAT_TEMPLATE, chat_rendering

    if runtime.is_main:
        print(f"chat rendering: {chat_rendering(tokenizer.chat_template)}"
              + ("" if tokenizer.chat_template else "; saved as the model's tokenizer's chat_template"), flush=True)
    if not tokenizer.chat_template:
        tokenizer.chat_template = PLAIN_CHAT_TEMPLATE


def evaluate_at_end(trainer) -> None:
    """The last evaluation, unless the Trainer has just run one at the final step (every rank)."""
    if trainer.eval_dataset is None:
        return
    evaluated = [entry["step"] for entry in trainer.state.log_history if "eval_loss" in entry]
    if not evaluated or evaluated[-1] != trainer.state.global_step:
        trainer.evaluate()


def save_final(trainer, model, output_dir: Path, prepared_dir: Path) -> None:
    from rankzero.train.checkpoints.full_disk import full_disk_reported

    model.config.use_cache = True  # off while training (see model.py); generation wants it
    with full_disk_reported(output_dir, "the final model", "its files there are incomplete; the newest checkpoint "
                            "is whole, and --resume_from_checkpoint auto saves the model again from it"):
        trainer.save_model(str(output_dir))
        trainer.save_state()
    if trainer.is_world_process_zero():
        manifest = prepared_dir / "manifest.json"
        if manifest.is_file():
            shutil.copyfile(manifest, output_dir / "data_manifest.json")
        print(f"model saved: {output_dir}", flush=True)


def copy_data_samples(prepared_dir: Path, output_dir: Path) -> None:
    """What the prepare shows of its decisions (quality_samples.jsonl, dedup_samples.jsonl, pii_samples.jsonl: the
    documents each rule dropped or masked) beside the run, whose cache dir may be shared, cleaned or elsewhere."""
    for path in sorted(prepared_dir.glob("*_samples.jsonl")):
        shutil.copyfile(path, output_dir / path.name)


def resume_hint(preemption, trainer, output_dir: Path) -> str:
    """The line a preempted run prints. Under torchrun (pretrain.sh, pretrain_cont.sh — which makes a new dir
    unless RESUME=1 — or the user's own) the launcher's resume; ranks a scheduler started themselves are
    resumed by the same command plus the flag."""
    from rankzero.train.report import launcher_path

    cause = preemption.received or "a signal on another rank"
    step = preemption.stopped_at
    launcher = (f"RESUME=1 {launcher_path('pretrain_cont.sh')} {output_dir} (its recipe.yaml with "
                "--resume_from_checkpoint auto)")
    how = launcher if "TORCHELASTIC_RUN_ID" in os.environ else \
        f"the same command plus --resume_from_checkpoint auto, or {launcher}"
    return (f"preempted by {cause}: every rank finished step {step}/{trainer.state.max_steps} and saved "
            f"{output_dir / f'checkpoint-{step}'}. Resume: {how}")


def load_prepared(prepared_dir: Path, mode: str):
    import datasets

    from rankzero.data.published import check_loaded_rows, load_published

    dataset = load_published(prepared_dir, prepared_dir)
    if isinstance(dataset, datasets.DatasetDict):
        dataset = dataset["train"]
    check_loaded_rows(prepared_dir, len(dataset))
    columns = ["input_ids"] + [c for c in ("document_lengths", "labels") if c in dataset.column_names]
    if "input_ids" not in dataset.column_names:
        raise ValueError(f"{prepared_dir}: no input_ids column (columns: {dataset.column_names}); re-prepare the data")
    if mode == "sft" and "labels" not in dataset.column_names:
        raise ValueError(f"{prepared_dir}: --mode sft needs a labels column; prepare the data with --mode sft")
    if len(dataset) == 0:
        raise ValueError(f"{prepared_dir}: the prepared dataset is empty — check --dataset and the quality filter")
    return dataset.with_format("numpy", columns=columns)  # numpy rows: no per-token Python objects


def load_validation(prepared_dir: Path, mode: str):
    """The validation split prepared with the data (--validation_split_percentage, --eval_dataset), or None."""
    from rankzero.data.published import check_loaded_rows, load_published, validation_dir

    directory = validation_dir(prepared_dir)
    if directory is None:
        return None
    dataset = load_published(directory, prepared_dir)
    check_loaded_rows(prepared_dir, len(dataset), validation=True)
    if len(dataset) == 0:
        raise ValueError(f"{directory}: the validation split holds no full row: raise --validation_split_percentage, "
                         "or give a larger --eval_dataset")
    columns = ["input_ids"] + [c for c in ("document_lengths", "labels", "document_sources")
                               if c in dataset.column_names]
    return dataset.with_format("numpy", columns=columns)


def steps_per_epoch(dataset, training, runtime: Runtime) -> int:
    """Optimizer steps in one pass over the data, as the Trainer counts them (each rank its share of the rows)."""
    import math

    batches = math.ceil(math.ceil(len(dataset) / max(1, runtime.world_size)) / training.per_device_train_batch_size)
    return max(1, batches // training.gradient_accumulation_steps)


def sample_max_token_id(dataset, rows: int = 1000) -> int:
    """Largest id in the first rows: a cheap guard against data prepared with another tokenizer."""
    import pyarrow.compute as pc

    table = dataset.with_format(None).data.table.slice(0, rows)
    return int(pc.max(pc.list_flatten(table.column("input_ids"))).as_py())


def pad_id(tokenizer) -> int:
    for token_id in (tokenizer.pad_token_id, tokenizer.eos_token_id):
        if token_id is not None:
            return token_id
    return 0  # padding carries label -100 and attention mask 0: the id never matters
