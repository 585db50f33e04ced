"""Blocks: turn a stream of tokenized documents into training rows, with document boundaries.

Packing (`--packing`, the default) concatenates documents (each already ends in EOS) and cuts
blocks of exactly `max_seq_length` tokens. Nothing is padded and no token is lost or duplicated:
the remainder of each batch is carried into the next, and only the final partial block is left
out (its size is returned by `finish()` and recorded in the manifest). Every block stores
`document_lengths`, the lengths of the document pieces it holds, so training can restart position
ids per document and mask attention across documents.

Why not best-fit packing: it avoids cutting documents but pads or drops tokens; with boundaries
stored, a cut document only loses context at the block edge, and every token is trained on.

Without packing each document becomes its own row, split into pieces of at most `max_seq_length`
(never silently truncated).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from rankzero.errors import RankzeroError


@dataclass
class Blocks:
    """A batch of rows as Arrow columns (zero-copy views of numpy buffers)."""

    input_ids: pa.ListArray
    document_lengths: pa.ListArray
    labels: pa.ListArray | None = None

    def __len__(self) -> int:
        return len(self.input_ids)

    def to_record_batch(self) -> pa.RecordBatch:
        columns = {"input_ids": self.input_ids, "document_lengths": self.document_lengths}
        if self.labels is not None:
            columns["labels"] = self.labels
        return pa.RecordBatch.from_pydict(columns)


def arrow_array(values: np.ndarray) -> pa.Array:
    """A zero-copy Arrow view of a 1-D numeric numpy array.

    Not `pa.array(values)`: that imports pandas on first use to check for pandas types (~0.4 s,
    more than preparing 2 MB takes), and the prepare path has no pandas in it.
    """
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])


def numpy_view(array: pa.Array) -> np.ndarray:
    """A zero-copy numpy view of a null-free numeric Arrow array (`Array.to_numpy` imports pandas)."""
    if array.null_count:
        raise ValueError("numpy_view: the array has nulls")
    dtype = np.dtype(array.type.to_pandas_dtype())
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * dtype.itemsize)


def list_array(offsets: np.ndarray, values: np.ndarray) -> pa.ListArray:
    """Rows `values[offsets[i]:offsets[i + 1]]` as an Arrow list column (int32 offsets, zero-copy values)."""
    return pa.ListArray.from_arrays(arrow_array(offsets.astype(np.int32)), arrow_array(values))


def select_documents(ids: np.ndarray, lengths: np.ndarray, labels: np.ndarray | None, keep: np.ndarray):
    """The documents where `keep` is true, from flat ids (and labels) and per-document lengths."""
    token_mask = np.repeat(keep, lengths)
    return ids[token_mask], lengths[keep], (labels[token_mask] if labels is not None else None)


def require_blocks(sequences: int, tail_tokens: int, max_seq_length: int) -> None:
    """Every engine's last check: at least one row came out."""
    if sequences == 0:
        raise RankzeroError(f"packing: only {tail_tokens:,} tokens survived, fewer than one block of --max_seq_length "
                            f"{max_seq_length}; add data or lower --max_seq_length")


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

    def finish(self) -> int:
        """End of stream: the tokens of the final partial block, which are left out (0 without packing)."""
        tail = len(self._ids)
        self._ids, self._ends, self._labels = np.empty(0, dtype=np.int32), np.empty(0, dtype=np.int64), None
        return tail
