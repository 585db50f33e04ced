"""A full disk during a save, reported as one: the dir, the space that was free, what a checkpoint takes.

    with full_disk_reported(output_dir, "the final model", removed="…"): trainer.save_model(...)
    failures = failures_on_every_rank(error, directory)   # trainer.py: after a checkpoint's save, every rank

torch.save reports a full disk as "basic_ios::clear: iostream error" with no errno, so after a failed
save a 1 MiB probe write in the same dir (random bytes: a compressing filesystem stores zeros for free)
tells ENOSPC/EDQUOT apart from every other failure. DCP raises a CheckpointException, which is a
BaseException holding each failed rank's exception.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager

from rankzero.errors import RankzeroError
from rankzero.files import out_of_space, size_text
from rankzero.train.checkpoints.runs import checkpoints_in

PROBE_BYTES = 1 << 20
NO_SPACE_TEXTS = ("No space left on device", "Disk quota exceeded")


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
