"""Training on prepared data with the Hugging Face Trainer.

run.py            train(args, runtime, prepared_dir): the story, top to bottom
training_args.py  TrainingArguments with deferred device set-up; fast defaults where no flag was given
model.py          model from a config JSON or a checkpoint; tokenizer/model vocabulary check
collator.py       packed blocks, per-document positions, per-batch padding
throughput.py     tokens/s, MFU, peak memory into the Trainer's logs; the rank-0 log line
trainer.py        Trainer subclass: token counting and metrics merged into logs
"""
