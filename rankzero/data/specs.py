"""`--dataset` specs: what each names (files, a saved dataset, a hub dataset), its weight, its identity.

A spec is a local file (.jsonl .json .parquet .csv .txt .arrow), a directory (every such file below it,
or a `save_to_disk` dataset), a glob, or a hub dataset `name[:config][#revision]`. `SPEC@WEIGHT` sets the
source's share of output tokens (rankzero/data/mixing.py).

    source = resolve_source("corpus/*.jsonl@0.3")     # files found now; "no such file" with the closest name
    source.identity("stat")                           # what enters the dataset fingerprint
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rankzero.config import split_weight
from rankzero.data.walk import GLOB_CHARS, glob_files, walk_files
from rankzero.errors import RankzeroError
from rankzero.files import content_hash

LINE_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".txt": "txt"}
RECORD_FORMATS = {".json": "json", ".parquet": "parquet", ".csv": "csv", ".arrow": "arrow"}
SUPPORTED_SUFFIXES = tuple(LINE_FORMATS) + tuple(RECORD_FORMATS)
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
        return sum(os.path.getsize(p) for p in paths)


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
    if spec.startswith((".", "/", "~")) or spec.lower().endswith(SUPPORTED_SUFFIXES) or not HUB_NAME.fullmatch(name):
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
        files = sorted(p for p in walk_files(str(path)) if Path(p).suffix.lower() in SUPPORTED_SUFFIXES)
        if not files:
            raise RankzeroError(
                f"{flag} {spec}: directory {path} holds no {'/'.join(SUPPORTED_SUFFIXES)} files and is not a save_to_disk dataset"
            )
        return Source(spec, "files", str(path), weight, tuple(files), evaluation=evaluation)
    if GLOB_CHARS & set(location):
        files = glob_files(os.path.expanduser(location))
        if not files:
            raise RankzeroError(f"{flag} {spec}: the pattern matches no files")
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
        siblings = os.listdir(path.parent)
    except OSError:
        return ""
    close = difflib.get_close_matches(path.name, siblings, n=1)
    return f" (did you mean {path.parent / close[0]}?)" if close else ""


def _check_suffix(path: Path, spec: str, flag: str = "--dataset") -> None:
    if path.suffix.lower() not in SUPPORTED_SUFFIXES:
        raise RankzeroError(
            f"{flag} {spec}: {path} has an unsupported type '{path.suffix}' (supported: {' '.join(SUPPORTED_SUFFIXES)})"
        )
