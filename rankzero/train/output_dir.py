"""The run's output dir: writable before anything is prepared, and written by one job at a time.

    problems = output_dir_problems(training.output_dir)    # argument time, with every other check
    with hold_output_dir(training.output_dir, runtime):    # train.py: from before the prepare to the end
                                                           # (None: --tokenize_only, nothing held)
        ...

The runs the dir holds (its checkpoints, the run's id, run_history/) are checkpoints/runs.py's.

Two jobs given one `--output_dir` (a re-submitted Slurm job, a typo) both write
`.checkpoint-staging/checkpoint-N` and rename it into place: checkpoints mixing the files of two runs.
So a job holds `<output_dir>/.rankzero-run.lock` with `flock` from before the prepare to its end. The
kernel drops a flock when the last descriptor of it closes, so a job that is killed leaves no stale
lock; the file also records who holds it (host, pid, job) for the message a second job prints.

One lock per job, not per rank: global rank 0 takes it (flock locks held by two ranks of one job on
one node would refuse each other, and on NFS they would across nodes too). The other ranks take
nothing; each checks once that the dir is not held by another job — recognised by `job_key`, which
every rank of a job computes alike from its launcher's environment — so a second job's ranks stop
too, in seconds, instead of waiting for a rank 0 that has already given up. This works across nodes
where the output dir is shared (flock over NFS is a POSIX lock on the server); a node-local output dir
holds only its own node's files, and only rank 0's node gets the checkpoint anyway.

A dir counts as busy only when another job holds it for CONFIRM_S on end: a rank's shared-lock check
holds the lock for microseconds, and a new holder rewrites the record a moment after it locks (the
record read in between is the previous run's). A killed holder's forked children (DataLoader workers,
tokenizer pool) keep its lock until they notice and exit (PyTorch's workers check for their parent
every 5 s): a lock whose recorded holder is a dead pid on this host is waited on for LOCK_WAIT_S. A
filesystem without locks (Lustre mounted `noflock`) gets a warning, not an error.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import shlex
import socket
import stat
import sys
import tempfile
import time
import unicodedata
from contextlib import contextmanager, suppress
from datetime import datetime, timezone
from pathlib import Path

from rankzero.errors import RankzeroError
from rankzero.runtime import Runtime, job_key

logger = logging.getLogger(__name__)

LOCK_NAME = ".rankzero-run.lock"
CONFIRM_S = 1.0
LOCK_WAIT_S = 10.0  # longer than PyTorch's DataLoader workers take to notice that their parent died (5 s)
LOCK_POLL_S = 0.1


class OutputDirBusy(RankzeroError):
    """Another job holds the output dir."""


# ---------------------------------------------------------------------------------------------
# Argument time


def output_dir_problems(output_dir: str | os.PathLike | None) -> list[str]:
    """A read-only or unusable --output_dir, found before the prepare rather than after it."""
    if not output_dir:
        return []
    path = Path(output_dir).expanduser()
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent  # the nearest ancestor that exists: where mkdir will have to write
    if existing.exists() and not existing.is_dir():
        return [f"--output_dir {output_dir}: {existing} is not a directory; choose another --output_dir"]
    reason = None
    if existing == path:
        try:  # a real write: permission bits, ACLs, a read-only mount, root squashing on NFS all show here
            with tempfile.TemporaryFile(dir=path, prefix=".write-test-"):
                pass
        except OSError as error:
            reason = error.strerror
    elif not os.access(existing, os.W_OK | os.X_OK):  # creating the dir now would leave one behind on an error
        reason = os.strerror(errno.EROFS if os.statvfs(existing).f_flag & os.ST_RDONLY else errno.EACCES)
    if reason is not None:
        where = "" if existing == path else f" (cannot create it in {existing})"
        return [f"--output_dir {output_dir}: not writable{where}: {reason}; choose another --output_dir"]
    return []


# ---------------------------------------------------------------------------------------------
# The lock


def job_identity(runtime: Runtime) -> tuple[str, str]:
    """(a key equal on every rank of this job and different for another job, the job as a person names it)."""
    names = [f"Slurm job {os.environ['SLURM_JOB_ID']}" if os.environ.get("SLURM_JOB_ID") else "",
             f"torchrun run {os.environ['TORCHELASTIC_RUN_ID']}"
             if os.environ.get("TORCHELASTIC_RUN_ID", "none") != "none" else ""]
    return job_key(runtime, "global"), ", ".join(name for name in names if name) or "started by hand"


@contextmanager
def hold_output_dir(output_dir: str | os.PathLike | None, runtime: Runtime):
    """Rank 0 holds the output dir's lock for the block; other ranks check that no other job holds it.
    No output dir (--tokenize_only): nothing to hold."""
    if output_dir is None:
        yield
        return
    path = Path(output_dir).expanduser() / LOCK_NAME
    key, job = job_identity(runtime)
    if runtime.rank != 0:
        _check_not_held_elsewhere(path, key)
        yield
        return
    created = [d for d in (path.parent, *path.parent.parents) if not d.exists()]  # what mkdir makes, deepest first
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = _acquire(path)
        if fd is None:  # no locks on this filesystem: warned
            yield
            return
        try:
            record = {"host": runtime.hostname, "pid": os.getpid(), "job": job, "job_key": key,
                      "started_at": time.time(), "command": " ".join(sys.argv)[:500]}
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(record).encode(), 0)
            yield
        finally:
            # Unlinked while still held: a process waiting on the old file then sees it is gone (`_acquire`
            # compares inodes) and cannot end up holding a lock on a name nobody else can find.
            try:
                if _same_file(fd, path):
                    path.unlink()
            except OSError:
                pass
            os.close(fd)
    finally:  # a run that stopped before writing anything (a missing dataset) leaves no empty output dir
        for directory in created:
            with suppress(OSError):  # only an empty dir goes
                directory.rmdir()


def _open_lock(path: Path, flags: int) -> int:
    """The lock file's fd: a regular file, never through a symlink, never blocking on a FIFO. Anything else
    at that name (planted, or left by hand) is an error saying what it is."""
    try:
        fd = os.open(path, flags | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError as error:
        if error.errno == errno.ENOENT:
            raise
        kind = {errno.ELOOP: "a symlink", errno.EISDIR: "a directory"}.get(error.errno)
        raise RankzeroError(_not_a_lock(path, kind or f"not openable ({error.strerror})")) from None
    kind = _file_kind(os.fstat(fd).st_mode)
    if kind != "a regular file":
        os.close(fd)
        raise RankzeroError(_not_a_lock(path, kind))
    return fd


def _file_kind(mode: int) -> str:
    kinds = ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _not_a_lock(path: Path, kind: str) -> str:
    return (f"--output_dir {path.parent}: {path.name} is {kind}, not the lock file rankzero writes there; remove it "
            f"(rm -r {shlex.quote(str(path))}) and run again, or choose another --output_dir")


def _acquire(path: Path) -> int | None:
    busy_since = None
    while True:
        fd = _open_lock(path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                os.close(fd)
                if error.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                    logger.warning("--output_dir %s: this filesystem has no file locks (%s): a second run given the "
                                   "same output dir would not be stopped", path.parent, error.strerror)
                    return None
                raise
            holder = _read_record(fd)
            os.close(fd)
            busy_since = busy_since or time.monotonic()
            if _busy(holder, busy_since):
                raise OutputDirBusy(busy_message(path.parent, holder)) from None
            time.sleep(LOCK_POLL_S)
            continue
        if _same_file(fd, path):
            return fd
        os.close(fd)  # the holder unlinked it as we locked it: lock the file that is there now


def _check_not_held_elsewhere(path: Path, key: str) -> None:
    busy_since = None
    while True:
        try:
            fd = _open_lock(path, os.O_RDONLY)
        except FileNotFoundError:
            return  # nobody has run here, or our rank 0 has not come this far yet
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # succeeds only while nobody holds it exclusively
                fcntl.flock(fd, fcntl.LOCK_UN)
                return
            except OSError as error:
                if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    return  # no locks on this filesystem: rank 0 warns
            holder = _read_record(fd)
        finally:
            os.close(fd)
        if holder is not None and holder.get("job_key") == key:
            return  # our own rank 0
        busy_since = busy_since or time.monotonic()
        if _busy(holder, busy_since):
            raise OutputDirBusy(busy_message(path.parent, holder))
        time.sleep(LOCK_POLL_S)


def _read_record(fd: int) -> dict | None:
    try:
        value = json.loads(os.pread(fd, 1 << 16, 0) or b"null")
    except (OSError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _busy(holder: dict | None, since: float) -> bool:
    """Whether a lock another job has held since `since` (monotonic) now counts as that job's."""
    waited = time.monotonic() - since
    return waited >= LOCK_WAIT_S or (waited >= CONFIRM_S and not _maybe_leftover(holder))


