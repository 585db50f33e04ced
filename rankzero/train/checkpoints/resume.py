"""Checkpoints a resume can trust: each one verified before it is chosen, tied to the data it was trained
on, and a full disk during a save reported as one.

    record = {**data_record(prepared_dir), "batch": batch_layout(training, world_size)}  # this run's data
    resume = resolve_resume(value, output_dir, record, allow_data_change, report=runtime.is_main)
    problems = verify_checkpoint(path)                  # [] when every file of it is whole
    write_data_record(staged_checkpoint, record)        # trainer.py, into every checkpoint before it is renamed
    with full_disk_reported(output_dir, "the final model", removed="…"): trainer.save_model(...)

**Verification is cheap**: no tensor is loaded. A checkpoint is cut short by a kill or a full disk
mid-write (rankzero renames whole checkpoints into place, other tools and `cp` do not), so what is
checked is what truncation breaks: a safetensors file's size against the end of the last tensor its
header names; a torch file (optimizer, scheduler, RNG states, training_args.bin) is a zip archive whose
central directory sits at its very end, so reading that directory (a few KB, one entry per tensor)
finds any cut, and each member must lie inside the file; JSON files must parse. A sharded model's
index must name shards that exist and pass the same check. `--resume_from_checkpoint auto` takes the
newest checkpoint that passes and warns naming each one it skipped and why; a damaged checkpoint given
by name is an error naming the file; FSDP's files likewise (checkpoints/sharded.py). Not checked: bytes
changed in place inside a tensor (no tool writes a checksum of everything), DeepSpeed's own folders.

**The data a checkpoint was trained on** is recorded in it (`data_fingerprint.json`: the prepared
dir's fingerprint, path, sources and fingerprint inputs). On resume it is compared with this run's
data: the Trainer finds its place by skipping as many batches as the old run consumed, which on other
data is no place at all. A mismatch stops with both fingerprints and what differs, unless
`--allow_data_change`. For the same reason the record holds the samples each step took (processes ×
per-device batch × accumulation): a resume that would take another number per step is an argument error
saying how to go on (records.batch_problem).

**A full disk**: torch.save reports it as "basic_ios::clear: iostream error" with no errno, so after
a failed save a 1 MiB probe write in the same dir (random bytes: a compressing filesystem stores
zeros for free) tells ENOSPC/EDQUOT apart from every other failure.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import struct
import tempfile
import warnings
import zipfile
from contextlib import contextmanager
from pathlib import Path

from rankzero.files import out_of_space, size_text
from rankzero.train.checkpoints.records import (CHECKPOINT, DATA_RECORD, batch_layout, check_data,  # noqa: F401 (re-exported)
                                               checkpoints_in, data_record, data_record_problems, not_resumable, step_of,
                                               torch_file_problems, trainer_state_problems, write_data_record)
from rankzero.errors import RankzeroError
from rankzero.train.checkpoints.sharded import fsdp_checkpoint_problems, is_fsdp_checkpoint

logger = logging.getLogger(__name__)

TORCH_FILES = re.compile(r"(optimizer|scheduler|scaler)\.pt|rng_state(_\d+)?\.pth|training_args\.bin")  # not weights
SAFETENSORS_HEADER_LIMIT = 100 << 20  # the format's own cap on the JSON header
PROBE_BYTES = 1 << 20
NO_SPACE_TEXTS = ("No space left on device", "Disk quota exceeded")


# ---------------------------------------------------------------------------------------------
# Argument time


def resume_problems(tokenize_only: bool, resume: str | None, allow_data_change: bool) -> list[str]:
    problems = []
    if tokenize_only and resume:
        problems.append(f"--resume_from_checkpoint {resume}: --tokenize_only prepares the data and exits, nothing "
                        "is resumed; drop one of the two")
    if allow_data_change and not resume:
        problems.append("--allow_data_change: only used with --resume_from_checkpoint")
    if resume and resume != "auto" and not tokenize_only and not os.path.isdir(resume):
        problems.append(f"--resume_from_checkpoint {resume}: no such directory (give a checkpoint-N dir, or 'auto' "
                        "for the newest intact one in --output_dir)")
    return problems


# ---------------------------------------------------------------------------------------------
# Verifying one checkpoint


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


# ---------------------------------------------------------------------------------------------
# Choosing the checkpoint to resume from


def newest_intact_checkpoint(output_dir: str | os.PathLike, candidates: list[Path] | None = None
                             ) -> tuple[Path | None, list[tuple[Path, list[str]]]]:
    """(the newest checkpoint that passes verification, [(each newer one skipped, its problems)])."""
    skipped = []
    for path in checkpoints_in(output_dir) if candidates is None else candidates:
        problems = verify_checkpoint(path)
        if not problems:
            return path, skipped
        skipped.append((path, problems))
    return None, skipped


def resolve_resume(value: str | None, output_dir: str, data: dict | None = None, allow_data_change: bool = False,
                   report: bool = True, max_steps: int = -1) -> str | None:
    """--resume_from_checkpoint DIR, or `auto`: the newest intact checkpoint of the dir's run up to max_steps.

    Every rank calls it and reads the same files, so all of them choose alike; `report` (rank 0) says why."""
    if value is None or value == "":
        return None  # a dir holding checkpoints is an argument error (used_output_dir_problems)
    from rankzero.train.output_dir import run_id_of

    if value == "auto":
        run_id = run_id_of(output_dir)
        reasons = {path: not_resumable(path, run_id, max_steps) for path in checkpoints_in(output_dir)}
        foreign = [(path, [reason]) for path, reason in reasons.items() if reason]
        chosen, skipped = newest_intact_checkpoint(output_dir, [path for path, reason in reasons.items() if not reason])
        if chosen is None and (skipped or foreign):
            what = f"no checkpoint in {output_dir} belongs to this run" if foreign else \
                f"every checkpoint in {output_dir} is damaged"
            raise RankzeroError(f"--resume_from_checkpoint auto: {what}:\n" + _describe_skipped(skipped + foreign)
                                + "\nrepair one, or start over (--overwrite_output_dir, no --resume_from_checkpoint)")
        if chosen is None:
            if report:
                logger.warning("--resume_from_checkpoint auto: no checkpoint in %s yet, starting from scratch",
                               output_dir)
            return None
        if skipped and report:
            warnings.warn(f"--resume_from_checkpoint auto: resuming from {chosen.name}, skipping newer damaged "
                          f"checkpoints (left in place; a save at the same step replaces them):\n"
                          + _describe_skipped(skipped), stacklevel=2)
        if report and any(step_of(path) > step_of(chosen) for path, _ in foreign):
            logger.warning("--resume_from_checkpoint auto: resuming from %s, not from:\n%s", chosen.name,
                           _describe_skipped([(path, why) for path, why in foreign if step_of(path) > step_of(chosen)]))
    else:
        chosen = Path(value)
        if not chosen.is_dir():
            raise RankzeroError(f"--resume_from_checkpoint {value}: no such directory (give a checkpoint-N dir or "
                                "'auto')")
        problems = verify_checkpoint(chosen)
        if problems:
            raise RankzeroError(f"--resume_from_checkpoint {value} is damaged: {'; '.join(problems)}. Give another "
                                "checkpoint, or 'auto' for the newest intact one in --output_dir")
        past = not_resumable(chosen, None, max_steps) if CHECKPOINT.fullmatch(chosen.name) else None
        if past:
            raise RankzeroError(f"--resume_from_checkpoint {value}: {past}")
    if data is not None:
        check_data(chosen, data, allow_data_change, report)
    return str(chosen)


def _describe_skipped(skipped: list[tuple[Path, list[str]]]) -> str:
    return "\n".join(f"  {path}: {'; '.join(problems)}" for path, problems in skipped)


# ---------------------------------------------------------------------------------------------
# A full disk


def free_bytes(directory: str | os.PathLike) -> int | None:
    try:
        return shutil.disk_usage(directory).free
    except OSError:
        return None


def save_failure(error: BaseException) -> bool:
    """Whether `error` is a save's failure to report: any Exception, or DCP's CheckpointException, which is a
    BaseException (`except Exception` lets a full disk in an FSDP save through as a traceback)."""
    from torch.distributed.checkpoint import CheckpointException

    return isinstance(error, (Exception, CheckpointException))


def rank_failures(error: BaseException) -> list[BaseException]:
    """The exceptions DCP's CheckpointException holds, one per failed rank ([error] for any other)."""
    failures = getattr(error, "failures", None)
    if not isinstance(failures, dict):
        return [error]
    held = [failure[0] for failure in failures.values()
            if isinstance(failure, tuple) and failure and isinstance(failure[0], BaseException)]
    return held or [error]


