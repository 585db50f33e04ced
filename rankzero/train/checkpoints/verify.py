"""Whether a checkpoint dir is whole, without loading a tensor: one line per damaged file.

    problems = verify_checkpoint(path)                  # [] when every file of it is whole
    chosen, skipped = newest_intact_checkpoint(checkpoints_in(output_dir))   # resume.py, for `auto`
    problems = torch_file_problems(path / "optimizer.pt")  # one torch.save zip

A checkpoint is cut short by a kill or a full disk mid-write (rankzero renames whole checkpoints into
place, other tools and `cp` do not), so what is checked is what truncation breaks: a safetensors file's
size against the end of the last tensor its header names; a torch file (optimizer, scheduler, RNG
states, training_args.bin) is a zip archive whose central directory sits at its very end, so reading
that directory (a few KB, one entry per tensor) finds any cut, and each member must lie inside the
file; JSON files must parse. A sharded model's index must name shards that exist and pass the same
check. FSDP's DCP folders: `.metadata` is there and unpickles (sharded.read_dcp_metadata), and every
file it names holds the bytes it says (offset + length); its `.bin` files are torch zips. Not checked:
bytes changed in place inside a tensor (no tool writes a checksum of everything), DeepSpeed's own folders.

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
import struct
import zipfile
from pathlib import Path

from rankzero.files import read_json_or_problem
from rankzero.train.checkpoints.records import DATA_RECORD
from rankzero.train.checkpoints.sharded import (DCP_METADATA, FSDP_MODEL, DamagedMetadata, is_fsdp_checkpoint,
                                                read_dcp_metadata)

TORCH_FILES = re.compile(r"(optimizer|scheduler|scaler)\.pt|rng_state(_\d+)?\.pth|training_args\.bin")  # not weights
SAFETENSORS_HEADER_LIMIT = 100 << 20  # the format's own cap on the JSON header
# The counters the Trainer does arithmetic with on resume, and the numbers it formats.
# (logging/eval/save_steps are stored as given: 1.0 is as valid as 1.)
STATE_COUNTS = ("global_step", "max_steps", "num_train_epochs", "num_input_tokens_seen")
STATE_NUMBERS = ("epoch", "total_flos", "logging_steps", "eval_steps", "save_steps")


def verify_checkpoint(path: str | os.PathLike) -> list[str]:
    """What is wrong with the checkpoint dir at `path`, one line per file ([] when nothing is)."""
    path = Path(path)
    if not path.is_dir():
        return [f"{path} is not a directory"]
    names = set(os.listdir(path))
    problems = []
    if "trainer_state.json" not in names:
        problems.append("trainer_state.json is missing (the Trainer writes it last: the save did not finish)")
    else:
        problems += trainer_state_problems(path / "trainer_state.json")
    if DATA_RECORD in names:  # absent: saved by an older rankzero (check_data warns); present, it must read
        problems += data_record_problems(path / DATA_RECORD)
    own_format = is_fsdp_checkpoint(names) or any(name.startswith("global_step") and (path / name).is_dir()
                                                  for name in names)  # FSDP's or DeepSpeed's own weight files
    problems += fsdp_checkpoint_problems(path, names)
    if not own_format:
        problems += _weight_problems(path, names)
        problems += [f"{name} is missing (not a checkpoint-N dir, or one saved with --save_only_model, which cannot "
                     f"be resumed: start a new run from its weights with --pretrained_model {path})"
                     for name in ("optimizer.pt", "scheduler.pt") if name not in names]
    for name in sorted(names):
        if TORCH_FILES.fullmatch(name):
            problems += torch_file_problems(path / name)
    if "config.json" in names:
        problems += _json_problems(path / "config.json")
    return problems


def newest_intact_checkpoint(candidates: list[Path]) -> tuple[Path | None, list[tuple[Path, list[str]]]]:
    """(the first of `candidates`, newest first, that passes verification, [(each one before it, its problems)])."""
    skipped = []
    for path in candidates:
        problems = verify_checkpoint(path)
        if not problems:
            return path, skipped
        skipped.append((path, problems))
    return None, skipped



def _weight_problems(path: Path, names: set[str]) -> list[str]:
    for index_name, check in (("model.safetensors.index.json", _safetensors_problems),
                              ("pytorch_model.bin.index.json", torch_file_problems)):
        if index_name in names:
            problems = _json_problems(path / index_name, key="weight_map")
            if problems:
                return problems
            weight_map = json.loads((path / index_name).read_text(encoding="utf-8"))["weight_map"]
            shards = sorted({shard for shard in weight_map.values() if isinstance(shard, str)}
                            if isinstance(weight_map, dict) else [])
            if not shards:
                return [f"{index_name} names no weight files"]
            for shard in shards:
                if os.sep in shard or not (path / shard).is_file():
                    problems.append(f"{shard} is missing (named by {index_name})")
                else:
                    problems += check(path / shard)
            return problems
    for name, check in (("model.safetensors", _safetensors_problems), ("pytorch_model.bin", torch_file_problems),
                        ("adapter_model.safetensors", _safetensors_problems), ("adapter_model.bin", torch_file_problems)):
        if name in names:
            return check(path / name)
    return ["no model weights (model.safetensors, a sharded index, pytorch_model.bin)"]


def _safetensors_problems(path: Path) -> list[str]:
    """Header parses, and the file ends exactly where its last tensor does."""
    size = path.stat().st_size
    try:
        with open(path, "rb") as handle:
            prefix = handle.read(8)
            if len(prefix) < 8:
                return [f"{path.name} is {size} bytes: cut short (not even a safetensors header)"]
            (length,) = struct.unpack("<Q", prefix)
            if length > min(SAFETENSORS_HEADER_LIMIT, size - 8):
                return [f"{path.name}: its header claims {length:,} bytes of a {size:,}-byte file: cut short or "
                        "not a safetensors file"]
            header = json.loads(handle.read(length))
    except (OSError, ValueError, UnicodeDecodeError) as error:
        return [f"{path.name}: unreadable safetensors header ({error})"]
    if not isinstance(header, dict):
        return [f"{path.name}: its safetensors header is not a table of tensors"]
    ends = [entry["data_offsets"][1] for name, entry in header.items()
            if name != "__metadata__" and isinstance(entry, dict) and isinstance(entry.get("data_offsets"), list)
            and len(entry["data_offsets"]) == 2 and isinstance(entry["data_offsets"][1], int)]
    expected = 8 + length + max(ends, default=0)
    if size != expected:
        return [f"{path.name} is {size:,} bytes, its header describes {expected:,} ("
                f"{'cut short' if size < expected else 'bytes after the last tensor'})"]
    return []


def _json_problems(path: Path, key: str | None = None) -> list[str]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as error:
        return [f"{path.name} does not parse ({error}): cut short or overwritten"]
    if key is not None and (not isinstance(value, dict) or key not in value):
        return [f"{path.name} has no {key!r}"]
    return []


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


def fsdp_checkpoint_problems(path: Path, names: set[str]) -> list[str]:
    """What is wrong with FSDP's files in the checkpoint dir `path` ([] when they are whole, or there are none)."""
    problems = []
    for name in sorted(names):
        if (path / name).is_dir() and name.startswith((FSDP_MODEL, "optimizer_")):
            problems += dcp_problems(path / name)
        elif name.startswith(FSDP_MODEL) and name.endswith(".bin") or name.startswith("optimizer") and name.endswith(".bin"):
            problems += torch_file_problems(path / name)
    if is_fsdp_checkpoint(names) and not any(name.startswith("optimizer") for name in names):
        problems.append("no optimizer state (optimizer_0/ or optimizer.bin): the save did not finish")
    return problems


