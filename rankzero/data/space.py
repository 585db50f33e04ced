"""The disk a build needs, estimated before it starts from the input size, and the check against the free space.

    space = check_free_space(cache_dir, plan.sources, plan.with_labels, near_threshold, near_memory_bytes)
    # refuses what cannot fit, warns when it may not; space.free, space.needed (bytes; None: a hub source)

handoff.py checks before building and names the estimate when a build runs out of space anyway.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

from rankzero.errors import RankzeroError
from rankzero.files import size_text

logger = logging.getLogger(__name__)

# Free space a build needs, from its input size: a token takes 4 bytes while it is built (the shuffle's
# buckets hold int32 ids and are removed as the output, 2 bytes a token with a vocabulary under 65,536, is
# written) and Korean JSONL gives a token per 2.7-3.4 bytes with 1k-16k vocabularies
# (bench/handoff_bench.py --space; larger vocabularies make fewer tokens).
BYTES_PER_TOKEN = 3
OUTPUT_BYTES_PER_TOKEN = 4
NEAR_GUESS_BYTES_PER_DOCUMENT = 1000  # for --dedup near's estimate, where a source's first chunk cannot be read


def space_needed(sources, with_labels: bool, near_threshold: float | None = None,
                 near_memory_bytes: int | None = None) -> int | None:
    """Roughly the disk a build takes at its peak, from the input size (None when a hub source hides it): its tokens
    while they are staged and, with --dedup near (`near_threshold`), that stage's files beside them."""
    sizes = [source.total_bytes() for source in sources]
    if any(size is None for size in sizes):
        return None
    per_token = OUTPUT_BYTES_PER_TOKEN * (2 if with_labels else 1)  # labels double the ids
    staged = 2 if any(source.weight is not None for source in sources) else 1  # mixing stages every token once more
    tokens = int(sum(sizes) / BYTES_PER_TOKEN * per_token * staged)
    if near_threshold is None:
        return tokens
    return tokens + near_staging_bytes(sources, sizes, near_threshold, near_memory_bytes)


def near_staging_bytes(sources, sizes: list[int], threshold: float, memory_bytes: int | None = None) -> int:
    """--dedup near's files in the build dir, there with the staged tokens until the decision: every document's
    MinHash signature (240 bytes) and, once the band keys outgrow `memory_bytes` (--dedup_memory_mb), all of them as sorted
    runs (16 bytes a band: 640 a document at 0.55). The documents are counted from each source's bytes at the
    bytes per document of its first chunk."""
    from rankzero.data.dedup.minhash import PERMUTATIONS, lsh_shape
    from rankzero.data.dedup.near import DEFAULT_MEMORY_BUDGET, ENTRY_BYTES

    documents = sum(size / _bytes_per_document(source, index) for index, (source, size) in enumerate(zip(sources, sizes)))
    keys = documents * lsh_shape(threshold)[0] * ENTRY_BYTES
    budget = DEFAULT_MEMORY_BUDGET if memory_bytes is None else memory_bytes
    return int(documents * PERMUTATIONS * 2 + (keys if keys > budget else 0))  # uint16 signatures


def _bytes_per_document(source, index: int) -> float:
    from rankzero.data.inputs.readers import iter_chunks

    chunks = iter_chunks(source, index, 256)
    try:
        chunk = next(chunks)
    except (StopIteration, RankzeroError):  # empty, or an input the build will stop on with its own error
        return NEAR_GUESS_BYTES_PER_DOCUMENT
    finally:
        chunks.close()
    documents = len(chunk.payload) if chunk.fmt == "records" else max(chunk.payload.count(b"\n"), 1)
    return max(chunk.nbytes / documents, 1.0)


@dataclass(frozen=True)
class Space:
    """What a build was checked against before it started: the `free` bytes, its estimated peak `needed` (None
    where a hub source hides the input size) and whether --dedup near's files are part of that estimate."""

    free: int
    needed: int | None
    near_dedup: bool = False

    def needed_text(self) -> str:
        if self.needed is None:
            return "the input size is not known beforehand (a hub source)"
        near = ", and --dedup near's signatures and band keys beside them" if self.near_dedup else ""
        return (f"this build needs about {size_text(self.needed)}: a token per ~{BYTES_PER_TOKEN} bytes of input, "
                f"{OUTPUT_BYTES_PER_TOKEN} bytes per prepared token{near}")


def check_free_space(cache_dir: Path, sources, with_labels: bool, near_threshold: float | None = None,
                     near_memory_bytes: int | None = None) -> Space:
    """Estimate the build's peak (space_needed), fail before the build when it cannot fit, warn when it might not."""
    space = Space(shutil.disk_usage(cache_dir).free, space_needed(sources, with_labels, near_threshold, near_memory_bytes),
                  near_threshold is not None)
    if space.needed is not None and space.free < space.needed:
        # A tokenizer with a large vocabulary (or ASCII-escaped JSON input) makes fewer tokens per byte than
        # the estimate assumes; below a third of it, a build would need 9+ input bytes per token to fit.
        message = f"--cache_dir {cache_dir}: {size_text(space.free)} free, and {space.needed_text()}"
        if space.free < space.needed / 3:
            raise RankzeroError(f"{message}; free space there, or pass another --cache_dir")
        logger.warning("%s; it may not fit", message)
    return space
