"""The runs an output dir holds: the checkpoints in it, the id of its run, and the earlier runs kept in run_history/.

    checkpoints_in(output_dir)                             # checkpoint-N dirs, newest first
    not_resumable(checkpoint, run_id, max_steps)           # None, or why `auto` must skip it
    run_id = (resume and run_id_of(output_dir)) or new_run_id()   # run.py: a resume continues the dir's run
    problems = used_output_dir_problems(output_dir, resume, overwrite)  # argument time
    keep_earlier_run_files(output_dir)                     # before run_config.json / recipe.yaml are rewritten
    move_earlier_run(output_dir)                           # --overwrite_output_dir: the whole earlier run

One run per output dir: a run started from scratch in a dir holding checkpoints would mix them with its
own, and `--resume_from_checkpoint auto` would later pick the newest, whichever run wrote it. So that
is an argument error (`used_output_dir_problems`) unless --overwrite_output_dir moves the earlier run
into run_history/<time>/ first. run_config.json names the run; every checkpoint names the run that wrote
it (records.py), and `auto` takes only this run's.
"""

from __future__ import annotations

import os
import re
import time
from datetime import datetime, timezone
from pathlib import Path

from rankzero.files import read_json
from rankzero.train.checkpoints.records import DATA_RECORD

CHECKPOINT = re.compile(r"checkpoint-(\d+)")
HISTORY_DIR = "run_history"
RUN_FILES = ("run_config.json", "recipe.yaml")


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


def used_output_dir_problems(output_dir: str | os.PathLike | None, resume: str | None, overwrite: bool) -> list[str]:
    """A run from scratch into a dir holding another run's checkpoints: continue it, or move it aside."""
    found = checkpoints_in(output_dir) if output_dir and not resume else []
    if not found or overwrite:
        return []
    names = ", ".join(path.name for path in found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
    return [f"--output_dir {output_dir} holds an earlier run's checkpoints ({names}): continue it with "
            f"--resume_from_checkpoint auto (RESUME=1 ./pretrain_cont.sh {output_dir}), or start over with "
            f"--overwrite_output_dir (the earlier run moves to {Path(output_dir) / HISTORY_DIR}/<time>/), or choose "
            "another --output_dir"]


def run_id_of(output_dir: str | os.PathLike) -> str | None:
    """The id of the run an output dir holds (its run_config.json's), or None (none yet, or an older rankzero)."""
    record = read_json(Path(output_dir) / RUN_FILES[0])
    return record.get("run_id") if isinstance(record, dict) and isinstance(record.get("run_id"), str) else None


def new_run_id() -> str:
    import uuid

    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:8]


def _stamp(path: Path) -> str:
    return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def move_earlier_run(output_dir: Path) -> Path | None:
    """--overwrite_output_dir: everything an earlier run left in output_dir (checkpoints, model, logs, run
    files) into run_history/<time it was written>/, so the new run starts in an empty dir and nothing is lost."""
    entries = [path for path in Path(output_dir).iterdir()
               if path.name != HISTORY_DIR and not path.name.startswith(".")] if Path(output_dir).is_dir() else []
    if not entries:
        return None
    record = next((Path(output_dir) / name for name in RUN_FILES if (Path(output_dir) / name).is_file()), entries[0])
    history = Path(output_dir) / HISTORY_DIR
    stamp, count = _stamp(record), 1
    while (history / stamp).exists():
        count += 1
        stamp = f"{_stamp(record)}.{count}"
    (history / stamp).mkdir(parents=True)
    for path in entries:
        os.replace(path, history / stamp / path.name)
    return history / stamp


def keep_earlier_run_files(output_dir: Path) -> Path | None:
    """Move the run files of an earlier run in this dir (a resume, a restart) into run_history/, named by
    when they were written, so the record of the data and settings each part of a run used survives."""
    files = [output_dir / name for name in RUN_FILES if (output_dir / name).is_file()]
    if not files:
        return None
    written = _stamp(files[0])
    history = output_dir / HISTORY_DIR
    history.mkdir(exist_ok=True)
    stamp, count = written, 1
    while any((history / f"{stamp}-{path.name}").exists() for path in files):
        count += 1
        stamp = f"{written}.{count}"
    for path in files:
        os.replace(path, history / f"{stamp}-{path.name}")
    return history
