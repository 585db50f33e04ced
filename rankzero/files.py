"""Files in a directory other users can write: written whole or not at all, read without following links.

    write_json_atomic(path, payload)      # unguessable temp name (O_CREAT|O_EXCL|O_NOFOLLOW), then rename into place
    read_json(path)                       # never through a symlink, never blocking on a FIFO
    with exclusive_lock(path, blocking=False) as locked: ...   # flock: a killed holder leaves no stale lock
    content_hash(handle, size)            # xxh3-128 of a file's bytes (or of its first and last MiB)
    out_of_space(error)                   # ENOSPC/EDQUOT anywhere in an exception chain
    remove_dead_temporaries(dir, ".name-*.npz", older_than_s)   # what a writer killed before its rename left

The data cache (rankzero/data/handoff.py, published.py), the Ray engine's task files, the compiled passes'
table cache (data/native/table_cache.py) and the training output dir use these. A cache dir
shared by several users, and what its permissions should be: docs/design.md.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Callable

from rankzero.errors import RankzeroError


def write_atomic(path: Path, write: Callable[[BinaryIO], None], mode: int | None = None) -> None:
    """`write(handle)` into a file beside `path` with an unguessable name (mkstemp: O_CREAT|O_EXCL|O_NOFOLLOW),
    then rename it into place: a symlink someone planted at `path`, or at any name we could guess, is
    replaced, never followed; a reader sees the whole file or none of it."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            write(handle)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, payload: dict, mode: int | None = None) -> None:
    write_atomic(path, lambda handle: handle.write(json.dumps(payload, indent=2, default=str).encode()), mode)


def open_no_follow(path: Path, flags: int = os.O_RDONLY) -> int:
    """An fd for the regular file at `path`, never through a symlink (ELOOP) and never blocking on a FIFO."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return fd


def read_json(path: Path) -> dict | None:
    """The JSON object at `path`, or None when there is none to read (see `read_json_or_problem`)."""
    return read_json_or_problem(path)[0]


def read_json_or_problem(path: Path) -> tuple[dict | None, str | None]:
    """The JSON object at `path` and None, or None and what is wrong, worded to follow "the file is": "missing",
    "not valid JSON (Expecting value: line 1 column 9 (char 8))", "nested deeper than the JSON parser allows"... A file
    anyone could have crafted must never raise here (a RecursionError, a UnicodeDecodeError)."""
    try:
        with os.fdopen(open_no_follow(path), encoding="utf-8") as handle:
            value = json.load(handle)
    except FileNotFoundError:
        return None, "missing"
    except OSError as error:
        return None, f"unreadable ({error.strerror})"
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    except RecursionError:
        return None, "nested deeper than the JSON parser allows"
    except ValueError as error:  # JSONDecodeError (with line and column), or an integer past Python's digit limit
        return None, f"not valid JSON ({error})"
    if not isinstance(value, dict):
        return None, f"a JSON {type(value).__name__}, not an object"
    return value, None


def lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def current_umask() -> int:
    # The only way to read the umask sets it; no other thread creates a file in this instant that matters
    # (the heartbeat's temp files are created 0600 whatever the umask).
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def owner_text(path: Path) -> str:
    """Who owns `path` and its mode, for an error a user of a shared dir can act on: "alice (uid 1001), mode 0700"."""
    import pwd

    try:
        info = os.lstat(path)
    except OSError:
        return "an unknown owner"
    try:
        name = pwd.getpwuid(info.st_uid).pw_name
    except KeyError:
        name = "a user with no name here"
    return f"{name} (uid {info.st_uid}), mode {stat.S_IMODE(info.st_mode):04o}"


def this_user() -> str:
    import pwd

    try:
        return f"{pwd.getpwuid(os.geteuid()).pw_name} (uid {os.geteuid()})"
    except KeyError:
        return f"uid {os.geteuid()}"


def _open_lock_file(path: Path) -> int:
    """Open FP.lock read-only (flock needs no write access, so another user's lock file works too), creating
    it when absent, readable by everyone who can reach the dir whatever the umask; refuse a symlink or any
    other kind of file someone put there."""
    while True:
        try:
            try:
                return open_no_follow(path)
            except FileNotFoundError:
                # Create it separately: O_CREAT on an existing file of another user in a sticky dir fails
                # where fs.protected_regular is set, plain opening does not.
                fd = open_no_follow(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL)
                os.fchmod(fd, 0o644)  # an empty file; a builder's umask 077 must not lock the others out
                return fd
        except FileExistsError:
            continue  # another process created it between the two opens
        except PermissionError:
            raise RankzeroError(f"{path} cannot be opened by {this_user()}: it belongs to {owner_text(path)}; ask its "
                                "owner to `chmod a+r` it (rankzero creates lock files readable by all since it gives "
                                "shared caches group access), or use your own --cache_dir") from None
        except OSError as error:
            if error.errno not in (errno.ELOOP, errno.EINVAL):
                raise
            raise RankzeroError(f"{path} is {'a symlink' if error.errno == errno.ELOOP else 'not a regular file'}: "
                                "rankzero never made it and never follows it (someone else can write this cache "
                                "dir?); remove it, or use another --cache_dir") from None


@contextmanager
def exclusive_lock(path: Path, blocking: bool):
    fd = _open_lock_file(path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except OSError as error:
            if error.errno in (errno.EAGAIN, errno.EACCES):
                yield False
                return
            raise
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def content_hash(handle: BinaryIO, size: int, sample_bytes: int | None = None) -> str:
    """xxh3-128 of an open file's bytes, or of its first and last `sample_bytes` when it is larger than both
    (xxh3 hashes files at the speed they are read, many times blake2b's: bench/RESULTS.md)."""
    import xxhash

    digest = xxhash.xxh3_128()
    if sample_bytes is not None and size > 2 * sample_bytes:
        digest.update(handle.read(sample_bytes))
        handle.seek(size - sample_bytes)
        digest.update(handle.read(sample_bytes))
    else:
        while block := handle.read(8 << 20):
            digest.update(block)
    return digest.hexdigest()


def size_text(value: int | None) -> str:
    return "?" if value is None else f"{value / 1e9:,.1f} GB" if value >= 1e8 else f"{value / 1e6:,.1f} MB"


def out_of_space(error: BaseException | None) -> bool:
    """ENOSPC/EDQUOT anywhere in the exception chain (pyarrow raises OSError without an errno, by message)."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and (error.errno in (errno.ENOSPC, errno.EDQUOT) or any(
                text in str(error) for text in ("No space left on device", "Disk quota exceeded"))):
            return True
        error = error.__cause__ or error.__context__
    return False


def remove_dead_temporaries(directory: Path, pattern: str, older_than_s: float) -> None:
    """A writer killed before its rename (SIGKILL, a lost node) leaves its temporary file behind. One matching `pattern`
    and unchanged for `older_than_s`, longer than any writer takes, is nobody's: removed. One another user owns, in a
    shared cache, may not be ours to remove: left."""
    horizon = time.time() - older_than_s
    for temporary in directory.glob(pattern):
        try:
            if temporary.lstat().st_mtime < horizon:
                temporary.unlink()
        except OSError:
            pass
