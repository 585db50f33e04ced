"""Chunk readers: a source's documents as a stream of chunks, never the whole corpus in memory.

    for chunk in iter_chunks(resolve_source("corpus/*.jsonl"), source_index=0, batch_size=1000): ...
    for text in iter_texts(["a.jsonl", "b.parquet"]): ...        # serial, for small jobs and tools
    for documents in lenient_documents(source, 0, reading, renderer, 64): ...   # the builder's look before it builds

Compressed files (.gz .zst .bz2 .xz after the format's suffix) are decompressed as a stream
(inputs/files.py: `open_input`): memory does not grow with the file, and a damaged stream is an error naming the file.

The reader is cheap on purpose: for line-oriented files it only cuts raw bytes at line ends (files.line_pieces,
beside the opening and the errors of the file it cuts; parsing JSON and decoding UTF-8 happen in the stage, which
also reports file:line on errors); columnar formats are read in record batches. A line file's bytes [start, end)
can be read on their own (the Ray engine's tasks: files.line_ranges cuts them).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rankzero.data.inputs.files import RECORD_FORMATS, damaged, file_format, line_pieces, open_input, stream_errors
from rankzero.data.inputs.json_array import json_array_records
from rankzero.data.inputs.specs import Source, resolve_source
from rankzero.errors import RankzeroError

# The longest line, paragraph, .txt document or CSV field read (--max_document_mb): past it, an error naming the
# file and line. Reading, decoding, parsing and tokenizing a document holds ~20x its bytes at once: 64 MiB of
# text is about a GB, a 200 MB line from a 200 KB .gz (a compression bomb) would be 4.
MAX_DOCUMENT_BYTES = 64 << 20
# A chunk of a line file is cut here too, whatever the batch size: a thousand long lines are not one chunk.
CHUNK_BYTES = 16 << 20


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


def iter_chunks(source: Source, source_index: int, batch_size: int, txt_sample_by: str = "line",
                max_document_bytes: int = MAX_DOCUMENT_BYTES) -> Iterator[Chunk]:
    if source.kind == "files":
        for path in source.files:
            yield from iter_file_chunks(path, source_index, batch_size, txt_sample_by,
                                        max_document_bytes=max_document_bytes)
    elif source.kind == "saved":
        yield from _record_chunks(source.location, source_index, _iter_saved_records(source.location), batch_size)
    else:
        yield from _record_chunks(source.location, source_index, _iter_hub_records(source), batch_size)


def iter_file_chunks(path: str, source_index: int, batch_size: int, txt_sample_by: str = "line", start: int = 0,
                     end: int | None = None, max_document_bytes: int = MAX_DOCUMENT_BYTES) -> Iterator[Chunk]:
    """One file's chunks; for line formats optionally only bytes [start, end) (see `files.line_ranges`)."""
    fmt = file_format(path, txt_sample_by)
    if fmt not in RECORD_FORMATS.values():  # a line format: cut at line ends
        for payload, first_line, offset in line_pieces(path, fmt, batch_size, CHUNK_BYTES, start, end,
                                                       max_document_bytes):
            yield Chunk(source_index, path, fmt, payload, first_line, offset, len(payload))
    else:
        yield from _record_chunks(path, source_index, _iter_file_records(path, fmt, max_document_bytes), batch_size)


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


