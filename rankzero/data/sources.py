"""Sources: turn `--dataset` specs into a stream of chunks, never the whole corpus in memory.

A spec is a local file (.jsonl .json .parquet .csv .txt .arrow), a directory (every such file
below it, or a `save_to_disk` dataset), a glob, or a hub dataset `name[:config][#revision]`.
`SPEC@WEIGHT` sets the source's share of output tokens (see pipeline.py).

Directory walks and globs skip hidden names (`.git/`, `.ipynb_checkpoints/`) unless the spec names
them, and never enter a symlinked directory below the spec (a loop cannot hang them; the skipped
link is reported) — name such a directory as its own spec.

The reader is cheap on purpose: for line-oriented files it only cuts raw bytes at line ends
(parsing JSON and decoding UTF-8 happen in the worker processes, which also report file:line on
errors); columnar formats are read in record batches.

    for chunk in iter_chunks(resolve_source("corpus/*.jsonl"), batch_size=1000): ...
    for text in iter_texts(["a.jsonl", "b.parquet"]): ...        # serial, for small jobs and tools
"""

from __future__ import annotations

import csv
import difflib
import fnmatch
import json
import logging
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from rankzero.errors import RankzeroError

logger = logging.getLogger(__name__)

LINE_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".txt": "txt"}
RECORD_FORMATS = {".json": "json", ".parquet": "parquet", ".csv": "csv", ".arrow": "arrow"}
SUPPORTED_SUFFIXES = tuple(LINE_FORMATS) + tuple(RECORD_FORMATS)
GLOB_CHARS = set("*?[")
BOM = b"\xef\xbb\xbf"
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


@dataclass
class Chunk:
    """A unit of work for a preparation worker: raw lines of one file, or a list of records."""

    source_index: int
    path: str
    fmt: str  # "jsonl" | "txt-line" | "txt-paragraph" | "txt-document" | "records"
    payload: Any  # bytes for line formats, list[dict] for records
    first_line: int  # 1-based line (line formats) or record number (records) of the first item
    byte_offset: int = 0  # offset of payload[0] in the file (line formats)
    nbytes: int = 0


