"""`--dataset` specs: what each names (files, a saved dataset, a hub dataset), its weight, its identity.

A spec is a local file (.jsonl .json .parquet .csv .txt .arrow; the text formats also compressed: .gz .zst
.bz2 .xz, e.g. corpus.jsonl.zst), a directory (every such file below it,
or a `save_to_disk` dataset), a glob, or a hub dataset `name[:config][#revision]`. `SPEC@WEIGHT` sets the
source's share of output tokens (rankzero/data/mixing.py).

    source = resolve_source("corpus/*.jsonl@0.3")     # files found now; "no such file" with the closest name
    source.identity("stat")                           # what enters the dataset fingerprint
"""

from __future__ import annotations

import difflib
import logging
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rankzero.config import split_weight
from rankzero.data.inputs.files import (COMPRESSIONS, LINE_FORMATS, RECORD_FORMATS, compression_of, format_suffix,
                                        text_bytes)
from rankzero.data.inputs.walk import GLOB_CHARS, glob_files, walk_files
from rankzero.errors import RankzeroError
from rankzero.files import content_hash

logger = logging.getLogger(__name__)

SUPPORTED_SUFFIXES = tuple(LINE_FORMATS) + tuple(RECORD_FORMATS)
ARCHIVES = (".tar", ".tgz", ".zip", ".7z", ".rar")  # many files in one: rankzero reads none of them
# The formats that can be read as a stream, and so compressed (inputs/files.py); Parquet and Arrow compress inside
# the file: not with these.
STREAM_SUFFIXES = (".jsonl", ".ndjson", ".txt", ".json", ".csv")
# What a hub dataset id looks like: `name` or `namespace/name`, no other slashes.
HUB_NAME = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")
CONTENT_SAMPLE_BYTES = 1 << 20  # --fingerprint_content sample: this much of each file's head and tail


@dataclass(frozen=True)
class Source:
    """One resolved `--dataset` spec."""

    spec: str
    kind: str  # "files" | "saved" | "hub"
    location: str
    weight: float | None = None
    files: tuple[str, ...] = ()
    hub_config: str | None = None
    hub_revision: str | None = None
    evaluation: bool = False  # an --eval_dataset source: every document goes to the validation split

    def identity(self, content: str = "stat") -> dict[str, Any]:
        """What makes this source's content what it is: enters the dataset fingerprint.

        `content` (--fingerprint_content): "stat" is path + size + mtime; "sample" adds a hash of each
        file's first and last MiB (an edit that keeps size and mtime is seen at its ends); "full" hashes
        every byte."""
        if self.kind == "hub":
            return {"hub": self.location, "config": self.hub_config, "revision": self.hub_revision or "main"}
        paths = self.files if self.kind == "files" else _saved_dataset_files(self.location)
        return {"files": [_file_identity(p, content) for p in paths]}

    def total_bytes(self) -> int | None:
        if self.kind == "hub":
            return None
        paths = self.files if self.kind == "files" else _saved_dataset_files(self.location)
        return sum(map(text_bytes, paths))


