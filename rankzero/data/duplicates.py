"""Exact duplicates: a document whose text repeats an earlier one's is dropped, first one wins.

    duplicates = ExactDuplicates()
    keep = duplicates.keep(hashes)        # per chunk (local engine) or per task (Ray driver), in source order

Both build engines call this one implementation in source order, through split.py's `Holdout` (the local
engine as chunks are consumed, the Ray driver over the tasks' staged hashes in task order), so both keep
the same documents.
A document is known by a 64-bit hash of its text (`stage.text_hash`): among a billion documents the odds
that any two distinct ones collide are about 3 in 100 (and a collision costs one document).

The hashes seen so far are kept as sorted numpy uint64 runs, not a Python set: 8 bytes per distinct
document instead of a Python int and a set slot each (~60-70 bytes, and none of it returned to the OS).
A call finds each hash's first occurrence in the chunk (`np.unique`), drops those already in a run
(`np.searchsorted` per run; the chunk's hashes are sorted, so the searches walk each run forwards), and
the new ones become a run of their own. Runs are merged binary-counter style (while the older one's
size has no more bits than the newer one's), so there are at most ~log2(documents) runs and each hash is
merged O(log) times; a merge is a concatenation sorted by numpy's stable sort, which finds the two
sorted runs and merges them in linear time. While the two largest runs merge, the state is briefly
held twice. bench/exact_dedup_bench.py measures it against the set (bench/RESULTS.md).

Hand-written because no library keeps a bounded uint64 set in numpy: pandas' khash table (a private
API, and a map: it stores a value beside each key) measured ~27 bytes per document.
"""

from __future__ import annotations

import numpy as np


class ExactDuplicates:
    def __init__(self):
        self.runs: list[np.ndarray] = []  # sorted uint64, pairwise disjoint, oldest (largest) first

    def __len__(self) -> int:
        """Distinct hashes seen so far."""
        return sum(len(run) for run in self.runs)

    def keep(self, hashes: np.ndarray) -> np.ndarray:
        """True for each document whose hash was not seen before (in earlier calls or earlier in `hashes`)."""
        hashes = np.asarray(hashes, dtype=np.uint64)
        keep = np.zeros(len(hashes), dtype=bool)
        if not len(hashes):
            return keep
        fresh, first = np.unique(hashes, return_index=True)  # sorted; `first`: each one's first index
        for run in self.runs:
            at = np.searchsorted(run, fresh)
            seen = run[np.minimum(at, len(run) - 1)] == fresh
            if seen.any():
                fresh, first = fresh[~seen], first[~seen]
        keep[first] = True
        if len(fresh):
            self._add(fresh)
        return keep

    def _add(self, run: np.ndarray) -> None:
        runs = self.runs
        runs.append(run)
        while len(runs) > 1 and len(runs[-2]).bit_length() <= len(runs[-1]).bit_length():
            newer, older = runs.pop(), runs.pop()
            merged = np.concatenate((older, newer))
            del older, newer  # freed before the sort allocates its merge buffer
            merged.sort(kind="stable")
            runs.append(merged)
