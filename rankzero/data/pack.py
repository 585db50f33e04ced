"""Blocks: turn a stream of tokenized documents into training rows, with document boundaries.

    packer = make_packer(plan.packing, whole_samples=plan.with_labels)   # Packer, or BinPacker in SFT
    rows = packer.add(ids, lengths, labels)      # Blocks completed by these documents, or None
    rows = packer.flush()                        # end of stream: rows it still completes (bin packing)
    rows = make_packer(..., per_source=True).add(ids, lengths, labels, sources)   # rows of one source each
    tail = packer.finish()                       # tokens left out
    ids, lengths, labels = packer.remainder()    # what is carried, not yet in a row (a Ray task's tail)

Pretraining packing (`--packing`, the default; `Packer`) concatenates documents (each already ends in
EOS) and cuts blocks of exactly `max_seq_length` tokens. Nothing is padded and no token is lost or
duplicated: the remainder of each batch is carried into the next, and only the final partial block is
left out (its size is returned by `finish()` and recorded in the manifest). Every block stores
`document_lengths`, the lengths of the document pieces it holds, so training can restart position
ids per document and mask attention across documents.

Why not best-fit packing for pretraining: it avoids cutting documents but pads or drops tokens; with
boundaries stored, a cut document only loses context at the block edge, and every token is trained on.

SFT (`--mode sft`; `BinPacker`) is the opposite case: a sample cut in two trains its answer without its
prompt. Rows hold whole samples, filled by best-fit decreasing over windows of `SFT_WINDOW` samples in
stream order (the window is a count of samples, so the rows do not depend on how the stream is chunked);
rows are at most `max_seq_length` long and the collator pads each batch. A sample longer than a row was
cut at its end before it gets here (`truncate_documents`, in the stage).

The validation split is packed by `SourcePacker`: a packer per source, so that every row holds one source's
text and its `document_sources` say which (training scores the held-out text per source, train/evaluation.py);
each source's final partial block is left out on its own.

Without packing each document becomes its own row, split into pieces of at most `max_seq_length`
(never silently truncated; SFT samples are truncated first, so each is one row).
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from itertools import chain

import numpy as np
import pyarrow as pa

from rankzero.config import PackingConfig
from rankzero.data.shards import list_array, numpy_view

# Samples per bin-packing window. Best-fit decreasing fills rows better the more samples it can choose
# from (bench/RESULTS.md, "SFT rows"); the window holds their tokens in memory. Changing it changes
# the rows: bump plan.FORMAT_VERSION.
SFT_WINDOW = 1000


@dataclass
class Blocks:
    """A batch of rows as Arrow columns (zero-copy views of numpy buffers)."""

    input_ids: pa.ListArray
    document_lengths: pa.ListArray
    labels: pa.ListArray | None = None
    document_sources: pa.ListArray | None = None  # the source of each document piece (the validation split)

    def __len__(self) -> int:
        return len(self.input_ids)

    def to_record_batch(self) -> pa.RecordBatch:
        columns = {"input_ids": self.input_ids, "document_lengths": self.document_lengths}
        if self.labels is not None:
            columns["labels"] = self.labels
        if self.document_sources is not None:
            columns["document_sources"] = self.document_sources
        return pa.RecordBatch.from_pydict(columns)

    def from_source(self, source: int) -> Blocks:
        """These rows with every document piece marked as `source`'s."""
        offsets = numpy_view(self.document_lengths.offsets)
        pieces = np.full(int(offsets[-1] - offsets[0]), source, dtype=np.int32)
        return dataclasses.replace(self, document_sources=list_array(offsets - offsets[0], pieces))


def concat_blocks(parts: list[Blocks]) -> Blocks | None:
    """The rows of `parts` in order, as one Blocks (None for none)."""
    if len(parts) <= 1:
        return parts[0] if parts else None
    return Blocks(*(None if getattr(parts[0], field.name) is None
                    else pa.concat_arrays([getattr(part, field.name) for part in parts])
                    for field in dataclasses.fields(Blocks)))


def select_documents(ids: np.ndarray, lengths: np.ndarray, labels: np.ndarray | None, keep: np.ndarray):
    """The documents where `keep` is true, from flat ids (and labels) and per-document lengths."""
    token_mask = np.repeat(keep, lengths)
    return ids[token_mask], lengths[keep], (labels[token_mask] if labels is not None else None)


