"""The checkpoint a run resumes from: `--resume_from_checkpoint DIR` or `auto`, verified, of this run, on its data.

    problems = resume_problems(tokenize_only, resume, allow_data_change)   # argument time
    resume = resolve_resume(value, output_dir, record, allow_data_change, report=runtime.is_main)

`--resume_from_checkpoint auto` takes the newest checkpoint of the dir's run (runs.py) that passes
verification (verify.py) and warns naming each one it skipped and why; a damaged checkpoint given by
name is an error naming the file. Either way the data the checkpoint was trained on, and the samples
each of its steps took, are compared with this run's (records.py) before the model is built.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path

from rankzero.errors import RankzeroError
from rankzero.train.checkpoints.records import check_data
from rankzero.train.checkpoints.runs import CHECKPOINT, checkpoints_in, not_resumable, run_id_of, step_of
from rankzero.train.checkpoints.verify import newest_intact_checkpoint

logger = logging.getLogger(__name__)


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


def resolve_resume(value: str | None, output_dir: str, data: dict | None = None, allow_data_change: bool = False,
                   report: bool = True, max_steps: int = -1) -> str | None:
    """--resume_from_checkpoint DIR, or `auto`: the newest intact checkpoint of the dir's run up to max_steps.

    Every rank calls it and reads the same files, so all of them choose alike; `report` (rank 0) says why."""
    if value is None or value == "":
        return None  # a dir holding checkpoints is an argument error (used_output_dir_problems)
    auto = value == "auto"
    if not auto and not Path(value).is_dir():
        raise RankzeroError(f"--resume_from_checkpoint {value}: no such directory (give a checkpoint-N dir or 'auto')")
    # `auto` looks only at the dir's run's checkpoints up to --max_steps (runs.py); one given by name is checked
    # for the steps alone, and after its files, whose damage is the first thing to say.
    run_id = run_id_of(output_dir) if auto else None
    candidates = checkpoints_in(output_dir) if auto else [Path(value)]
    reasons = {path: not_resumable(path, run_id, max_steps) if auto or CHECKPOINT.fullmatch(path.name) else None
               for path in candidates}
    chosen, skipped = newest_intact_checkpoint([path for path in candidates if not (auto and reasons[path])])
    if not auto:
        if skipped:
            raise RankzeroError(f"--resume_from_checkpoint {value} is damaged: {'; '.join(skipped[0][1])}. Give another "
                                "checkpoint, or 'auto' for the newest intact one in --output_dir")
        if reasons[chosen]:
            raise RankzeroError(f"--resume_from_checkpoint {value}: {reasons[chosen]}")
    else:
        foreign = [(path, [reason]) for path, reason in reasons.items() if reason]
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
    if data is not None:
        check_data(chosen, data, allow_data_change, report)
    return str(chosen)


def _describe_skipped(skipped: list[tuple[Path, list[str]]]) -> str:
    return "\n".join(f"  {path}: {'; '.join(problems)}" for path, problems in skipped)
