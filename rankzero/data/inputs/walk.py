"""Directory walks and globs for `--dataset` specs: hidden names skipped, symlinked directories never entered.

    walk_files("corpus/")            # every file below, links to files included
    glob_files("corpus/**/*.jsonl")  # what a shell would list (`**` = any number of directories)

Directory walks and globs skip hidden names (`.git/`, `.ipynb_checkpoints/`) unless the spec names
them, and never enter a symlinked directory below the spec (a loop cannot hang them; the skipped link
is reported) — name such a directory as its own spec.
"""

from __future__ import annotations

import fnmatch
import logging
import os
from collections.abc import Iterator

logger = logging.getLogger(__name__)

GLOB_CHARS = set("*?[")

# Walking directories and globs. Hand-written because the standard library's walkers each do one thing
# wrong here: glob's `**` follows symlinked directories (a link to a parent spins forever) and
# pathlib's skips them silently; both read hidden directories (pathlib) or need Python 3.11's
# include_hidden (glob), and glob.translate (which would turn a pattern into one regex) is 3.13+.


def _hidden(name: str) -> bool:
    return name.startswith(".")


def _linked_dir(path: str) -> bool:
    if os.path.islink(path) and os.path.isdir(path):
        logger.warning("%s is a symlink to a directory: not entered (a link could loop); give it as its own --dataset "
                       "spec to include it", path)
        return True
    return False


def walk_files(top: str, others: list[str] | None = None) -> list[str]:
    """Every file below `top` (symlinks to files included), skipping hidden names and symlinked directories.
    What is neither a regular file nor a directory (a FIFO, socket or device, a symlink to nothing) is never
    opened — a FIFO would block the reader — and goes into `others`, for the caller to name."""
    found = []
    for directory, subdirs, names in os.walk(top):  # followlinks=False: os.walk never enters a linked dir
        subdirs[:] = [d for d in subdirs if not _hidden(d) and not _linked_dir(os.path.join(directory, d))]
        for path in (os.path.join(directory, n) for n in names if not _hidden(n)):
            _sort(path, found, others)
    return found


def _sort(path: str, files: list[str], others: list[str] | None) -> None:
    if os.path.isfile(path):
        files.append(path)
    elif others is not None:
        others.append(path)


def glob_files(pattern: str, others: list[str] | None = None) -> list[str]:
    """The files a shell would list for `pattern` (`**` = any number of directories), with `walk_files`' rules
    (`others` as there).

    Wildcards do not match a leading dot (as in a shell): `.git/` or `.ipynb_checkpoints/` are read only when
    the pattern spells the dot."""
    parts = pattern.split(os.sep)
    fixed = next(i for i, part in enumerate(parts) if GLOB_CHARS & set(part))
    anchor = os.sep.join(parts[:fixed]) or ("/" if pattern.startswith(os.sep) else "")
    found: list[str] = []
    for path in sorted(set(_glob(anchor, parts[fixed:]))):
        _sort(path, found, others)
    return found


def _glob(directory: str, parts: list[str]) -> Iterator[str]:
    """Every non-directory entry matching `parts` below `directory` (regular files or not: glob_files sorts)."""
    head, rest = parts[0], parts[1:]
    if head == "**":
        yield from _glob(directory, rest) if rest else ()
        for name in _list(directory):
            path = os.path.join(directory, name)
            if not _hidden(name) and os.path.isdir(path) and not _linked_dir(path):
                yield from _glob(path, parts)
            elif not rest and not _hidden(name) and not os.path.isdir(path):
                yield path
        return
    names = [head] if not GLOB_CHARS & set(head) else [
        n for n in _list(directory) if fnmatch.fnmatchcase(n, head) and (_hidden(head) or not _hidden(n))]
    for name in names:
        path = os.path.join(directory, name)
        if rest:
            if os.path.isdir(path):
                yield from _glob(path, rest)
        elif os.path.lexists(path) and not os.path.isdir(path):
            yield path


def _list(directory: str) -> list[str]:
    try:
        return sorted(os.listdir(directory or "."))
    except OSError:  # unreadable or vanished: as a shell glob, it matches nothing
        return []
