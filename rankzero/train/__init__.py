"""Training on prepared data with the Hugging Face Trainer.

run.py            train(args, runtime, prepared_dir): the story, top to bottom
training_args.py  TrainingArguments with deferred device set-up, set up once (the process group, DeepSpeed's comm)
defaults.py       every default rankzero chooses where no flag was given, with its reason: one table of rows
model.py          model from a config JSON or a checkpoint; attention backend and its cost; vocabulary check
collator.py       packed blocks, per-document positions or one flattened row, per-batch padding
throughput.py     tokens/s, MFU, peak memory into the Trainer's logs; the rank-0 log line
preemption.py     SIGTERM/SIGUSR1: all ranks agree on a step, save it and stop
trainer.py        Trainer subclass: token counting, metrics in logs, whole checkpoints, regional compile
checkpoints/      resume: checkpoints verified, the data and run in each, DCP shards, a full disk on save
output_dir.py     the output dir: writable before the prepare, one job at a time (flock), run history
run_config.py     the resolved configuration: run_config.json, recipe.yaml, the printed configuration
"""