def _iter_file_records(path: str, fmt: str, max_document_bytes: int = MAX_DOCUMENT_BYTES) -> Iterator[dict]:
    """The records of a file of a record format (files.file_format: 'json', 'csv', 'parquet' or 'arrow')."""
    if fmt == "json":
        for _, record in json_array_records(path, max_document_bytes):
            yield record
    elif fmt == "csv":
        # -sig: no '\ufefftext' column
        csv.field_size_limit(max_document_bytes)  # the csv module's own is 128 KiB: a long article is one field
        with io.TextIOWrapper(open_input(path), encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            try:
                yield from reader
            except stream_errors() as error:
                raise damaged(path, "what was read of it", error) from None
            except csv.Error as error:  # a field past the limit, a NUL byte, a quote left open at the end
                raise RankzeroError(f"{path}:{reader.reader.line_num}: malformed CSV ({error}); fix the file, or raise "
                                    "--max_document_mb for a field that long") from None
    elif fmt in ("parquet", "arrow"):
        import pyarrow as pa

        kind, article = ("Parquet", "a") if fmt == "parquet" else ("Arrow", "an")
        try:
            for batch in _parquet_batches(path) if fmt == "parquet" else _arrow_batches(path):
                yield from batch.to_pylist()
        except (pa.ArrowException, OSError, UnicodeDecodeError) as error:  # a string column's bytes changed: not UTF-8
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise RankzeroError(f"{path}: cannot be read as {kind} ({reason}): cut short, damaged, or not {article} "
                                f"{kind} file; re-download or re-write it") from None


def _parquet_batches(path: str):
    import pyarrow.parquet as pq

    yield from pq.ParquetFile(path).iter_batches(batch_size=1024)


def _arrow_batches(path: str):
    """The record batches of an Arrow IPC stream (what `datasets` writes) or file (random access format)."""
    import pyarrow as pa

    try:
        reader = pa.ipc.open_stream(pa.OSFile(path))
    except pa.ArrowInvalid:
        reader = pa.ipc.open_file(pa.OSFile(path))
        for index in range(reader.num_record_batches):
            yield reader.get_batch(index)
        return
    yield from reader


def _iter_saved_records(location: str) -> Iterator[dict]:
    import datasets
    import pyarrow as pa

    # What a damaged save_to_disk dir raises from inside `datasets` and pyarrow (measured: a cut or
    # overwritten .arrow file, one deleted, a state.json or dataset_info.json that does not parse or holds
    # the wrong types): one error naming the directory, not a traceback.
    damage = (pa.ArrowException, OSError, ValueError, TypeError, KeyError)

    def failed(error: BaseException) -> RankzeroError:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        return RankzeroError(f"{location}: cannot be read as a save_to_disk dataset ({type(error).__name__}: {reason}): "
                             "a file of it is cut short, missing or damaged; save it again")

    try:
        loaded = datasets.load_from_disk(location)
    except damage as error:
        raise failed(error) from None
    if isinstance(loaded, datasets.DatasetDict):
        if "train" not in loaded:
            raise RankzeroError(f"--dataset {location}: a DatasetDict without a 'train' split (splits: {list(loaded)})")
        loaded = loaded["train"]
    batches = loaded.iter(batch_size=1024)
    while True:
        try:
            batch = next(batches, None)
        except damage as error:
            raise failed(error) from None
        if batch is None:
            return
        columns = list(batch)
        for row in zip(*(batch[c] for c in columns)):
            yield dict(zip(columns, row))


HUB_CHECK_TIMEOUT_S = 2.0


def check_hub_sources(sources: list[Source]) -> None:
    """Before a build streams a hub dataset: one metadata request, given HUB_CHECK_TIMEOUT_S. Offline, the hub
    client would retry for ~45 s, logging every try, and end on the same failure; with HF_HUB_OFFLINE=1
    `datasets` reads its cache (or says it has none) at once, so nothing is asked then."""
    hub = [source for source in sources if source.kind == "hub"]
    if not hub:
        return
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

    if constants.HF_HUB_OFFLINE:
        return
    for source in hub:
        flag = "--eval_dataset" if source.evaluation else "--dataset"
        try:
            HfApi().dataset_info(source.location, revision=source.hub_revision, timeout=HUB_CHECK_TIMEOUT_S)
        except (GatedRepoError, RevisionNotFoundError, RepositoryNotFoundError, HfHubHTTPError) as error:
            reason = str(error).splitlines()[0]
            raise RankzeroError(f"{flag} {source.spec}: the hub answered for dataset '{source.location}': {reason}; "
                                f"check the name (a local path starts with ./ or /), the revision, or your token "
                                "(hf auth login)") from None
        except Exception as error:  # no network: DNS, refused or timed out connections (httpx's errors)
            raise RankzeroError(
                f"{flag} {source.spec}: names a hub dataset, and {constants.ENDPOINT} cannot be reached from here "
                f"({type(error).__name__}: {error}); give a local file or directory (no {source.location} here), "
                "a dataset saved with save_to_disk, or set HF_HUB_OFFLINE=1 to read a copy cached earlier") from None


def _iter_hub_records(source: Source) -> Iterator[dict]:
    import datasets

    flag = "--eval_dataset" if source.evaluation else "--dataset"
    try:
        stream = datasets.load_dataset(
            source.location, source.hub_config, split="train", streaming=True, revision=source.hub_revision
        )
    except Exception as error:  # the hub client raises many types; name the source in one message
        if datasets.config.HF_HUB_OFFLINE:  # offline clusters set it: the cache is all there is
            raise RankzeroError(
                f"{flag} {source.spec}: names a hub dataset, and the hub is off (HF_HUB_OFFLINE or HF_DATASETS_OFFLINE "
                f"is set) with no copy of '{source.location}' cached in {datasets.config.HF_DATASETS_CACHE}; give a "
                f"local file or directory (no {source.location} here), a dataset saved with save_to_disk, or fetch it "
                "once where the hub can be reached (HF_HOME names the cache)") from None
        raise RankzeroError(f"{flag} {source.spec}: could not open hub dataset '{source.location}': {error}") from error
    yield from stream


def lenient_documents(source: Source, source_index: int, reading, renderer, batch_size: int) -> Iterator[list]:
    """Each chunk's documents (their (text, trained) segments) as the stage renders them, read as `reading`
    (plan.Reading) says, for the builder's look at the corpus before it builds (the tokenizer-engine check's sample,
    the held-out file): a bad record or byte is passed over, where the build itself stops on it, naming it."""
    from rankzero.data.inputs.records import chunk_documents

    for chunk in iter_chunks(source, source_index, batch_size, reading.txt_sample_by, reading.max_document_bytes):
        yield chunk_documents(chunk, reading.text_column, renderer, with_masks=reading.with_masks,
                              skip_bad_records=True, on_decode_error="replace").documents


def iter_texts(specs: list[str], text_column: str | None = None, txt_sample_by: str = "line",
               chat_template: str | None = None, special_tokens: dict | None = None) -> Iterator[str]:
    """Serial stream of document texts (records→text applied) from `--dataset`-style specs."""
    from rankzero.data.inputs.records import ChatRenderer, chunk_documents

    renderer = ChatRenderer(chat_template, special_tokens or {})
    for index, spec in enumerate(specs):
        source = resolve_source(spec)
        for chunk in iter_chunks(source, index, batch_size=256, txt_sample_by=txt_sample_by):
            for segments in chunk_documents(chunk, text_column, renderer).documents:
                yield "".join(text for text, _ in segments)