def truncate_documents(ids: np.ndarray, lengths: np.ndarray, labels: np.ndarray | None, limit: int):
    """Every document cut to at most `limit` tokens (its end dropped): (ids, lengths, labels, which were cut)."""
    cut = lengths > limit
    if not cut.any():
        return ids, lengths, labels, cut
    kept = np.minimum(lengths, limit)
    position = np.arange(len(ids)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    mask = position < np.repeat(kept, lengths)
    return ids[mask], kept, (labels[mask] if labels is not None else None), cut


def make_packer(packing: PackingConfig, whole_samples: bool, per_source: bool = False):
    """The rows of a split: bin packing of whole samples in SFT, exact blocks for pretraining; `per_source`: each
    row one source's, a packer of its own per source (SourcePacker: the validation split)."""
    if per_source:
        return SourcePacker(lambda: make_packer(packing, whole_samples))
    if whole_samples and packing.packing:
        return BinPacker(packing.max_seq_length)
    return Packer(packing.max_seq_length, packing.packing)


class Packer:
    def __init__(self, max_seq_length: int, packing: bool = True):
        if max_seq_length < 2:
            raise ValueError(f"max_seq_length must be at least 2, got {max_seq_length}")
        self.length = max_seq_length
        self.packing = packing
        self._ids = np.empty(0, dtype=np.int32)
        self._labels: np.ndarray | None = None
        self._ends = np.empty(0, dtype=np.int64)  # document ends inside the carried remainder

    def add(self, ids: np.ndarray, lengths: np.ndarray, labels: np.ndarray | None = None) -> Blocks | None:
        """Feed documents (flat ids + per-document lengths); return the rows completed, if any."""
        if len(lengths) == 0:
            return None
        if not self.packing:
            return self._split_documents(ids, lengths, labels)
        ends = len(self._ids) + np.cumsum(lengths)
        ids = np.concatenate([self._ids, ids]) if len(self._ids) else ids
        ends = np.concatenate([self._ends, ends]) if len(self._ends) else ends
        if labels is not None:
            labels = np.concatenate([self._labels, labels]) if self._labels is not None and len(self._labels) else labels
        rows = len(ids) // self.length
        cut = rows * self.length
        self._ids, self._ends = ids[cut:].copy(), ends[ends > cut] - cut
        self._labels = labels[cut:].copy() if labels is not None else None
        if rows == 0:
            return None
        edges = np.arange(0, cut + 1, self.length, dtype=np.int64)
        cuts = np.union1d(edges, ends[ends <= cut])
        pieces = np.diff(cuts).astype(np.int32)
        pieces_per_row = np.searchsorted(cuts, edges)
        return Blocks(
            input_ids=list_array(edges, ids[:cut]),
            document_lengths=list_array(pieces_per_row, pieces),
            labels=list_array(edges, labels[:cut]) if labels is not None else None,
        )

    def _split_documents(self, ids: np.ndarray, lengths: np.ndarray, labels: np.ndarray | None) -> Blocks:
        ends = np.cumsum(lengths)
        starts = ends - lengths
        counts = -(-lengths // self.length)  # ceil: pieces per document
        first_row = np.cumsum(counts) - counts
        piece_index = np.arange(int(counts.sum())) - np.repeat(first_row, counts)
        row_starts = np.repeat(starts, counts) + piece_index * self.length
        row_ends = np.minimum(row_starts + self.length, np.repeat(ends, counts))
        offsets = np.append(row_starts, ends[-1])
        return Blocks(
            input_ids=list_array(offsets, ids),
            document_lengths=list_array(np.arange(len(row_starts) + 1), (row_ends - row_starts).astype(np.int32)),
            labels=list_array(offsets, labels) if labels is not None else None,
        )

    def remainder(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """The carried tokens not yet in a block, as (ids, piece lengths, labels): the first piece may be
        the end of a document whose start went into the last block."""
        lengths = np.diff(np.concatenate([[0], self._ends])).astype(np.int64)
        return self._ids, lengths, self._labels

    def flush(self) -> Blocks | None:
        """End of stream: no more rows; the final partial block is left out (see finish)."""
        return None

    def finish(self) -> int:
        """End of stream: the tokens of the final partial block, which are left out (0 without packing)."""
        tail = len(self._ids)
        self._ids, self._ends, self._labels = np.empty(0, dtype=np.int32), np.empty(0, dtype=np.int64), None
        return tail


class BinPacker:
    """Rows of whole samples: best-fit decreasing over each window of `window` samples, in stream order."""

    def __init__(self, max_seq_length: int, window: int = SFT_WINDOW):
        if max_seq_length < 2:
            raise ValueError(f"max_seq_length must be at least 2, got {max_seq_length}")
        self.length = max_seq_length
        self.window = window
        self._pending: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]] = []
        self._count = 0

    def add(self, ids: np.ndarray, lengths: np.ndarray, labels: np.ndarray | None = None) -> Blocks | None:
        """Feed samples (flat ids + per-sample lengths); return the rows of every window they complete."""
        if len(lengths) == 0:
            return None
        if int(lengths.max()) > self.length:
            raise ValueError(f"a sample of {int(lengths.max())} tokens is longer than a row ({self.length}): "
                             "truncate_documents first")
        self._pending.append((ids, lengths, labels))
        self._count += len(lengths)
        if self._count < self.window:
            return None
        ids, lengths, labels = self.remainder()
        whole = len(lengths) // self.window * self.window
        cut = int(lengths[:whole].sum())
        blocks = self._pack(ids[:cut], lengths[:whole], labels[:cut] if labels is not None else None)
        self._pending = [(ids[cut:], lengths[whole:], labels[cut:] if labels is not None else None)]
        self._count = len(lengths) - whole
        return blocks

    def remainder(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """The samples of the unfinished window (whole samples), not yet in a row."""
        if not self._pending:
            return np.empty(0, dtype=np.int32), np.empty(0, dtype=np.int64), None
        if len(self._pending) > 1:
            labels = [p[2] for p in self._pending]
            self._pending = [(np.concatenate([p[0] for p in self._pending]),
                              np.concatenate([p[1] for p in self._pending]),
                              None if labels[0] is None else np.concatenate(labels))]
        return self._pending[0]

    def flush(self) -> Blocks | None:
        """End of stream: the last, partial window becomes rows too (no sample is left out)."""
        ids, lengths, labels = self.remainder()
        self._pending, self._count = [], 0
        return self._pack(ids, lengths, labels) if len(lengths) else None

    def finish(self) -> int:
        """The tokens left out: those not flushed (0 after flush)."""
        tail = len(self.remainder()[0])
        self._pending, self._count = [], 0
        return tail

    def _pack(self, ids: np.ndarray, lengths: np.ndarray, labels: np.ndarray | None) -> Blocks:
        bins = []
        for start in range(0, len(lengths), self.window):
            window = lengths[start:start + self.window].tolist()
            bins += [[start + index for index in sorted(row)] for row in best_fit_decreasing(window, self.length)]
        order = np.fromiter(chain.from_iterable(bins), dtype=np.int64, count=len(lengths))
        samples = lengths[order]
        # Token i of the output comes from sample order[k]'s start plus its offset inside that sample.
        source_starts = (np.cumsum(lengths) - lengths)[order]
        output_starts = np.cumsum(samples) - samples
        gather = np.arange(int(samples.sum())) + np.repeat(source_starts - output_starts, samples)
        sample_offsets = np.concatenate([[0], np.cumsum([len(row) for row in bins])])
        row_offsets = np.concatenate([[0], np.cumsum(samples)])[sample_offsets]
        return Blocks(
            input_ids=list_array(row_offsets, ids[gather]),
            document_lengths=list_array(sample_offsets, samples.astype(np.int32)),
            labels=list_array(row_offsets, labels[gather]) if labels is not None else None,
        )


class SourcePacker:
    """Rows of one source each, their `document_sources` saying which: the validation split, scored per source.
    A packer of its own per source (`make_packer()` makes one), so each source's tail is left out on its own."""

    def __init__(self, make_packer: Callable[[], Packer | BinPacker]):
        self._make = make_packer
        self._packers: dict[int, Packer | BinPacker] = {}

    def add(self, ids: np.ndarray, lengths: np.ndarray, labels: np.ndarray | None,
            sources: np.ndarray) -> Blocks | None:
        """Feed documents and the source of each; return the rows completed, if any."""
        if len(lengths) == 0:
            return None
        starts = np.flatnonzero(np.diff(sources)) + 1  # runs of documents of one source
        firsts, lasts = np.concatenate([[0], starts]), np.concatenate([starts, [len(lengths)]])
        ends = np.concatenate([[0], np.cumsum(lengths)])
        parts = []
        for first, last in zip(firsts.tolist(), lasts.tolist()):
            source = int(sources[first])
            packer = self._packers.setdefault(source, self._make())
            tokens = slice(int(ends[first]), int(ends[last]))
            blocks = packer.add(ids[tokens], lengths[first:last], labels[tokens] if labels is not None else None)
            if blocks is not None:
                parts.append(blocks.from_source(source))
        return concat_blocks(parts)

    def flush(self) -> Blocks | None:
        parts = [(source, packer.flush()) for source, packer in sorted(self._packers.items())]
        return concat_blocks([blocks.from_source(source) for source, blocks in parts if blocks is not None])

    def finish(self) -> int:
        """The tokens left out: every source's final partial block."""
        return sum(packer.finish() for packer in self._packers.values())


def best_fit_decreasing(sizes: list[int], capacity: int) -> list[list[int]]:
    """Bins (lists of indices into `sizes`) by best-fit decreasing: longest first, each into the fullest bin
    it fits, else a new bin. Any two bins together hold more than `capacity` (else the later one's items
    would have gone into the earlier one), so at most one bin is half empty.

    Written here: twenty lines over bisect (a search among the open bins' free space, O(log bins) per
    sample), deterministic with ties in stream order. axolotl's multipack does the same job inside its
    distributed sampler, at load time; here rows are made once, when the data is prepared."""
    order = sorted(range(len(sizes)), key=lambda index: -sizes[index])  # stable: ties keep stream order
    free: list[tuple[int, int]] = []  # (free space, bin) of the bins with room left, ascending
    bins: list[list[int]] = []
    for index in order:
        size = sizes[index]
        position = bisect.bisect_left(free, (size, -1))  # the least free space that still fits
        if position < len(free):
            space, row = free.pop(position)
        else:
            space, row = capacity, len(bins)
            bins.append([])
        bins[row].append(index)
        if space > size:
            bisect.insort(free, (space - size, row))
    return bins
