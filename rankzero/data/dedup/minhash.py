"""MinHash signatures of documents, for near-duplicate removal (near.py): the same numbers in every process.

    signatures, shingles = minhash_signatures(texts)      # (n, PERMUTATIONS) uint32, and word 5-grams per text
    bands, rows = lsh_shape(0.8)                          # 20 x 6: the LSH bands for a threshold
    keys = band_hashes(signatures, rows)                  # (n, bands) uint64: the LSH keys

Text is normalised first: NFKC, lower-case, every digit folded to "0", punctuation and symbols (Unicode
categories P* and S*, and "_") folded to a word break like whitespace, invisible format and control
characters dropped. A shingle is 5 consecutive words of that text; a text of fewer than 5 words has no
shingle and no signature (it is never a near-copy). shingles.py defines the word and shingle hashes (numpy,
the reference); kernel.py computes them in one compiled pass per character that releases the GIL (passes.c),
wherever the install built the extension (native/), and runs the reference elsewhere.

The MinHash itself is rensa's `RMinHash.digest_matrix_from_flat_token_hashes` (Rust) over the flat shingle
hashes: bench/minhash_bench.py (at c8fddba) measured it against datasketch and rensa's per-document API on real
Korean text (bench/RESULTS.md). Its permutations are drawn from `SEED`, so every process, engine and run computes
the same signature.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from rankzero.data.dedup.kernel import shingle_hashes  # compiled where the extension is built, else shingles.py's
from rankzero.data.dedup.shingles import POSITION, SHINGLE_WORDS
from rankzero.data.native.hashing import fmix64

PERMUTATIONS = 120  # divisible by many band sizes (lsh_shape)
CANDIDATE_PROBABILITY = 0.99  # a pair at the threshold shares a band at least this often
SEED = 19  # fixed: the permutations are part of the output's definition (the fingerprint names rensa's version)


def algorithm(threshold: float) -> dict:
    """What the decision depends on besides the text and the threshold (enters the fingerprint)."""
    import rensa

    bands, rows = lsh_shape(threshold)
    return {"shingle_words": SHINGLE_WORDS, "permutations": PERMUTATIONS, "bands": bands, "rows": rows, "seed": SEED,
            "rensa_algorithm": rensa.RMinHash.ALGORITHM_VERSION, "normalisation": 2}


def lsh_shape(threshold: float) -> tuple[int, int]:
    """(bands, rows), bands x rows = PERMUTATIONS: the most rows per band (the fewest chance candidates) for
    which two documents of Jaccard similarity `threshold` share a band with probability >= 0.99, i.e.
    1 - (1 - threshold**rows)**bands >= 0.99. 0.8 → 20 x 6 (0.998); 0.9 → 12 x 10; 0.7 → 30 x 4; 0.5 → 40 x 3."""
    for rows in sorted((r for r in range(1, PERMUTATIONS + 1) if PERMUTATIONS % r == 0), reverse=True):
        bands = PERMUTATIONS // rows
        if 1 - (1 - threshold ** rows) ** bands >= CANDIDATE_PROBABILITY:
            return bands, rows
    return PERMUTATIONS, 1


def signatures_from_shingles(shingles: np.ndarray, per_text: np.ndarray) -> np.ndarray:
    """(n, PERMUTATIONS) uint32 MinHash signatures; rows of texts without a shingle are all 0xFFFFFFFF."""
    import rensa

    offsets = np.zeros(len(per_text) + 1, dtype=np.uint64)
    np.cumsum(per_text, out=offsets[1:])
    if len(per_text) == 0:
        return np.empty((0, PERMUTATIONS), dtype=np.uint32)
    matrix = rensa.RMinHash.digest_matrix_from_flat_token_hashes(shingles, offsets, PERMUTATIONS, SEED)
    # Its rows come back as Python lists: flattened by fromiter, a third of np.array's time here.
    signatures = np.fromiter(itertools.chain.from_iterable(matrix.to_rows()), dtype=np.uint32,
                             count=len(per_text) * PERMUTATIONS).reshape(len(per_text), PERMUTATIONS)
    signatures[per_text == 0] = 0xFFFFFFFF
    return signatures


def minhash_signatures(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Signatures of `texts` (a batch: the per-call overhead is paid once) and each text's shingle count."""
    shingles, per_text = shingle_hashes(texts)
    return signatures_from_shingles(shingles, per_text), per_text


def band_hashes(signatures: np.ndarray, rows: int) -> np.ndarray:
    """(n, PERMUTATIONS // rows) uint64: each band's `rows` values hashed to one key; two texts collide in a
    band when all its rows are equal (a 64-bit key: a chance collision of distinct rows is ~n**2 / 2**65)."""
    bands = PERMUTATIONS // rows
    values = signatures.reshape(len(signatures), bands, rows).astype(np.uint64)
    keys = np.zeros((len(signatures), bands), dtype=np.uint64)
    for row in range(rows):
        keys = fmix64(keys ^ (values[:, :, row] * POSITION[row % len(POSITION)]))
    # The band's number goes in too, so equal rows in two different bands are different keys.
    keys ^= np.arange(bands, dtype=np.uint64) * POSITION[1]
    return fmix64(keys)
