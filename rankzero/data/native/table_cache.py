"""The compiled passes' per-code-point tables, built once per user and Python, then read from disk.

    arrays = cached("ngram_scan", build, sources=[__file__])   # build() -> {name: array}; from disk after the first time

Decontamination's pass (scan.py) and near dedup's (dedup/kernel.py) read tables of the 65,536 code points
of the Basic Multilingual Plane that Python builds from `unicodedata` and `str`'s methods: ~0.13 CPU-s in every
process that starts either pass, about 4% of a 41 MB prepare with --decontaminate (bench/RESULTS.md). Building
them faster is not on offer: each code point costs one or two C calls already (a vectorised build — the plane
joined into one string, lower-cased and classified by `re` in whole-string passes — measured slower, 25 ms
against 18 for one table). What they are depends only on the code that defines them and on Python's Unicode
database, so they are kept on disk: under RANKZERO_TABLE_CACHE where that is set (a shared disk), else in the
user's cache directory, else (neither writable) nowhere, and built per process as before. Never in the installed
package: an installation is not written to while rankzero runs (the compiled passes are built by `pip install`).

A file's name holds everything that decides its content: the Python implementation and version (whose Unicode
database `str.lower` and `unicodedata` read: its version is in the name too) and an xxh3 of the source files
that define the tables. Editing one of them, or another Python, gives another name, so a stale file is never
read; an unreadable or partial one is rebuilt and replaced. Writes go to a temporary file first and are renamed
into place, so processes building at once (Ray workers) never read half a file; the temporary of a writer killed
before its rename is removed by a later process (`remove_dead_temporaries`).

A name says what a file should hold, not what it holds: a table copied over from another installation or edited in
place keeps its name, and one with the right keys and other values would change the rows under the same fingerprint.
So each file has its digest beside it (`<file>.xxh3`: xxh3-128 of what was built, written before the file is renamed
into place), checked at every read: a file that does not match is rebuilt with one warning.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import unicodedata
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import xxhash

from rankzero.files import remove_dead_temporaries, write_atomic

logger = logging.getLogger(__name__)

# A table file's temporary is renamed milliseconds after it is made: one unchanged for this long is a killed writer's.
DEAD_TABLE_WRITE_S = 600


def cached(name: str, build: Callable[[], dict[str, np.ndarray]], sources: list[str],
           directory: Path | None = None) -> dict[str, np.ndarray]:
    """build()'s arrays, read from this installation's cache file when one exists, else built and written there.
    `sources`: the files whose code defines the arrays (their content is part of the file's name); `directory`:
    where the cache lives (default: cache_directory())."""
    directory = directory if directory is not None else cache_directory()
    if directory is None:
        return build()
    path = directory / f"{name}-{_key(sources)}.npz"
    remove_dead_temporaries(directory, f".{name}-*", DEAD_TABLE_WRITE_S)  # the table's and its digest's
    try:
        with np.load(path) as stored:
            arrays = {key: stored[key] for key in stored.files}
        expected = recorded_digest(path)
        if expected == arrays_digest(arrays):
            return arrays
        if expected is not None:  # none: an older installation's file, or the writer died between the two renames
            logger.warning("rankzero: the cached table %s is not what was built there (its digest differs: replaced or "
                           "edited), so it is built again", path)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):  # absent, or cut short by a crash: built anew
        pass
    arrays = build()
    try:
        record_digest(path, arrays_digest(arrays))
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{name}-", suffix=".npz")
        try:
            with os.fdopen(handle, "wb") as out:
                np.savez(out, **arrays)
            os.chmod(temporary, 0o644)  # mkstemp's 0600 would keep the file from the installation's other users
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError:  # read-only installation or a full disk: the tables are built per process, as without a cache
        pass
    return arrays


def arrays_digest(arrays: dict[str, np.ndarray]) -> str:
    """xxh3-128 of the arrays' names, types, shapes and bytes: the same for every build of the same tables (the
    .npz file itself is not: its zip entries carry the time they were written)."""
    digest = xxhash.xxh3_128()
    for key in sorted(arrays):
        array = np.ascontiguousarray(arrays[key])
        digest.update(f"{key}\0{array.dtype.str}\0{array.shape}\0".encode())
        digest.update(array.data)
    return digest.hexdigest()


def record_digest(path: Path, digest: str) -> None:
    """Write `digest` beside `path` (atomically), before what it describes is renamed to `path`: a reader that finds
    the file finds its digest too, or an older one that fails the check (and it builds again)."""
    write_atomic(_digest_path(path), lambda handle: handle.write(digest.encode()), mode=0o644)


def recorded_digest(path: Path) -> str | None:
    """The digest recorded beside `path` at its build, or None where there is none."""
    try:
        return _digest_path(path).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _digest_path(path: Path) -> Path:
    return path.with_name(path.name + ".xxh3")


def cache_directory() -> Path | None:
    """Where the tables are kept: RANKZERO_TABLE_CACHE where set (a shared disk), else the user's cache directory
    ($XDG_CACHE_HOME or ~/.cache, then rankzero/tables); None when that cannot be made or written."""
    user_cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    directory = Path(os.environ.get("RANKZERO_TABLE_CACHE") or user_cache / "rankzero" / "tables")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return directory if os.access(directory, os.W_OK) else None


def _key(sources: list[str]) -> str:
    digest = xxhash.xxh3_64()
    for source in sources:
        digest.update(Path(source).read_bytes())
    return f"{sys.implementation.cache_tag}-{sys.version_info.micro}-unicode{unicodedata.unidata_version}-" \
           f"{digest.hexdigest()}"