def dcp_problems(directory: Path) -> list[str]:
    """A DCP folder: its metadata reads, and every file it names holds the bytes the metadata places there."""
    from torch.distributed.checkpoint.filesystem import _StorageInfo

    if not (directory / DCP_METADATA).is_file():
        return [f"{directory.name}/{DCP_METADATA} is missing (written last, once every rank has saved its shard: "
                "the save did not finish)"]
    try:
        metadata = read_dcp_metadata(directory)
    except (DamagedMetadata, OSError) as error:
        return [f"{directory.name}/{DCP_METADATA} does not load: {error}"]
    ends: dict[str, int] = {}
    for info in metadata.storage_data.values():
        if not isinstance(info, _StorageInfo) or not isinstance(info.relative_path, str) or os.sep in info.relative_path:
            return [f"{directory.name}/{DCP_METADATA}: its storage table names no shard file where a shard should be: "
                    "damaged"]
        ends[info.relative_path] = max(ends.get(info.relative_path, 0), info.offset + info.length)
    problems = []
    for name, end in sorted(ends.items()):
        file = directory / name
        if not file.is_file():
            problems.append(f"{directory.name}/{name} is missing (named by {DCP_METADATA})")
        elif file.stat().st_size < end:
            problems.append(f"{directory.name}/{name} is {file.stat().st_size:,} bytes, its tensors end at {end:,} "
                            "(cut short)")
    return problems
