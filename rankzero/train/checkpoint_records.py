"""The JSON records of a checkpoint a resume acts on, checked before it is trusted (checkpoints.py calls these).

    problems = trainer_state_problems(checkpoint / "trainer_state.json")   # [] when the Trainer can resume from it
    problems = data_record_problems(checkpoint / "data_fingerprint.json")  # [] when it names the data

A record that parses but holds the wrong types is as damaged as a cut file: transformers builds its
`TrainerState` from trainer_state.json as it is (`TrainerState(**json)`) and does arithmetic with its
counters, so a hand-edited `"global_step": "ten"` would fail deep inside the Trainer with a TypeError
instead of naming the file; a data record that cannot be read would let a resume go on with data
nobody checked.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from rankzero.files import read_json_or_problem

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