def describe_failure(error: BaseException) -> str:
    """One line: the first rank's exception for a CheckpointException (whose own text is a traceback)."""
    first = rank_failures(error)[0]
    return f"{type(first).__name__}: {str(first).splitlines()[0] if str(first) else ''}"


def no_space_left(error: BaseException, directory: str | os.PathLike) -> bool:
    """Whether `error`, raised while writing into `directory`, came from a full disk or quota."""
    if any(out_of_space(failure) for failure in rank_failures(error)):
        return True
    seen = error
    while seen is not None:  # safetensors raises its own type, with the OS error only in the text
        if any(text in str(seen) for text in NO_SPACE_TEXTS):
            return True
        seen = seen.__cause__ or seen.__context__
    return out_of_space(error) or disk_full(directory)  # torch.save: RuntimeError('... iostream error'), no errno


def disk_full(directory: str | os.PathLike) -> bool:
    """Whether a 1 MiB write into `directory` fails for want of space or quota."""
    try:
        with tempfile.TemporaryFile(dir=directory, prefix=".space-probe-") as handle:
            handle.write(os.urandom(PROBE_BYTES))
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as probe:
        return out_of_space(probe)
    return False


def no_space_message(directory, what: str, free_at_start: int | None, needed: str, removed: str) -> str:
    return (f"--output_dir {directory}: no space left on the device while saving {what} ({size_text(free_at_start)} "
            f"were free when the save started; {needed}); {removed}: free space there (older checkpoints, "
            "--save_total_limit), or pass another --output_dir")


