"""Exact duplicates: a document whose text repeats an earlier one's is dropped, first one wins.

    duplicates = ExactDuplicates()
    keep = duplicates.keep(hashes)        # per chunk (local engine) or per task (Ray driver), in source order

Both build engines call this one implementation in source order, through split.py's `Holdout` (the local
engine as chunks are consumed, the Ray driver over the tasks' staged hashes in task order), so both keep
the same documents.
A document is known by a 64-bit hash of its text (`stage.text_hash`): among a billion documents the odds
that any two distinct ones collide are about 3 in 100 (and a collision costs one document).

The hashes seen so far are sorted numpy uint64 runs, not a Python set: 8 bytes per distinct document,
and 0.125-0.25 for the runs' directories, where the set took a Python int and a table slot each, several
times that, never given back to the OS. A call finds each hash's first occurrence in the chunk
(`np.unique`), drops those already in a run, and the new ones become a run of their own. A run is merged
into the one before it while that one is at most MERGE_RATIO times its size, so runs shrink geometrically:
O(log n) of them, each hash rewritten O(log n) times. A merge is a concatenation sorted by numpy's stable
sort, which finds the two sorted halves and merges them in linear time; while the largest runs merge, the
state is briefly held twice over.

`np.searchsorted` into a run of millions waits on one cache miss after another (each step of a binary
search needs the one before), which made the runs slower than the set. So each run keeps a directory: for
each value of the hashes' top bits, where they start in the run (~32-64 hashes apart). A lookup reads its
bucket's bounds, then binary searches inside the bucket for every hash of the chunk at once: ~6-7 steps,
each one gather whose loads are independent. The directory costs 1/64-1/32 of a word per hash and is
exact whatever the hashes' distribution (skewed hashes only make buckets larger). bench/exact_dedup_bench.py
(at c8fddba) measured it against the set, and without the directories or with another merge ratio (bench/RESULTS.md).

Hand-written because no library keeps a bounded uint64 set in numpy (pandas' khash table is a private API
and a map: it stores a value beside each key).
"""

from __future__ import annotations

import numpy as np

MERGE_RATIO = 8  # fewer runs to search against more merging (bench/RESULTS.md)
BUCKET_BITS = 6  # a run of n hashes has 2**(bit_length(n) - BUCKET_BITS) buckets: 32-64 hashes each


class SortedRun:
    """Distinct hashes, sorted, and where each value of their top bits starts among them."""

    def __init__(self, hashes: np.ndarray):
        self.hashes = hashes
        bits = max(len(hashes).bit_length() - BUCKET_BITS, 1)
        self.shift = np.uint64(64 - bits)
        bounds = np.arange(2 ** bits + 1, dtype=np.uint64) << self.shift
        self.starts = np.searchsorted(hashes, bounds)
        self.starts[-1] = len(hashes)  # 2**bits << shift wrapped around to 0

    def __len__(self) -> int:
        return len(self.hashes)

    def contains(self, keys: np.ndarray) -> np.ndarray:
        """True for each key in the run."""
        bucket = (keys >> self.shift).astype(np.intp)
        base = self.starts[bucket]
        count = self.starts[bucket + 1] - base
        last = len(self.hashes) - 1
        # Invariant: a key, if here, is in hashes[base:base + count]. Halve every key's range at once.
        while True:
            half = count >> 1
            if not half.any():
                break
            probe = self.hashes[np.minimum(base + half, last)]
            base += np.where(probe <= keys, half, 0)
            count -= half
        # An empty bucket's base is another bucket's hash (or, past the end, clipped to one): never equal.
        return self.hashes[np.minimum(base, last)] == keys


class ExactDuplicates:
    def __init__(self):
        self.runs: list[SortedRun] = []  # pairwise disjoint, oldest (largest) first

    def __len__(self) -> int:
        """Distinct hashes seen so far."""
        return sum(len(run) for run in self.runs)

    def seen(self, hashes: np.ndarray) -> np.ndarray:
        """True for each hash an earlier call kept. Safe beside a `keep` in another thread: runs are never
        changed once made, so a hash found was seen (one being merged may be missed: only a saving lost)."""
        hashes = np.asarray(hashes, dtype=np.uint64)
        found = np.zeros(len(hashes), dtype=bool)
        for run in list(self.runs):
            found |= run.contains(hashes)
        return found

    def keep(self, hashes: np.ndarray) -> np.ndarray:
        """True for each document whose hash was not seen before (in earlier calls or earlier in `hashes`)."""
        hashes = np.asarray(hashes, dtype=np.uint64)
        keep = np.zeros(len(hashes), dtype=bool)
        if not len(hashes):
            return keep
        fresh, first = np.unique(hashes, return_index=True)  # sorted; `first`: each one's first index
        for run in self.runs:
            seen = run.contains(fresh)
            if seen.any():
                fresh, first = fresh[~seen], first[~seen]
        keep[first] = True
        if len(fresh):
            self._add(fresh)
        return keep

    def _add(self, hashes: np.ndarray) -> None:
        runs = self.runs
        while runs and len(runs[-1]) <= MERGE_RATIO * len(hashes):
            older = runs.pop().hashes
            hashes = np.concatenate((older, hashes))
            del older  # freed before the sort allocates its merge buffer
            hashes.sort(kind="stable")
        runs.append(SortedRun(hashes))


class LineVerdicts:
    """What is known of recently seen raw lines (xxh3-64 of their bytes): a small code per line, whose meaning the
    stage gives (stage.py, `STANDS_IN` and the quality verdicts), 0 for a line not known. A line byte for byte like
    one of them is then not judged again by the quality filter (its verdict is the first copy's), or, where a kept
    document stands in for its repeats, dropped as an exact duplicate before it is parsed, screened and hashed. On a
    crawl's copies that work was most of the prepare's cost (bench/RESULTS.md).

    A direct-mapped table of `slots` keys and their codes (9 MiB by default), not a dict: a key evicted by another
    only costs a repeat its shortcut (it goes through the stage as if new), so memory stays bounded whatever the
    corpus. A line is taken for another only if their 64-bit hashes are equal, the same odds `ExactDuplicates`
    takes. Written from one thread (the builder's, or a Ray task's) and read from others only while it holds a single
    code: `add` writes a slot's key before its code, so a reader racing it could pair a key with the code of the key
    it replaces. Hand-written: a fixed-size, lossy uint64 map is a few numpy operations, and no library keeps one."""

    def __init__(self, slots: int = 1 << 20):
        if slots & (slots - 1):
            raise ValueError(f"LineVerdicts: slots must be a power of two, got {slots}")
        self.keys = np.zeros(slots, dtype=np.uint64)
        self.codes = np.zeros(slots, dtype=np.uint8)  # 0: empty
        self.mask = np.uint64(slots - 1)

    def look_up(self, keys: np.ndarray) -> np.ndarray:
        """Each key's code while the table still holds it, else 0."""
        slots = keys & self.mask
        return np.where(self.keys[slots] == keys, self.codes[slots], np.uint8(0))

    def add(self, keys: np.ndarray, codes) -> None:
        """Remember `codes` (one per key, or one for all; never 0) for `keys`; a key already here takes the new code."""
        codes = np.broadcast_to(np.asarray(codes, dtype=np.uint8), keys.shape)
        # One write per slot: numpy leaves unspecified which of several writes to one place wins, and a slot's key
        # and code must come from the same line.
        slots, first = np.unique(keys & self.mask, return_index=True)
        self.keys[slots] = keys[first]
        self.codes[slots] = codes[first]
