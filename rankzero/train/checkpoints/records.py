"""The data a checkpoint was trained on, recorded in it and compared on resume.

    record = {**data_record(prepared_dir), "batch": batch_layout(training, world_size)}  # run.py: this run's data
    write_data_record(staged_checkpoint, record)        # trainer.py, into every checkpoint before it is renamed
    check_data(checkpoint, record, allow_data_change, report)   # resume.py: the same data, the same batch

`data_fingerprint.json` holds the prepared dir's fingerprint, path, sources and fingerprint inputs, the
run's id and the samples each step took. On resume it is compared with this run's data: the Trainer
finds its place by skipping as many batches as the old run consumed, which on other data is no place
at all. A mismatch stops with both fingerprints and what differs, unless `--allow_data_change`. For the
same reason a resume that would take another number of samples per step (processes × per-device batch ×
accumulation) is an argument error saying how to go on (batch_problem).
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

from rankzero.errors import ConfigError, RankzeroError
from rankzero.files import read_json

DATA_RECORD = "data_fingerprint.json"


def data_record(prepared_dir: str | os.PathLike) -> dict:
    """What identifies this run's prepared data, from its manifest."""
    prepared_dir = Path(prepared_dir)
    manifest = read_json(prepared_dir / "manifest.json") or {}
    return {
        "fingerprint": manifest.get("fingerprint", prepared_dir.name),
        "prepared_dir": str(prepared_dir),
        "sources": [source.get("spec") for source in manifest.get("sources", []) if isinstance(source, dict)],
        "sequences": manifest.get("sequences"),
        "tokens": manifest.get("tokens"),
        "fingerprint_inputs": manifest.get("fingerprint_inputs"),
    }


def write_data_record(checkpoint_dir: str | os.PathLike, record: dict) -> None:
    Path(checkpoint_dir, DATA_RECORD).write_text(json.dumps(record, indent=2, ensure_ascii=False, default=str) + "\n")


def check_data(checkpoint: Path, data: dict, allow_data_change: bool, report: bool) -> None:
    saved = read_json(checkpoint / DATA_RECORD)
    if isinstance(saved, dict) and isinstance(saved.get("batch"), dict) and isinstance(data.get("batch"), dict):
        problem = batch_problem(checkpoint, saved["batch"], data["batch"])
        if problem:
            raise ConfigError([problem])
    if saved is None:
        if report:
            warnings.warn(f"{checkpoint} records no data fingerprint (saved by an older rankzero or another tool): "
                          "cannot check that this run's data is the data it was trained on", stacklevel=3)
        return
    if saved.get("fingerprint") == data["fingerprint"]:
        return
    message = (f"{checkpoint} was trained on other data: data fingerprint {saved.get('fingerprint')} "
               f"({_describe_data(saved)}); this run's is {data['fingerprint']} ({_describe_data(data)})"
               f"{_differences(saved, data)}. The Trainer resumes by skipping the batches the earlier run consumed, "
               "which on other data is no position at all")
    if not allow_data_change:
        raise RankzeroError(f"{message}. Give the same data (same sources, tokenizer, --max_seq_length, --seed, ...), "
                            "or pass --allow_data_change to continue on this data (add --ignore_data_skip to start it "
                            "from its first batch)")
    if report:
        warnings.warn(f"{message}; continuing, as --allow_data_change asks", stacklevel=3)


def _describe_data(record: dict) -> str:
    sources = ", ".join(str(source) for source in record.get("sources") or []) or "sources not recorded"
    return f"{record.get('prepared_dir')}, from {sources}"


def _differences(saved: dict, data: dict) -> str:
    before, now = saved.get("fingerprint_inputs"), data.get("fingerprint_inputs")
    if not isinstance(before, dict) or not isinstance(now, dict):
        return ""
    keys = sorted(key for key in before.keys() | now.keys() if before.get(key) != now.get(key))
    return f"; they differ in {', '.join(keys)}" if keys else ""


def batch_layout(training, world_size: int) -> dict:
    """How many samples one optimizer step takes, and how: recorded with the data, checked on resume."""
    return {"world_size": world_size, "per_device_train_batch_size": training.per_device_train_batch_size,
            "gradient_accumulation_steps": training.gradient_accumulation_steps}


def batch_problem(checkpoint: Path, saved: dict, now: dict) -> str | None:
    """Why a resume from `checkpoint` with the batch layout `now` would not continue at its place in the data.

    The Trainer finds its place by skipping as many batches of this run's DataLoader as the earlier run's steps
    took (steps × accumulation), not samples: with another number of samples per step it lands elsewhere,
    and its schedule is another one. The same samples per step in another layout (2 ranks × 4 → 1 × 8) land
    at the same sample."""
    def samples(layout: dict) -> int | None:
        values = [layout.get(key) for key in ("world_size", "per_device_train_batch_size", "gradient_accumulation_steps")]
        return values[0] * values[1] * values[2] if all(isinstance(v, int) and v > 0 for v in values) else None

    def shown(layout: dict) -> str:
        return (f"{layout['world_size']} process(es) × --per_device_train_batch_size "
                f"{layout['per_device_train_batch_size']} × --gradient_accumulation_steps "
                f"{layout['gradient_accumulation_steps']}")

    before, after = samples(saved), samples(now)
    if before is None or after is None or before == after:
        return None
    return (f"--resume_from_checkpoint {checkpoint}: saved by {shown(saved)} = {before} samples per step; this run "
            f"takes {after} ({shown(now)}), and the Trainer resumes by skipping batches, not samples, so it would "
            f"continue elsewhere in the data. Resume with {before} samples per step, or start a new run from its "
            f"weights (--pretrained_model {checkpoint}; an FSDP checkpoint exported first with "
            "scripts/export_checkpoint.py)")