def checkpoint_size_text(output_dir: str | os.PathLike, model=None) -> str:
    """What a checkpoint takes: the newest complete one's size, else an estimate from the model."""
    for path in checkpoints_in(output_dir):  # FSDP's shards and DeepSpeed's lie in folders of their own
        size = sum(entry.stat().st_size for entry in path.rglob("*") if entry.is_file())
        return f"{path.name} takes {size_text(size)}"
    if model is not None:
        weights = sum(parameter.numel() * parameter.element_size() for parameter in model.parameters())
        return f"a checkpoint takes about {size_text(3 * weights)} (the weights and AdamW's two moments)"
    return "the checkpoint's size is not known"


@contextmanager
def full_disk_reported(directory: str | os.PathLike, what: str, removed: str):
    """Turn a full disk while saving `what` into one message naming the dir and the free space."""
    free = free_bytes(directory)
    try:
        yield
    except BaseException as error:
        if save_failure(error) and no_space_left(error, directory):
            raise RankzeroError(no_space_message(directory, what, free, checkpoint_size_text(directory),
                                                 removed)) from None
        raise


def failures_on_every_rank(error: BaseException | None, directory: str | os.PathLike) -> list[tuple[int, bool, str]]:
    """[(rank, out of space?, what happened)] for every rank whose save raised, known to all ranks alike.

    Gathered in one collective that also stands for the barrier after a save: a rank that failed and
    raised at once would leave the others waiting in that barrier for it."""
    import torch.distributed as distributed

    mine = None if error is None else (no_space_left(error, directory), describe_failure(error))
    if not (distributed.is_available() and distributed.is_initialized() and distributed.get_world_size() > 1):
        return [] if mine is None else [(0, *mine)]
    gathered: list = [None] * distributed.get_world_size()
    distributed.all_gather_object(gathered, mine)
    return [(rank, *failure) for rank, failure in enumerate(gathered) if failure is not None]
