"""Checkpoints for resume: each one verified before it is trusted, tied to the data and the run that wrote it,
FSDP's DCP shards read and exported, and a full disk during a save reported as one."""
