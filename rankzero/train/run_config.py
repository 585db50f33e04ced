"""The run's resolved configuration: how it computes, recorded in run_config.json and recipe.yaml, and printed.

    setup = describe_setup(trainer, attention, documents)     # attention, data parallelism, compile
    config = resolved_config(args, training, runtime, defaults, notes, prepared_dir, model, setup, run_id)
    write_run_files(output_dir, config, args, training)       # run_config.json, recipe.yaml (rank 0)
    print_config(config, defaults)

Called by run.py on rank 0 once the Trainer exists (accelerate has set the devices up by then).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch

from rankzero.config import CONFIGS, Args


def describe_setup(trainer, attention: str, documents: bool) -> dict[str, str]:
    """How this run computes, as accelerate set it up: attention backend and its cost, data parallelism, compile."""
    from accelerate.utils import DistributedType

    from rankzero.train.model import attention_cost

    from rankzero.train.sharding import describe_sharding

    accelerator = trainer.accelerator
    kind, processes = accelerator.distributed_type, accelerator.num_processes
    if trainer.args.fsdp and kind != DistributedType.FSDP:  # sharding.shard_on_cpu refuses this earlier
        raise AssertionError(f"--fsdp requested, accelerate set up {kind.value}")
    # accelerate wraps in DDP on CPU whenever it runs distributed (even alone), on GPUs with 2+ processes.
    if kind == DistributedType.FSDP:
        parallel = describe_sharding(accelerator, bool(trainer.args.activation_checkpointing))
    elif kind == DistributedType.MULTI_CPU or (accelerator.use_distributed and kind.value.startswith("MULTI_")):
        handler = accelerator.ddp_handler
        unused = handler.find_unused_parameters if handler is not None else False
        parallel = f"DDP over {processes} process(es), find_unused_parameters={unused}"
    elif kind == DistributedType.DEEPSPEED:
        parallel = f"DeepSpeed ZeRO-{accelerator.state.deepspeed_plugin.zero_stage} over {processes} process(es)"
    elif kind == DistributedType.NO or processes == 1:
        parallel = "one process, no DDP"
    else:
        parallel = f"{kind.value} over {processes} processes"
    args = trainer.args
    order = ", each checkpointed inside, then sharded by FSDP2" if kind == DistributedType.FSDP and \
        args.activation_checkpointing else ", then sharded by FSDP2" if kind == DistributedType.FSDP else ""
    compiled = f"per layer (regional){order}, backend {args.torch_compile_backend}" if args.torch_compile else "off"
    return {"attn_implementation": attention, "attention": attention_cost(attention, documents),
            "data_parallel": parallel, "torch_compile": compiled}


def resolved_config(args, training, runtime, defaults, notes, prepared_dir, model, setup, run_id) -> dict:
    import transformers

    from rankzero.train.throughput import full_numel

    return {
        "run_id": run_id,
        "given": sorted(args.given),
        "training_given": args.training_given,  # the Trainer's flags as given; "training" holds them processed
        "defaults_applied": defaults,
        "recipe_replayed": args.replayed,  # which keys of the recipe applied and which were left out (recipe.replay)
        "warnings": notes,
        "prepared_dir": str(prepared_dir),
        **setup,
        "model_parameters": sum(full_numel(p) for p in model.parameters()),
        "model_config": model.config.to_dict(),
        **{group: dataclasses.asdict(getattr(args, group)) for group in CONFIGS},
        "seed": args.seed,
        "training": training.to_dict(),
        "runtime": dataclasses.asdict(runtime),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
    }


def write_run_files(output_dir: Path, config: dict, args: Args, training) -> None:
    from rankzero.recipe import effective_recipe, write_recipe
    from rankzero.train.checkpoints.runs import keep_earlier_run_files, move_earlier_run

    output_dir.mkdir(parents=True, exist_ok=True)
    if args.overwrite_output_dir and not training.resume_from_checkpoint:
        moved = move_earlier_run(output_dir)  # checks.py let a run from scratch in only with this flag
        if moved is not None:
            print(f"--overwrite_output_dir: the earlier run in {output_dir} moved to {moved}", flush=True)
    keep_earlier_run_files(output_dir)  # the earlier run's record of its data and settings, into run_history/
    (output_dir / "run_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False, default=str) + "\n")
    # The effective run, replayable from anywhere: `train.py recipe.yaml --resume_from_checkpoint auto`.
    write_recipe(output_dir / "recipe.yaml", effective_recipe(args, training))


# The optimizer and schedule a run trains with, printed whoever set them (the user, a recipe, our defaults or
# Hugging Face's): what a continued run inherits or not is the first thing to check.
ALWAYS_PRINTED = ("learning_rate", "lr_scheduler_type", "lr_scheduler_kwargs", "warmup_steps", "weight_decay",
                  "adam_beta1", "adam_beta2")


def print_config(config: dict, defaults: dict[str, str]) -> None:
    from rankzero.train.training_args import TrainingArguments

    lines = ["resolved configuration:"]
    for section, cls in (*CONFIGS.items(), ("training", TrainingArguments)):
        for f in dataclasses.fields(cls):
            value = config[section].get(f.name)
            if section == "training" and f.name not in config["given"] and f.name not in defaults \
                    and f.name not in ALWAYS_PRINTED:
                continue  # Hugging Face's own default: see run_config.json for all of them
            mark = "  (default: " + defaults[f.name] + ")" if f.name in defaults else ""
            if section == "training" and not mark and f.name not in config["given"]:
                mark = "  (Hugging Face's default)"
            lines.append(f"  {section}.{f.name} = {value!r}{mark}")
    lines.append(f"  attn_implementation = {config['attn_implementation']}  ({config['attention']})")
    lines.append(f"  data_parallel = {config['data_parallel']}")
    lines.append(f"  torch_compile = {config['torch_compile']}")
    if "vocabulary" in config:
        lines.append(f"  vocabulary = {config['vocabulary']}")
    lines.append(f"  model_parameters = {config['model_parameters']:,}")
    print("\n".join(lines), flush=True)
