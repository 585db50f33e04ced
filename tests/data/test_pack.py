"""Packing: rows of exactly max_seq_length, no token lost or duplicated, document boundaries kept; in SFT,
rows of whole samples by best-fit decreasing."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

from rankzero.data.encode import IGNORE_INDEX
from rankzero.data.pack import BinPacker, Packer, best_fit_decreasing, truncate_documents


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


# ---------------------------------------------------------------------------------------------
# SFT: whole samples, best-fit decreasing over windows


def _samples(rng, count, longest):
    lengths = rng.integers(1, longest + 1, size=count).astype(np.int64)
    ids = rng.integers(0, 1000, int(lengths.sum())).astype(np.int32)
    labels = np.where(rng.random(len(ids)) < 0.3, IGNORE_INDEX, ids).astype(np.int32)
    return ids, lengths, labels


def _bin_rows(packer, ids, lengths, labels, cuts):
    """Feed the stream cut into batches at `cuts` (sample indices); every row as (ids, labels, document_lengths)."""
    rows, edges = [], np.concatenate([[0], np.cumsum(lengths)])
    for start, end in zip([0, *cuts], [*cuts, len(lengths)]):
        for blocks in (packer.add(ids[edges[start]:edges[end]], lengths[start:end], labels[edges[start]:edges[end]]),):
            if blocks is not None:
                rows += zip(blocks.input_ids.to_pylist(), blocks.labels.to_pylist(), blocks.document_lengths.to_pylist())
    blocks = packer.flush()
    if blocks is not None:
        rows += zip(blocks.input_ids.to_pylist(), blocks.labels.to_pylist(), blocks.document_lengths.to_pylist())
    assert packer.finish() == 0
    return rows


def test_bin_packing_keeps_every_sample_whole_in_exactly_one_row():
    rng = np.random.default_rng(5)
    ids, lengths, labels = _samples(rng, 700, 64)
    rows = _bin_rows(BinPacker(64, window=100), ids, lengths, labels, [250, 251, 600])
    edges = np.concatenate([[0], np.cumsum(lengths)])
    expected = Counter((tuple(ids[a:b]), tuple(labels[a:b])) for a, b in itertools.pairwise(edges))
    found = Counter()
    for row_ids, row_labels, row_lengths in rows:
        assert len(row_ids) == len(row_labels) == sum(row_lengths) <= 64
        cuts = np.concatenate([[0], np.cumsum(row_lengths)])
        found.update((tuple(row_ids[a:b]), tuple(row_labels[a:b])) for a, b in itertools.pairwise(cuts))
    assert found == expected  # every sample once, never cut, labels with their ids


def test_bin_packing_fills_rows_and_does_not_depend_on_the_batches():
    rng = np.random.default_rng(6)
    ids, lengths, labels = _samples(rng, 1000, 100)
    window = 250
    whole = _bin_rows(BinPacker(128, window=window), ids, lengths, labels, [])
    chunked = _bin_rows(BinPacker(128, window=window), ids, lengths, labels, sorted(rng.choice(999, 40, replace=False) + 1))
    assert whole == chunked
    # Best fit never opens a row a sample would have fitted in: within a window any two rows together hold
    # more than a row, so at most one row per window is half empty or less.
    sizes = [sum(row_lengths) for _, _, row_lengths in whole]
    assert sum(size <= 64 for size in sizes) <= len(lengths) // window
    assert sum(sizes) / (len(sizes) * 128) > 0.95  # rows are nearly full ...
    assert lengths.mean() / 128 < 0.45  # ... where a sample per row would be less than half


def test_bin_packing_refuses_a_sample_longer_than_a_row_which_truncation_cuts_at_its_end():
    ids = np.arange(12, dtype=np.int32)
    lengths = np.array([3, 9], dtype=np.int64)
    with pytest.raises(ValueError, match="longer than a row"):
        BinPacker(8).add(ids, lengths, ids.copy())
    cut_ids, cut_lengths, cut_labels, cut = truncate_documents(ids, lengths, ids + 100, 8)
    assert cut_ids.tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10] and cut_lengths.tolist() == [3, 8]
    assert cut_labels.tolist() == (cut_ids + 100).tolist() and cut.tolist() == [False, True]


def test_best_fit_decreasing_takes_the_fullest_row_that_fits():
    # The 1 goes into the row with 2 free (4 + 4), not the first row that has room (7, 3 free).
    assert best_fit_decreasing([7, 4, 4, 1], 10) == [[0], [1, 2, 3]]
    assert best_fit_decreasing([3, 7, 6], 10) == [[1, 0], [2]]  # longest first; ties and indices kept
    assert best_fit_decreasing([5, 5, 5, 5], 10) == [[0, 1], [2, 3]]
    assert best_fit_decreasing([7, 6, 4, 3], 10) == [[0, 3], [1, 2]]
