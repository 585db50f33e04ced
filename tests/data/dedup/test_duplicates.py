"""Exact dedup's sorted runs (dedup/exact.py) against a plain Python set, the rule they replace.

The prepares that go through it (both engines, via split.py) are tested in test_split.py,
test_prepare_dedup.py and test_ray_engine.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from rankzero.data.dedup.exact import MERGE_RATIO, ExactDuplicates

EDGES = np.array([0, 1, 2 ** 63 - 1, 2 ** 63, 2 ** 64 - 2, 2 ** 64 - 1], dtype=np.uint64)


def reference_keep(seen: set[int], hashes: np.ndarray) -> np.ndarray:
    """The rule, one document at a time: first one wins."""
    keep = []
    for digest in hashes.tolist():
        keep.append(digest not in seen)
        seen.add(digest)
    return np.array(keep, dtype=bool)


def chunks_with_repeats(rng: np.random.Generator, count: int):
    """Chunks of 0 to ~300 hashes (sizes 0 and 1 often): fresh values, the edge values, and repeats of
    earlier values, from this chunk and from earlier ones."""
    earlier = np.empty(0, dtype=np.uint64)
    for _ in range(count):
        size = int(rng.choice([0, 1, 2, rng.integers(3, 300)]))
        chunk = rng.integers(0, 2 ** 64, size, dtype=np.uint64, endpoint=False)
        if size:
            chunk[rng.random(size) < 0.05] = rng.choice(EDGES)
            if len(earlier):
                across = rng.random(size) < 0.2
                chunk[across] = rng.choice(earlier, int(across.sum()))
            within = rng.random(size) < 0.1
            chunk[within] = rng.choice(chunk, int(within.sum()))
        earlier = np.concatenate((earlier, chunk))
        yield chunk


@pytest.mark.parametrize("seed", range(5))
def test_keep_masks_equal_a_python_sets_over_many_chunks(seed):
    rng = np.random.default_rng(seed)
    duplicates, seen = ExactDuplicates(), set()
    repeats = 0
    for chunk in chunks_with_repeats(rng, 400):
        expected = reference_keep(seen, chunk)
        got = duplicates.keep(chunk)
        assert got.dtype == bool and got.shape == chunk.shape
        np.testing.assert_array_equal(got, expected)
        repeats += int((~expected).sum())
    assert repeats > 1000  # the chunks did repeat, within and across
    assert len(duplicates) == len(seen)
    assert set(np.concatenate([run.hashes for run in duplicates.runs]).tolist()) == seen
    # the runs stay sorted, disjoint and few: each more than MERGE_RATIO times the next
    for run in duplicates.runs:
        assert run.hashes.dtype == np.uint64 and (np.diff(run.hashes) > 0).all()
    sizes = [len(run) for run in duplicates.runs]
    assert all(older > MERGE_RATIO * newer for older, newer in zip(sizes, sizes[1:]))


def test_the_edge_values_and_first_one_wins_within_a_chunk():
    duplicates = ExactDuplicates()
    np.testing.assert_array_equal(duplicates.keep(np.array([2 ** 64 - 1, 0, 2 ** 64 - 1, 0], dtype=np.uint64)),
                                  [True, True, False, False])
    np.testing.assert_array_equal(duplicates.keep(np.empty(0, dtype=np.uint64)), np.empty(0, dtype=bool))
    np.testing.assert_array_equal(duplicates.keep(np.array([0], dtype=np.uint64)), [False])
    np.testing.assert_array_equal(duplicates.keep(EDGES), [False, True, True, True, True, False])
    np.testing.assert_array_equal(duplicates.keep(EDGES[::-1]), [False] * len(EDGES))


def test_one_large_chunk_then_single_documents():
    """A Ray task's worth at once, then chunks of one: the new runs are searched and merged the same way."""
    rng = np.random.default_rng(7)
    big = rng.integers(0, 2 ** 64, 50_000, dtype=np.uint64)
    duplicates = ExactDuplicates()
    assert duplicates.keep(big).all()
    singles = np.concatenate((big[::1000], rng.integers(0, 2 ** 64, 50, dtype=np.uint64), big[5::1000]))
    kept = [bool(duplicates.keep(singles[index:index + 1])[0]) for index in range(len(singles))]
    assert kept == [False] * 50 + [True] * 50 + [False] * 50
    assert len(duplicates) == 50_050


@pytest.mark.parametrize("values", ["small", "top"])
def test_skewed_hashes_fill_few_buckets_and_still_agree(values):
    """The directory buckets hashes by their top bits: hashes that share them (not xxh3's) make one large
    bucket, searched like any other."""
    rng = np.random.default_rng(3)
    duplicates, seen = ExactDuplicates(), set()
    for _ in range(300):
        chunk = rng.integers(0, 20_000, int(rng.integers(0, 200)), dtype=np.uint64)
        if values == "top":
            chunk = np.uint64(2 ** 64 - 1) - chunk
        np.testing.assert_array_equal(duplicates.keep(chunk), reference_keep(seen, chunk))
    assert len(duplicates) == len(seen) > 10_000