def _maybe_leftover(holder: dict | None) -> bool:
    """True when the holder may be gone with its children still holding the lock: a dead pid on this host."""
    if holder is None:
        return True
    pid = holder.get("pid")
    if holder.get("host") != socket.gethostname() or isinstance(pid, bool) or not isinstance(pid, int) \
            or not 0 < pid < 1 << 31:
        return False  # another host: its pid says nothing here (nor does a pid that is no pid: 0 or -1 are groups)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, another user's
    return False


def _same_file(fd: int, path: Path) -> bool:
    try:
        found = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (found.st_dev, found.st_ino) == (mine.st_dev, mine.st_ino)


def busy_message(output_dir: Path, holder: dict | None) -> str:
    if holder is None:
        who = "another run (it has not recorded who it is)"
    else:
        since = _since(holder.get("started_at"))
        who = (f"another run: pid {_shown(holder.get('pid'))} on host {_shown(holder.get('host'))} "
               f"({_shown(holder.get('job'))}{since})")
        if _maybe_leftover(holder):  # waited LOCK_WAIT_S: not a dying run's workers, something that lives on
            return (f"--output_dir {output_dir} is locked, but the run that took the lock (pid "
                    f"{_shown(holder.get('pid'))} on this host{since}) is dead: a process it started still holds "
                    f"the lock open (an orphaned DataLoader worker or subprocess). Find it with `fuser -v "
                    f"{shlex.quote(str(output_dir / LOCK_NAME))}` (or lsof) and stop it, or choose another --output_dir")
    return (f"--output_dir {output_dir} is in use by {who}. Two runs writing one output dir mix their "
            "checkpoints: wait for it to end or stop it, or choose another --output_dir")


def _since(started) -> str:
    """", running since <UTC time>" from a record's started_at, or "" when it is no time (1e300, NaN, a string)."""
    if isinstance(started, bool) or not isinstance(started, (int, float)):
        return ""
    try:
        return datetime.fromtimestamp(started, timezone.utc).strftime(", running since %Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, ValueError, OSError):
        return ""


def _shown(value, limit: int = 80) -> str:
    """A value read from the lock record, safe to print: control characters (terminal escapes, newlines, bidi
    overrides) removed, and cut to `limit` characters; the record is a file anyone with write access can edit."""
    text = "".join(char for char in str(value) if unicodedata.category(char)[0] != "C")
    return text if len(text) <= limit else text[:limit] + "…"
