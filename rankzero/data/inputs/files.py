"""Input files as bytes: what a file's name says (compression, format), its text's size, its byte stream
(decompressed on the fly for .gz .zst .bz2 .xz), where its lines start, and what a damaged or overlong one says.

    compression_of("corpus.jsonl.zst"), format_suffix("corpus.jsonl.zst")   # ".zst", ".jsonl"
    file_format("corpus.txt", "paragraph"), file_format("corpus.csv", "line")   # "txt-paragraph", "csv"
    text_bytes("corpus.jsonl.gz")                            # the size of its text, from the header where it says
    with open_input("corpus.jsonl.zst") as handle: ...      # bytes, decompressed on the fly; `peek` works
    line_ranges("corpus.jsonl", 64 << 20), lines_before("corpus.jsonl", offset)   # byte ranges at line starts
    for raw, first_line, offset in line_pieces("corpus.jsonl", "jsonl", 1000, 16 << 20, 0, None, limit): ...
    is_json_array("corpus.json")                             # an array of records, or JSON lines
    except stream_errors() as error: raise damaged(path, "what was read of it", error)

The readers (readers.py, json_array.py) and the Ray task planner read the line and stream formats (.jsonl
.ndjson .txt .json .csv, compressed or not) only through these, so such a file is named the same way in every
error, whatever reads it (Parquet and Arrow files are opened by pyarrow in readers.py).

A compressed file of 0 bytes is an error (the standard library reads it as empty text, every command-line tool as
damaged). gzip, bz2 and xz (standard library) raise at the end of a stream cut short; zstandard's stream reader
does not (it stops at the end of the file inside an unfinished frame and returns what it decoded), so a
.zst file's frames are walked before it is read (`zstd_problem`): a file cut short is an error naming it,
never a silently shorter corpus.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from pathlib import Path

from rankzero.errors import RankzeroError

# The formats by suffix: a line format is cut into chunks at line ends, a record format read as records.
LINE_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".txt": "txt"}
RECORD_FORMATS = {".json": "json", ".parquet": "parquet", ".csv": "csv", ".arrow": "arrow"}
# Read as streams; the suffix before decides the format: corpus.jsonl.zst is JSONL.
COMPRESSIONS = (".gz", ".zst", ".bz2", ".xz")
COMPRESSION_ALIASES = {".gzip": ".gz", ".zstd": ".zst", ".bzip2": ".bz2"}  # spellings other tools write
# Korean JSONL shrinks ~3-5x under these; a compressed file's text size is estimated at 4x its bytes where its
# header does not say (progress ETA and the disk a build needs; nothing exact depends on it).
COMPRESSION_RATIO_GUESS = 4
ZSTD_SKIPPABLE_MAGIC = 0x184D2A50  # RFC 8878 §3.1.2: 0x184D2A50-5F, then a 4-byte length and that many bytes
ZSTD_BLOCK_RESERVED = 3
BOM = b"\xef\xbb\xbf"


def compression_of(path: str | os.PathLike) -> str | None:
    """The compression suffix of a file name (".gz", ".zst", ".bz2", ".xz"; .gzip, .zstd and .bzip2 alike, any
    case), or None."""
    suffix = Path(path).suffix.lower()
    suffix = COMPRESSION_ALIASES.get(suffix, suffix)
    return suffix if suffix in COMPRESSIONS else None


def format_suffix(path: str | os.PathLike) -> str:
    """The suffix that names the format: ".jsonl" for corpus.jsonl and corpus.jsonl.gz alike."""
    path = Path(path)
    return (Path(path.stem) if compression_of(path) else path).suffix.lower()


def file_format(path: str, txt_sample_by: str) -> str:
    """How a file is read: cut at line ends into chunks of a line format ('jsonl', 'txt-line', 'txt-paragraph',
    'txt-document'), or read as records of a record format ('json' for an array, 'csv', 'parquet', 'arrow')."""
    suffix = format_suffix(path)
    if suffix in LINE_FORMATS or (suffix == ".json" and not is_json_array(path)):
        fmt = LINE_FORMATS.get(suffix, "jsonl")
        return f"txt-{txt_sample_by}" if fmt == "txt" else fmt
    return RECORD_FORMATS[suffix]


def text_bytes(path: str) -> int:
    """A file's size, or for a compressed one the size of its text: from the gzip trailer (exact below 4 GiB)
    or the zstd frame header when they hold it, else an estimate."""
    size = os.path.getsize(path)
    compression = compression_of(path)
    if compression == ".gz" and size >= 18:
        with open(path, "rb") as handle:
            handle.seek(-4, os.SEEK_END)
            stored = int.from_bytes(handle.read(4), "little")  # the text size mod 2**32 (one-member files)
        return stored if stored >= size else size * COMPRESSION_RATIO_GUESS
    if compression == ".zst":
        import zstandard

        with open(path, "rb") as handle:
            try:
                stored = zstandard.frame_content_size(handle.read(18))
            except zstandard.ZstdError:
                stored = -1
        return stored if stored >= 0 else size * COMPRESSION_RATIO_GUESS
    return size * COMPRESSION_RATIO_GUESS if compression else size


def open_input(path: str) -> io.BufferedIOBase:
    """A file's bytes as a binary stream with `peek`, decompressed on the fly when compressed (gzip, bz2 and xz
    from the standard library, zstd from `zstandard`, reading across frames as `zstd -d` does)."""
    compression = compression_of(path)
    if compression and os.path.getsize(path) == 0:  # the standard library reads it as empty text; gzip -t, zstd -t,
        # bzip2 -t and xz -t all call it damaged: a download or copy that never wrote a byte
        raise RankzeroError(f"{path}: 0 bytes, which is no {compression} stream (an interrupted download or copy?); "
                            "re-download or re-compress it, or leave it out")
    if compression == ".gz":
        import gzip

        return gzip.open(path, "rb")
    if compression == ".bz2":
        import bz2

        return bz2.open(path, "rb")
    if compression == ".xz":
        import lzma

        return lzma.open(path, "rb")
    if compression == ".zst":
        import zstandard

        problem = zstd_problem(path)
        if problem:
            raise RankzeroError(f"{path}: the .zst stream is damaged: {problem}; re-download or re-compress it")
        reader = zstandard.ZstdDecompressor().stream_reader(open(path, "rb"), read_across_frames=True, closefd=True)
        return io.BufferedReader(reader, 1 << 20)
    return open(path, "rb")


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


def stream_errors() -> tuple[type[BaseException], ...]:
    """What a damaged compressed stream raises (OSError covers gzip's BadGzipFile and bz2's invalid data)."""
    import lzma

    import zstandard

    return OSError, EOFError, lzma.LZMAError, zstandard.ZstdError


def damaged(path: str, after: str, error: BaseException) -> RankzeroError:
    return RankzeroError(f"{path}: the {compression_of(path)} stream is damaged after {after} ({error}); re-download or "
                         "re-compress it")


def is_json_array(path: str) -> bool:
    """Whether a .json file holds one array of records (json_array.py) rather than JSON lines."""
    try:
        with open_input(path) as handle:
            head = handle.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    except stream_errors() as error:
        raise damaged(path, "its first bytes", error) from None
    return head.startswith(b"[")


def zstd_problem(path: str) -> str | None:
    """Why the frames of a .zst file are not whole (it ends inside one, or holds bytes that start none), or None.

    Walks the frame and block headers only (3 bytes a block of up to 128 KiB; a seek for the rest), so it costs
    a small fraction of decompressing. Hand-written: zstandard exposes no ZSTD_findFrameCompressedSize and its
    stream reader reports no unfinished frame (RFC 8878 §3.1.1 gives the layout)."""
    import zstandard

    size = os.path.getsize(path)
    with open(path, "rb") as handle:
        position = 0
        while position < size:
            frame_start = position
            handle.seek(position)
            head = handle.read(18)  # the longest frame header (ZSTD_FRAMEHEADERSIZE_MAX)
            magic = int.from_bytes(head[:4], "little")
            if len(head) >= 4 and magic & 0xFFFFFFF0 == ZSTD_SKIPPABLE_MAGIC:
                position += 8 + int.from_bytes(head[4:8].ljust(4, b"\xff"), "little")
                if position > size:
                    return _cut_short(frame_start, size)
                continue
            if len(head) < 4 or magic != zstandard.MAGIC_NUMBER:
                return f"byte {position:,} of {size:,} starts no zstd frame"
            try:
                position += zstandard.frame_header_size(head)
                checksum = zstandard.get_frame_parameters(head).has_checksum
            except zstandard.ZstdError:
                return _cut_short(frame_start, size)
            last = False
            while not last and position < size:
                handle.seek(position)
                header = int.from_bytes(handle.read(3).ljust(3, b"\xff"), "little")
                last, kind, length = bool(header & 1), (header >> 1) & 3, header >> 3
                if kind == ZSTD_BLOCK_RESERVED:
                    return f"the block at byte {position:,} has the reserved type"
                position += 3 + (1 if kind == 1 else length)  # an RLE block stores its one byte
            position += 4 * checksum
            if not last or position > size:
                return _cut_short(frame_start, size)
    return None


def _cut_short(frame_start: int, size: int) -> str:
    return (f"it ends inside the frame that starts at byte {frame_start:,} (the file has {size:,} bytes; cut short by "
            "an interrupted download or copy?)")


def too_long(path: str, line: int | None, what: str, limit: int) -> RankzeroError:
    where = f"{path}:{line}: a {what}" if line else f"{path}: the {what}"
    return RankzeroError(f"{where} is longer than {limit:,} bytes (--max_document_mb {limit / (1 << 20):.3g}): not a "
                         "document to read whole (a compression bomb, or a file with no line breaks?); split it, or "
                         "raise --max_document_mb")


def line_pieces(path: str, fmt: str, batch_size: int, chunk_bytes: int, start: int, end: int | None,
                limit: int) -> Iterator[tuple[bytes, int, int]]:
    """Cut a line file (or its bytes [start, end), both at line starts) into pieces of whole lines (or paragraphs,
    or the whole file) as raw bytes: (bytes, number of its first line, its byte offset), `batch_size` documents or
    `chunk_bytes` at most (readers.py makes each a chunk). Line numbers count from `start` (1 = its first line). A
    compressed file is read whole, from its start (a stream has no byte ranges)."""
    compressed = compression_of(path) is not None
    assert not (compressed and (start or end is not None)), "a compressed file is one range"
    try:
        with open_input(path) as handle:
            yield from _cut_lines(handle, path, fmt, batch_size, chunk_bytes, start, end, limit)
    except stream_errors() as error:
        if not compressed:
            raise
        raise damaged(path, "what was read of it", error) from None


def _cut_lines(handle, path: str, fmt: str, batch_size: int, chunk_bytes: int, start: int, end: int | None,
               limit: int) -> Iterator[tuple[bytes, int, int]]:
    """No document of more than `limit` bytes is ever held: a line is read `limit + 1` bytes at most (a 200 MB line
    inflated from a small .gz costs ~20x its size once decoded, parsed and tokenized), and a chunk is cut at
    `chunk_bytes` whatever `batch_size` says."""
    # A UTF-8 byte-order mark (Windows editors write one) is not text: skip it.
    bom = len(BOM) if start == 0 and handle.peek(len(BOM))[:len(BOM)] == BOM else 0
    handle.read(bom)
    if fmt == "txt-document":
        payload = handle.read(limit + 1)
        if len(payload) > limit:
            raise too_long(path, None, "file (one document with --txt_sample_by document)", limit)
        yield payload, 1, bom
        return
    offset = chunk_offset = max(start, bom)
    if start:
        handle.seek(offset)
    lines: list[bytes] = []
    first_line, line_no, docs = 1, 0, 0
    paragraphs, paragraph_line, paragraph_bytes, boundary = fmt == "txt-paragraph", 1, 0, True
    readline, stop = handle.readline, float("inf") if end is None else end
    while offset < stop and (line := readline(limit + 1)):
        length = len(line)
        line_no += 1
        if length > limit:
            raise too_long(path, line_no + (lines_before(path, start) if start else 0), "line", limit)
        lines.append(line)
        offset += length
        if paragraphs:
            boundary = line.strip() == b""
            docs += boundary
            paragraph_line, paragraph_bytes = (line_no + 1, 0) if boundary else (paragraph_line, paragraph_bytes + length)
            if paragraph_bytes > limit:
                raise too_long(path, paragraph_line + (lines_before(path, start) if start else 0), "paragraph", limit)
        else:
            docs += 1
        if (docs >= batch_size or offset - chunk_offset >= chunk_bytes) and boundary:
            payload = b"".join(lines)
            yield payload, first_line, chunk_offset
            lines, docs, first_line, chunk_offset = [], 0, line_no + 1, offset
    if lines:
        payload = b"".join(lines)
        yield payload, first_line, chunk_offset


