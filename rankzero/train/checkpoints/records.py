"""The JSON records of a checkpoint a resume acts on, checked before it is trusted, and which of a dir's
checkpoints a resume may take (resume.py and output_dir.py call these; they import neither).

    problems = trainer_state_problems(checkpoint / "trainer_state.json")   # [] when the Trainer can resume from it
    problems = data_record_problems(checkpoint / "data_fingerprint.json")  # [] when it names the data
    problems = torch_file_problems(checkpoint / "optimizer.pt")             # [] when the torch.save zip is whole
    checkpoints_in(output_dir)                                              # checkpoint-N dirs, newest first
    not_resumable(checkpoint, run_id, max_steps)                            # None, or why `auto` must skip it
    write_data_record(staged, record); check_data(checkpoint, record, ...)  # the data (and batch) it trained on

A record that parses but holds the wrong types is as damaged as a cut file: transformers builds its
`TrainerState` from trainer_state.json as it is (`TrainerState(**json)`) and does arithmetic with its
counters, so a hand-edited `"global_step": "ten"` would fail deep inside the Trainer with a TypeError
instead of naming the file; a data record that cannot be read would let a resume go on with data
nobody checked.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import warnings
import zipfile
from pathlib import Path

from rankzero.errors import ConfigError, RankzeroError
from rankzero.files import read_json, read_json_or_problem

CHECKPOINT = re.compile(r"checkpoint-(\d+)")
DATA_RECORD = "data_fingerprint.json"

# The counters the Trainer does arithmetic with on resume, and the numbers it formats.
# (logging/eval/save_steps are stored as given: 1.0 is as valid as 1.)
STATE_COUNTS = ("global_step", "max_steps", "num_train_epochs", "num_input_tokens_seen")
STATE_NUMBERS = ("epoch", "total_flos", "logging_steps", "eval_steps", "save_steps")


def trainer_state_problems(path: Path) -> list[str]:
    """trainer_state.json parses as an object whose fields have the types the Trainer assumes."""
    from transformers.trainer_callback import TrainerState

    state, problem = read_json_or_problem(path)
    if state is None:
        return [f"{path.name} does not parse ({problem}): cut short or overwritten"]
    if "global_step" not in state:
        return [f"{path.name} has no 'global_step'"]
    known = {field.name for field in dataclasses.fields(TrainerState)}
    problems = [f"unknown field {name!r} (transformers' TrainerState has none)" for name in sorted(set(state) - known)]
    for name in STATE_COUNTS:
        value = state.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            problems.append(f"{name} is {_shown(value)}, not a count (a whole number, 0 or more)")
    for name in STATE_NUMBERS:
        value = state.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            problems.append(f"{name} is {_shown(value)}, not a number")
    history = state.get("log_history", [])
    if not isinstance(history, list) or not all(isinstance(entry, dict) for entry in history):
        problems.append("log_history is not a list of objects")
    callbacks = state.get("stateful_callbacks") or {}
    if not isinstance(callbacks, dict) or not all(isinstance(entry, (dict, list)) for entry in callbacks.values()):
        problems.append("stateful_callbacks is not an object of callback states")
    return [f"{path.name}: {problem} (edited by hand?)" for problem in problems]


def data_record_problems(path: Path) -> list[str]:
    """The record of the data the checkpoint was trained on reads and names a fingerprint."""
    record, problem = read_json_or_problem(path)
    if record is None:
        return [f"{path.name} is {problem}: the record of the data this checkpoint was trained on is damaged"]
    if not isinstance(record.get("fingerprint"), str) or not record["fingerprint"]:
        return [f"{path.name} names no data fingerprint: the record of the data this checkpoint was trained on "
                "is damaged"]
    return []


def _shown(value) -> str:
    return json.dumps(value, ensure_ascii=False)[:40]


def torch_file_problems(path: Path) -> list[str]:
    """A torch.save zip: its central directory (at the very end) reads, and every member lies inside the file."""
    size = path.stat().st_size
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except zipfile.BadZipFile:
        return [f"{path.name} ({size:,} bytes) is cut short: no zip directory at its end (or torch's legacy "
                "non-zip format, which rankzero does not write)"]
    except OSError as error:
        return [f"{path.name} cannot be read ({error.strerror})"]
    if not any(member.filename.endswith("data.pkl") for member in members):
        return [f"{path.name} is a zip archive but not a torch.save file (no data.pkl)"]
    for member in members:  # the directory follows the data: every member must end before the file does
        if member.header_offset + member.compress_size > size:
            return [f"{path.name}: {member.filename} runs past the end of the file (cut short)"]
    return []


# ---------------------------------------------------------------------------------------------
# Which checkpoints a dir holds, and whether `auto` may take one


def checkpoints_in(output_dir: str | os.PathLike) -> list[Path]:
    """`checkpoint-N` dirs in output_dir, newest (largest N) first."""
    if not os.path.isdir(output_dir):
        return []
    found = [(int(m.group(1)), m.group(0)) for m in map(CHECKPOINT.fullmatch, os.listdir(output_dir)) if m]
    return [Path(output_dir) / name for _, name in sorted(found, reverse=True)
            if (Path(output_dir) / name).is_dir()]


def step_of(checkpoint: Path) -> int:
    return int(checkpoint.name.rpartition("-")[2])


def not_resumable(checkpoint: Path, run_id: str | None, max_steps: int) -> str | None:
    """Why `auto` must not take this checkpoint although it is whole: past the run's end, or another run's."""
    if max_steps > 0 and step_of(checkpoint) > max_steps:
        # The Trainer would restore the step, train nothing and save those weights as this run's model.
        return f"step {step_of(checkpoint)} is past --max_steps {max_steps} (raise --max_steps to train on from it)"
    record = read_json(checkpoint / DATA_RECORD)
    written_by = record.get("run_id") if isinstance(record, dict) else None
    if run_id and isinstance(written_by, str) and written_by != run_id:
        return f"written by another run ({written_by}; this dir's run_config.json is run {run_id})"
    return None


# ---------------------------------------------------------------------------------------------
# The data a checkpoint was trained on


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
