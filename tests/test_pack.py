"""Packing: rows of exactly max_seq_length, no token lost or duplicated, document boundaries kept."""

from __future__ import annotations

import numpy as np
import pytest

from rankzero.data.encode import IGNORE_INDEX
from rankzero.data.pack import Packer


def _random_stream(rng, batches):
    for _ in range(batches):
        lengths = rng.integers(1, 40, size=rng.integers(0, 12))
        yield rng.integers(0, 1000, int(lengths.sum())).astype(np.int32), lengths.astype(np.int64)


@pytest.mark.parametrize("length", [2, 7, 64])
def test_packing_is_exact_and_loses_nothing(length):
    rng = np.random.default_rng(length)
    packer, rows, boundaries, fed, doc_lengths = Packer(length), [], [], [], []
    for ids, lengths in _random_stream(rng, 60):
        fed.append(ids)
        doc_lengths += lengths.tolist()
        blocks = packer.add(ids, lengths)
        if blocks is not None:
            rows += blocks.input_ids.to_pylist()
            boundaries += blocks.document_lengths.to_pylist()
    tail = packer.finish()
    stream = np.concatenate(fed)
    assert all(len(row) == length for row in rows)
    assert len(rows) * length + tail == len(stream) and 0 <= tail < length
    assert np.array_equal(np.concatenate(rows), stream[:len(rows) * length])
    # document_lengths are the document pieces, in order: cutting the stream at document ends and
    # block edges gives exactly these pieces.
    ends = set(np.cumsum(doc_lengths).tolist()) | set(range(0, len(rows) * length + 1, length))
    cuts = sorted(e for e in ends if e <= len(rows) * length)
    assert [p for row in boundaries for p in row] == np.diff(cuts).tolist()
    assert all(sum(row) == length for row in boundaries)


def test_packing_carries_labels_with_the_ids():
    packer = Packer(5)
    ids = np.arange(12, dtype=np.int32)
    labels = np.where(ids % 2 == 0, ids, IGNORE_INDEX).astype(np.int32)
    blocks = packer.add(ids, np.array([4, 8]), labels)
    assert blocks.labels.to_pylist() == [labels[:5].tolist(), labels[5:10].tolist()]


def test_without_packing_documents_are_split_never_truncated():
    rng = np.random.default_rng(1)
    packer, rows, boundaries, fed = Packer(8, packing=False), [], [], []
    for ids, lengths in _random_stream(rng, 30):
        fed.append(ids)
        blocks = packer.add(ids, lengths)
        if blocks is not None:
            rows += blocks.input_ids.to_pylist()
            boundaries += blocks.document_lengths.to_pylist()
    assert packer.finish() == 0
    assert np.array_equal(np.concatenate(rows), np.concatenate(fed))
    assert all(1 <= len(row) <= 8 for row in rows) and boundaries == [[len(row)] for row in rows]