def _file_identity(path: str, content: str = "stat") -> dict[str, Any]:
    stat = os.stat(path)
    identity = {"path": os.path.abspath(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    if content != "stat":
        with open(path, "rb") as handle:
            sample = CONTENT_SAMPLE_BYTES if content == "sample" else None
            identity[f"xxh3_128_{content}"] = content_hash(handle, stat.st_size, sample)
    return identity


def content_hash(handle: BinaryIO, size: int, sample_bytes: int | None = None) -> str:
    """xxh3-128 of an open file's bytes, or of its first and last `sample_bytes` when it is larger than both
    (xxh3 hashes files 13x faster than blake2b here, at the speed files are read: bench/RESULTS.md)."""
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


def _saved_dataset_files(location: str) -> list[str]:
    return sorted(walk_files(location))


# ---------------------------------------------------------------------------------------------
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


def walk_files(top: str) -> list[str]:
    """Every file below `top` (symlinks to files included), skipping hidden names and symlinked directories."""
    found = []
    for directory, subdirs, names in os.walk(top):  # followlinks=False: os.walk never enters a linked dir
        subdirs[:] = [d for d in subdirs if not _hidden(d) and not _linked_dir(os.path.join(directory, d))]
        found += [os.path.join(directory, n) for n in names if not _hidden(n) and os.path.isfile(os.path.join(directory, n))]
    return found


def glob_files(pattern: str) -> list[str]:
    """The files a shell would list for `pattern` (`**` = any number of directories), with `walk_files`' rules.

    Wildcards do not match a leading dot (as in a shell): `.git/` or `.ipynb_checkpoints/` are read only when
    the pattern spells the dot."""
    parts = pattern.split(os.sep)
    fixed = next(i for i, part in enumerate(parts) if GLOB_CHARS & set(part))
    anchor = os.sep.join(parts[:fixed]) or ("/" if pattern.startswith(os.sep) else "")
    return sorted(set(_glob(anchor, parts[fixed:])))


def _glob(directory: str, parts: list[str]) -> Iterator[str]:
    head, rest = parts[0], parts[1:]
    if head == "**":
        yield from _glob(directory, rest) if rest else ()
        for name in _list(directory):
            path = os.path.join(directory, name)
            if not _hidden(name) and os.path.isdir(path) and not _linked_dir(path):
                yield from _glob(path, parts)
            elif not rest and not _hidden(name) and os.path.isfile(path):
                yield path
        return
    names = [head] if not GLOB_CHARS & set(head) else [
        n for n in _list(directory) if fnmatch.fnmatchcase(n, head) and (_hidden(head) or not _hidden(n))]
    for name in names:
        path = os.path.join(directory, name)
        if rest:
            if os.path.isdir(path):
                yield from _glob(path, rest)
        elif os.path.isfile(path):
            yield path


def _list(directory: str) -> list[str]:
    try:
        return sorted(os.listdir(directory or "."))
    except OSError:  # unreadable or vanished: as a shell glob, it matches nothing
        return []


def _is_saved_dataset(path: Path) -> bool:
    return (path / "state.json").is_file() or (path / "dataset_dict.json").is_file()


def _looks_like_path(spec: str) -> bool:
    """A spec that cannot be a hub id, or whose first directory exists here, names a local path."""
    name = spec.partition("#")[0].partition(":")[0]
    if spec.startswith((".", "/", "~")) or spec.lower().endswith(SUPPORTED_SUFFIXES) or not HUB_NAME.fullmatch(name):
        return True
    return "/" in name and os.path.isdir(name.split("/")[0])


def split_weight(spec: str) -> tuple[str, float | None]:
    """`SPEC@WEIGHT` → (SPEC, WEIGHT). An '@' followed by a path (`/data/user@host/a.jsonl`) is part of the path."""
    head, at, tail = spec.rpartition("@")
    if not at or "/" in tail or os.path.exists(os.path.expanduser(spec)):
        return spec, None
    try:
        weight = float(tail)
    except ValueError:
        raise RankzeroError(f"--dataset {spec}: the weight after '@' must be a number (SPEC@0.3), got '{tail}'") from None
    if not (math.isfinite(weight) and weight > 0):
        raise RankzeroError(f"--dataset {spec}: the weight after '@' must be a finite number above 0, got '{tail}'")
    return head, weight


def check_weight(spec: str) -> str | None:
    """What is wrong with a spec's `@WEIGHT`, or None: checked with the other arguments, before any work."""
    try:
        split_weight(spec)
    except RankzeroError as error:
        return str(error)
    return None


def resolve_source(spec: str) -> Source:
    """Resolve one spec; a path that does not exist or a glob that matches nothing is an error."""
    location, weight = split_weight(spec)
    path = Path(os.path.expanduser(location))
    if path.is_file():
        _check_suffix(path, spec)
        return Source(spec, "files", str(path), weight, (str(path),))
    if path.is_dir():
        if _is_saved_dataset(path):
            return Source(spec, "saved", str(path), weight)
        files = sorted(p for p in walk_files(str(path)) if Path(p).suffix.lower() in SUPPORTED_SUFFIXES)
        if not files:
            raise RankzeroError(
                f"--dataset {spec}: directory {path} holds no {'/'.join(SUPPORTED_SUFFIXES)} files and is not a save_to_disk dataset"
            )
        return Source(spec, "files", str(path), weight, tuple(files))
    if GLOB_CHARS & set(location):
        files = glob_files(os.path.expanduser(location))
        if not files:
            raise RankzeroError(f"--dataset {spec}: the pattern matches no files")
        for file in files:
            _check_suffix(Path(file), spec)
        return Source(spec, "files", location, weight, tuple(files))
    if _looks_like_path(location):
        raise RankzeroError(f"--dataset {spec}: no such file or directory: {path}{_did_you_mean(path)}")
    name, _, revision = location.partition("#")
    name, _, config = name.partition(":")
    return Source(spec, "hub", name, weight, hub_config=config or None, hub_revision=revision or None)


def _did_you_mean(path: Path) -> str:
    try:
        siblings = os.listdir(path.parent)
    except OSError:
        return ""
    close = difflib.get_close_matches(path.name, siblings, n=1)
    return f" (did you mean {path.parent / close[0]}?)" if close else ""


def _check_suffix(path: Path, spec: str) -> None:
    if path.suffix.lower() not in SUPPORTED_SUFFIXES:
        raise RankzeroError(
            f"--dataset {spec}: {path} has an unsupported type '{path.suffix}' (supported: {' '.join(SUPPORTED_SUFFIXES)})"
        )


# ---------------------------------------------------------------------------------------------
# Chunk readers. Each yields Chunks of about `batch_size` documents and holds at most one in memory.


def iter_chunks(source: Source, source_index: int, batch_size: int, txt_sample_by: str = "line") -> Iterator[Chunk]:
    if source.kind == "files":
        for path in source.files:
            yield from iter_file_chunks(path, source_index, batch_size, txt_sample_by)
    elif source.kind == "saved":
        yield from _record_chunks(source.location, source_index, _iter_saved_records(source.location), batch_size)
    else:
        yield from _record_chunks(source.location, source_index, _iter_hub_records(source), batch_size)


def iter_file_chunks(path: str, source_index: int, batch_size: int, txt_sample_by: str = "line", start: int = 0,
                     end: int | None = None) -> Iterator[Chunk]:
    """One file's chunks; for line formats optionally only bytes [start, end) (see `line_ranges`)."""
    fmt = line_format(path, txt_sample_by)
    if fmt is not None:
        yield from _line_chunks(path, source_index, fmt, batch_size, start, end)
    else:
        yield from _record_chunks(path, source_index, _iter_file_records(path, Path(path).suffix.lower()), batch_size)


def line_ranges(path: str, target_bytes: int, paragraphs: bool = False) -> list[tuple[int, int]]:
    """[start, end) byte ranges of about `target_bytes` covering the file, each starting at a line start
    (after a blank line with `paragraphs`), so ranges can be read independently."""
    size = os.path.getsize(path)
    starts = [0]
    with open(path, "rb") as handle:
        while starts[-1] + target_bytes < size:
            handle.seek(starts[-1] + target_bytes)
            handle.readline()  # to the next line start
            if paragraphs:
                while (line := handle.readline()) and line.strip():
                    pass
            position = handle.tell()
            if position >= size:
                break
            starts.append(position)
    return list(zip(starts, starts[1:] + [size]))


def lines_before(path: str, offset: int) -> int:
    """How many lines end before byte `offset` (to turn a range's line numbers into the file's)."""
    count, done = 0, 0
    with open(path, "rb") as handle:
        while done < offset:
            block = handle.read(min(1 << 24, offset - done))
            if not block:
                break
            count += block.count(b"\n")
            done += len(block)
    return count


def _is_json_array(path: str) -> bool:
    with open(path, "rb") as handle:
        head = handle.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"[")


def line_format(path: str, txt_sample_by: str) -> str | None:
    """The chunk format of a line-oriented file ('jsonl', 'txt-line', …), or None for record formats."""
    suffix = Path(path).suffix.lower()
    if suffix in LINE_FORMATS or (suffix == ".json" and not _is_json_array(path)):
        fmt = LINE_FORMATS.get(suffix, "jsonl")
        return f"txt-{txt_sample_by}" if fmt == "txt" else fmt
    return None


def _line_chunks(path: str, source_index: int, fmt: str, batch_size: int, start: int = 0,
                 end: int | None = None) -> Iterator[Chunk]:
    """Cut a file (or its bytes [start, end), both at line starts) into chunks of whole lines (or
    paragraphs, or the whole file) as raw bytes. Line numbers count from `start` (1 = its first line)."""
    with open(path, "rb") as handle:
        # A UTF-8 byte-order mark (Windows editors write one) is not text: skip it.
        bom = len(BOM) if start == 0 and handle.read(len(BOM)) == BOM else 0
        if fmt == "txt-document":
            handle.seek(bom)
            payload = handle.read()
            yield Chunk(source_index, path, fmt, payload, 1, bom, len(payload))
            return
        offset = chunk_offset = max(start, bom)
        handle.seek(offset)
        lines: list[bytes] = []
        first_line, line_no, docs = 1, 0, 0
        for line in handle:
            if end is not None and offset >= end:
                break
            line_no += 1
            lines.append(line)
            offset += len(line)
            if fmt == "txt-paragraph":
                docs += line.strip() == b""
            else:
                docs += 1
            if docs >= batch_size and (fmt != "txt-paragraph" or line.strip() == b""):
                payload = b"".join(lines)
                yield Chunk(source_index, path, fmt, payload, first_line, chunk_offset, len(payload))
                lines, docs, first_line, chunk_offset = [], 0, line_no + 1, offset
        if lines:
            payload = b"".join(lines)
            yield Chunk(source_index, path, fmt, payload, first_line, chunk_offset, len(payload))


def _record_chunks(path: str, source_index: int, records: Iterator[dict], batch_size: int) -> Iterator[Chunk]:
    batch: list[dict] = []
    first = 1
    for number, record in enumerate(records, start=1):
        batch.append(record)
        if len(batch) >= batch_size:
            yield Chunk(source_index, path, "records", batch, first, nbytes=_approx_bytes(batch))
            batch, first = [], number + 1
    if batch:
        yield Chunk(source_index, path, "records", batch, first, nbytes=_approx_bytes(batch))


def _approx_bytes(records: list[dict]) -> int:
    return sum(len(v) for r in records for v in r.values() if isinstance(v, str))


def _iter_file_records(path: str, suffix: str) -> Iterator[dict]:
    if suffix == ".json":
        # A JSON array is read whole (JSON has no streaming boundary): use .jsonl for large corpora.
        with open(path, encoding="utf-8-sig") as handle:  # -sig: skips a byte-order mark
            try:
                data = json.load(handle)
            except json.JSONDecodeError as error:
                raise RankzeroError(f"{path}:{error.lineno}: malformed JSON ({error.msg}, column {error.colno})") from None
        for index, record in enumerate(data, start=1):
            if not isinstance(record, dict):
                raise RankzeroError(f"{path}: item {index} of the JSON array is {type(record).__name__}, expected an object")
            yield record
    elif suffix == ".csv":
        with open(path, encoding="utf-8-sig", newline="") as handle:  # -sig: no '\ufefftext' column
            yield from csv.DictReader(handle)
    elif suffix == ".parquet":
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(path).iter_batches(batch_size=1024):
            yield from batch.to_pylist()
    elif suffix == ".arrow":
        import pyarrow as pa

        try:
            reader = pa.ipc.open_stream(pa.OSFile(path))
        except pa.ArrowInvalid:
            reader = pa.ipc.open_file(pa.OSFile(path))
            for index in range(reader.num_record_batches):
                yield from reader.get_batch(index).to_pylist()
            return
        for batch in reader:
            yield from batch.to_pylist()


def _iter_saved_records(location: str) -> Iterator[dict]:
    import datasets

    loaded = datasets.load_from_disk(location)
    if isinstance(loaded, datasets.DatasetDict):
        if "train" not in loaded:
            raise RankzeroError(f"--dataset {location}: a DatasetDict without a 'train' split (splits: {list(loaded)})")
        loaded = loaded["train"]
    for batch in loaded.iter(batch_size=1024):
        columns = list(batch)
        for row in zip(*(batch[c] for c in columns)):
            yield dict(zip(columns, row))


def _iter_hub_records(source: Source) -> Iterator[dict]:
    import datasets

    try:
        stream = datasets.load_dataset(
            source.location, source.hub_config, split="train", streaming=True, revision=source.hub_revision
        )
    except Exception as error:  # the hub client raises many types; name the source in one message
        raise RankzeroError(f"--dataset {source.spec}: could not open hub dataset '{source.location}': {error}") from error
    yield from stream


def iter_texts(specs: list[str], text_column: str | None = None, txt_sample_by: str = "line",
               chat_template: str | None = None, special_tokens: dict | None = None) -> Iterator[str]:
    """Serial stream of document texts (records→text applied) from `--dataset`-style specs."""
    from rankzero.data.records import ChatRenderer, chunk_documents

    renderer = ChatRenderer(chat_template, special_tokens or {})
    for index, spec in enumerate(specs):
        source = resolve_source(spec)
        for chunk in iter_chunks(source, index, batch_size=256, txt_sample_by=txt_sample_by):
            for segments in chunk_documents(chunk, text_column, renderer).documents:
                yield "".join(text for text, _ in segments)
