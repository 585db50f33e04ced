"""The numbers near dedup's and decontamination's hashes are made of, as the numpy types the references
(dedup/shingles.py, screen/reference.py) compute in, and MurmurHash3's finaliser in numpy. Their values are
constants.py's, which the compiled passes are built with.

    mixed = fmix64(values)                  # numpy, in place, uint64
"""

from __future__ import annotations

import numpy as np

from rankzero.data.native import constants

WORD_BASE = np.uint64(constants.WORD_BASE)
WINDOW_BASE = np.uint64(constants.WINDOW_BASE)
GRAM_BASE = np.uint64(constants.GRAM_BASE)
DELETE, SLOW, EXPANDED = np.uint32(constants.DELETE), np.uint32(constants.SLOW), np.uint32(constants.EXPANDED)


def fmix64(values: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser: spreads every input bit over the output (in place)."""
    values ^= values >> np.uint64(33)
    values *= np.uint64(0xFF51AFD7ED558CCD)
    values ^= values >> np.uint64(33)
    values *= np.uint64(0xC4CEB9FE1A85EC53)
    values ^= values >> np.uint64(33)
    return values
