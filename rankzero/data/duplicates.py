"""Exact duplicates: a document whose text repeats an earlier one's is dropped, first one wins.

    duplicates = ExactDuplicates()
    keep = duplicates.keep(hashes)        # per chunk (local engine) or per task (Ray driver), in source order

Both build engines call this one implementation in source order, through split.py's `Holdout` (the local
engine as chunks are consumed, the Ray driver over the tasks' staged hashes in task order), so both keep
the same documents.
A document is known by a 64-bit hash of its text (`stage.text_hash`): among a billion documents the odds
that any two distinct ones collide are about 3 in 100 (and a collision costs one document).
"""

from __future__ import annotations

import numpy as np


class ExactDuplicates:
    def __init__(self):
        self.seen: set[int] = set()

    def keep(self, hashes: np.ndarray) -> np.ndarray:
        """True for each document whose hash was not seen before (in earlier calls or earlier in `hashes`)."""
        keep = np.ones(len(hashes), dtype=bool)
        seen = self.seen
        for index, digest in enumerate(hashes.tolist()):
            if digest in seen:
                keep[index] = False
            else:
                seen.add(digest)
        return keep
