"""The 64-bit finaliser both compiled passes (near dedup's, decontamination's) and their numpy references use,
and how rankzero compiles a pass.

    mixed = fmix64(values)                  # numpy, in place, uint64
    fmix64_one = compiled(fmix64)           # the same for one uint64, in a numba pass (numba imported here)
    numba_started()                         # has this process already paid numba's start?
"""

from __future__ import annotations

import sys

import numpy as np


def fmix64(values: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser: spreads every input bit over the output (in place for an array; numba
    compiles the same source for one value)."""
    values ^= values >> np.uint64(33)
    values *= np.uint64(0xFF51AFD7ED558CCD)
    values ^= values >> np.uint64(33)
    values *= np.uint64(0xC4CEB9FE1A85EC53)
    values ^= values >> np.uint64(33)
    return values


def compiled(function):
    """numba's njit, releasing the GIL (the stage's threads keep running), cached on disk when numba finds a
    writable cache directory (next to the function's module, NUMBA_CACHE_DIR or the user's cache); else compiled
    once per process. numba is imported here, at the first compiled pass, never by the numpy paths."""
    import numba

    try:
        return numba.njit(nogil=True, cache=True)(function)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return numba.njit(nogil=True)(function)


def numba_started() -> bool:
    """Whether this process has already paid numba's start (~0.5 CPU-s: its import, then its type registry at
    the first compiled pass): a pass chosen to avoid that start (minhash.shingle_hashes) then has no reason
    to. With --decontaminate the plan builds the index, whose pass is compiled, before any chunk is hashed."""
    return "numba" in sys.modules
