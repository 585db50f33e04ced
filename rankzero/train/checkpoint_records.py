"""The JSON records of a checkpoint a resume acts on, checked before it is trusted, and which of a dir's
checkpoints a resume may take (checkpoints.py and output_dir.py call these; they import neither).

    problems = trainer_state_problems(checkpoint / "trainer_state.json")   # [] when the Trainer can resume from it
    problems = data_record_problems(checkpoint / "data_fingerprint.json")  # [] when it names the data
    problems = torch_file_problems(checkpoint / "optimizer.pt")             # [] when the torch.save zip is whole
    checkpoints_in(output_dir)                                              # checkpoint-N dirs, newest first
    not_resumable(checkpoint, run_id, max_steps)                            # None, or why `auto` must skip it

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
import zipfile
from pathlib import Path

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
