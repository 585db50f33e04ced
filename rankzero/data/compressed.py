"""Compressed inputs (.gz .zst .bz2 .xz) as decompressed byte streams, and what a damaged one says.

    with open_input("corpus.jsonl.zst") as handle: ...      # bytes, decompressed on the fly; `peek` works
    except stream_errors() as error: raise damaged(path, "what was read of it", error)

gzip, bz2 and xz (standard library) raise at the end of a stream cut short; zstandard's stream reader
does not (it stops at the end of the file inside an unfinished frame and returns what it decoded), so a
.zst file's frames are walked before it is read (`zstd_problem`): a file cut short is an error naming it,
never a silently shorter corpus.
"""

from __future__ import annotations

import io
import os

from rankzero.data.specs import compression_of
from rankzero.errors import RankzeroError

ZSTD_SKIPPABLE_MAGIC = 0x184D2A50  # RFC 8878 §3.1.2: 0x184D2A50-5F, then a 4-byte length and that many bytes
ZSTD_BLOCK_RESERVED = 3


def open_input(path: str) -> io.BufferedIOBase:
    """A file's bytes as a binary stream with `peek`, decompressed on the fly when compressed (gzip, bz2 and xz
    from the standard library, zstd from `zstandard`, reading across frames as `zstd -d` does)."""
    compression = compression_of(path)
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


def stream_errors() -> tuple[type[BaseException], ...]:
    """What a damaged compressed stream raises (OSError covers gzip's BadGzipFile and bz2's invalid data)."""
    import lzma

    import zstandard

    return OSError, EOFError, lzma.LZMAError, zstandard.ZstdError


def damaged(path: str, after: str, error: BaseException) -> RankzeroError:
    return RankzeroError(f"{path}: the {compression_of(path)} stream is damaged after {after} ({error}); re-download or "
                         "re-compress it")


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