def _file_identity(path: str, content: str = "stat") -> dict[str, Any]:
    stat = os.stat(path)
    identity = {"path": os.path.abspath(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    if content != "stat":
        with open(path, "rb") as handle:
            sample = CONTENT_SAMPLE_BYTES if content == "sample" else None
            identity[f"xxh3_128_{content}"] = content_hash(handle, stat.st_size, sample)
    return identity


def _saved_dataset_files(location: str) -> list[str]:
    return sorted(walk_files(location))


def _is_saved_dataset(path: Path) -> bool:
    return (path / "state.json").is_file() or (path / "dataset_dict.json").is_file()


def _looks_like_path(spec: str) -> bool:
    """A spec that cannot be a hub id, or whose first directory exists here, names a local path."""
    name = spec.partition("#")[0].partition(":")[0]
    if spec.startswith((".", "/", "~")) or format_suffix(name) in SUPPORTED_SUFFIXES or not HUB_NAME.fullmatch(name):
        return True
    return "/" in name and os.path.isdir(name.split("/")[0])


def resolve_source(spec: str, evaluation: bool = False) -> Source:
    """Resolve one spec (of --dataset, or of --eval_dataset with `evaluation`); a path that does not exist or a
    glob that matches nothing is an error naming the flag."""
    flag = "--eval_dataset" if evaluation else "--dataset"
    try:
        location, weight = split_weight(spec)
    except ValueError as error:
        raise RankzeroError(str(error)) from None
    path = Path(os.path.expanduser(location))
    if path.is_file():
        _check_suffix(path, spec, flag)
        return Source(spec, "files", str(path), weight, (str(path),), evaluation=evaluation)
    if path.is_dir():
        if _is_saved_dataset(path):
            return Source(spec, "saved", str(path), weight, evaluation=evaluation)
        others: list[str] = []
        found = sorted(walk_files(str(path), others))
        files = [p for p in found if _readable_type(Path(p))]
        skipped = [f"{p} ({_unread_reason(Path(p))})" for p in found if not _readable_type(Path(p))]
        skipped += [f"{p} ({_file_kind(Path(p))})" for p in sorted(others)]
        if not files:
            raise RankzeroError(
                f"{flag} {spec}: directory {path} holds no {'/'.join(SUPPORTED_SUFFIXES)} files and is not a save_to_disk "
                f"dataset{f'; not read: {_listed(skipped)}' if skipped else ''}")
        if skipped:
            logger.warning("%s %s: %d file(s) below it are not read: %s", flag, spec, len(skipped), _listed(skipped))
        return Source(spec, "files", str(path), weight, tuple(files), evaluation=evaluation)
    if os.path.lexists(path):  # a FIFO, socket or device, or a symlink to nothing
        raise RankzeroError(f"{flag} {spec}: {path} is {_file_kind(path)}: rankzero reads regular files, directories "
                            "and globs of them")
    if GLOB_CHARS & set(location):
        others: list[str] = []
        files = glob_files(os.path.expanduser(location), others)
        unread = f"; not read: {_listed([f'{p} ({_file_kind(Path(p))})' for p in others])}" if others else ""
        if not files:
            raise RankzeroError(f"{flag} {spec}: the pattern matches no files{unread}")
        if others:
            logger.warning("%s %s: the pattern matches %d entries that are not regular files%s", flag, spec,
                           len(others), unread)
        for file in files:
            _check_suffix(Path(file), spec, flag)
        return Source(spec, "files", location, weight, tuple(files), evaluation=evaluation)
    if _looks_like_path(location):
        raise RankzeroError(f"{flag} {spec}: no such file or directory: {path}{_did_you_mean(path)}")
    name, _, revision = location.partition("#")
    name, _, config = name.partition(":")
    return Source(spec, "hub", name, weight, hub_config=config or None, hub_revision=revision or None,
                  evaluation=evaluation)


def _did_you_mean(path: Path) -> str:
    try:
        siblings = [name for name in os.listdir(path.parent) if name != path.name]
    except OSError:
        return ""
    close = difflib.get_close_matches(path.name, siblings, n=1)
    return f" (did you mean {path.parent / close[0]}?)" if close else ""


def _file_kind(path: Path) -> str:
    if not path.exists():  # a symlink to nothing
        return f"a symlink to {os.readlink(path)}, which is missing"
    mode = os.stat(path).st_mode
    return ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")


def _unread_reason(path: Path) -> str:
    """Why a file found in a directory is not read, for the warning that lists them."""
    name = path.name.lower()
    if any(name.endswith(archive) or f"{archive}." in name for archive in ARCHIVES):
        return "an archive: unpack it"
    if compression_of(path) and format_suffix(path) in SUPPORTED_SUFFIXES:
        return f"a compressed {format_suffix(path)} cannot be read as a stream"
    return f"type '{''.join(path.suffixes[-2:]) or path.name}' is not read"


def _listed(items: list[str], most: int = 10) -> str:
    more = f"; and {len(items) - most} more" if len(items) > most else ""
    return "; ".join(items[:most]) + more


def _readable_type(path: Path) -> bool:
    suffix = format_suffix(path)
    return suffix in (STREAM_SUFFIXES if compression_of(path) else SUPPORTED_SUFFIXES)


def _check_suffix(path: Path, spec: str, flag: str = "--dataset") -> None:
    if _readable_type(path):
        return
    if compression_of(path) and format_suffix(path) in SUPPORTED_SUFFIXES:
        raise RankzeroError(f"{flag} {spec}: {path}: a compressed {format_suffix(path)} file cannot be read as a stream "
                            f"({format_suffix(path)} compresses inside the file); decompress it, or use "
                            f"{'/'.join(STREAM_SUFFIXES)} with {'/'.join(COMPRESSIONS)}")
    raise RankzeroError(
        f"{flag} {spec}: {path} has an unsupported type '{''.join(path.suffixes[-2:]) or path.name}' (supported: "
        f"{' '.join(SUPPORTED_SUFFIXES)}, and {' '.join(STREAM_SUFFIXES)} compressed with {' '.join(COMPRESSIONS)})")
