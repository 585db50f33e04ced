"""MinHash signatures of documents, for near-duplicate removal (neardup.py): the same numbers in every process.

    signatures, shingles = minhash_signatures(texts)      # (n, PERMUTATIONS) uint32, and word 5-grams per text
    bands = band_hashes(signatures)                       # (n, BANDS) uint64: the LSH keys

Text is normalised first: NFKC, lower-case, every digit folded to "0", punctuation and symbols (Unicode
categories P* and S*, and "_") deleted, any run of whitespace one word break. A shingle is 5 consecutive
words of that text; a text of fewer than 5 words has no shingle and no signature (it is never a near-copy).

The Python work is a few C-level calls per document (NFKC, lower); everything per character or per word
runs in numpy over the whole batch at once: the text as UTF-32 code points, a lookup table for the folding,
a polynomial hash per word (mod 2**64), a mixed hash per 5-gram. The MinHash itself is rensa's
`RMinHash.digest_matrix_from_flat_token_hashes` (Rust) over the flat shingle hashes: bench/minhash_bench.py
measures it against datasketch and rensa's per-document API on real Korean text (bench/RESULTS.md). Its
permutations are drawn from `SEED`, so every process, engine and run computes the same signature.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

SHINGLE_WORDS = 5
BANDS, ROWS = 20, 6  # 120 permutations; why 20 x 6 for the threshold 0.8: neardup.py
PERMUTATIONS = BANDS * ROWS
SEED = 19  # fixed: the permutations are part of the output's definition (the fingerprint names rensa's version)

_DELETE = np.uint32(0xFFFFFFFF)
_SPACE = np.uint32(32)
_WORD_BASE = np.uint64(0x100000001B3)  # odd, so invertible mod 2**64
_WORD_BASE_INVERSE = np.uint64(pow(0x100000001B3, -1, 1 << 64))
# One odd multiplier per position in the shingle (the splitmix64 / golden-ratio family of constants).
_POSITION = np.array([0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB, 0xD6E8FEB86659FD93,
                      0xA0761D6478BD642F], dtype=np.uint64)[:SHINGLE_WORDS]


def algorithm() -> dict:
    """What the signatures depend on besides the text (enters the fingerprint)."""
    import rensa

    return {"shingle_words": SHINGLE_WORDS, "bands": BANDS, "rows": ROWS, "seed": SEED,
            "rensa_algorithm": rensa.RMinHash.ALGORITHM_VERSION, "normalisation": 1}


def _fold(code: int) -> int:
    char = chr(code)
    if char.isspace():
        return 32
    category = unicodedata.category(char)
    if category[0] in "PS" or char == "_":
        return int(_DELETE)
    if category == "Nd":
        return ord("0")
    return code


@lru_cache(maxsize=1)
def _fold_table() -> np.ndarray:
    """Code point → folded code point (32: a word break; _DELETE: dropped), for the Basic Multilingual Plane."""
    return np.array([_fold(code) for code in range(0x10000)], dtype=np.uint32)


def _fmix64(values: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser: spreads every input bit over the output (in place, uint64)."""
    values ^= values >> np.uint64(33)
    values *= np.uint64(0xFF51AFD7ED558CCD)
    values ^= values >> np.uint64(33)
    values *= np.uint64(0xC4CEB9FE1A85EC53)
    values ^= values >> np.uint64(33)
    return values


def shingle_hashes(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The 64-bit hashes of every text's word 5-grams, flat, and each text's count of them."""
    normalised = [unicodedata.normalize("NFKC", text).lower() for text in texts]
    if not normalised:
        return np.empty(0, np.uint64), np.zeros(0, np.int64)
    # One space between texts: no word spans two of them.
    codes = np.frombuffer(" ".join(normalised).encode("utf-32-le"), dtype=np.uint32)
    starts = np.zeros(len(normalised), dtype=np.int64)
    np.cumsum([len(text) + 1 for text in normalised[:-1]], out=starts[1:])
    folded = np.empty_like(codes)
    basic = codes < 0x10000
    folded[basic] = _fold_table()[codes[basic]]
    if not basic.all():  # emoji and rarer scripts: a few distinct characters, folded one by one
        astral = codes[~basic]
        unique, inverse = np.unique(astral, return_inverse=True)
        folded[~basic] = np.array([_fold(int(code)) for code in unique], dtype=np.uint32)[inverse]
    kept = folded != _DELETE
    starts = np.cumsum(np.concatenate(([0], kept)))[starts]  # the texts' starts once deletions are made
    folded = folded[kept]
    word_char = folded != _SPACE
    if not word_char.any():
        return np.empty(0, np.uint64), np.zeros(len(texts), np.int64)
    previous = np.concatenate(([False], word_char[:-1]))
    word_starts = np.flatnonzero(word_char & ~previous)
    # Polynomial hash of each word's code points: sum c_i * B**i over the word, divided by B**start.
    powers = np.full(len(folded), _WORD_BASE, dtype=np.uint64)
    powers[0] = 1
    np.cumprod(powers, out=powers)
    terms = np.where(word_char, folded.astype(np.uint64) * powers, np.uint64(0))
    words = np.add.reduceat(terms, word_starts)
    powers.fill(_WORD_BASE_INVERSE)
    powers[0] = 1
    np.cumprod(powers, out=powers)
    words *= powers[word_starts]
    words = _fmix64(words)
    word_document = np.searchsorted(starts, word_starts, side="right") - 1

    count = len(words) - SHINGLE_WORDS + 1
    if count <= 0:
        return np.empty(0, np.uint64), np.zeros(len(texts), np.int64)
    valid = word_document[:count] == word_document[SHINGLE_WORDS - 1:]
    mixed = np.zeros(count, dtype=np.uint64)
    for position in range(SHINGLE_WORDS):
        mixed += words[position:position + count] * _POSITION[position]
    shingles = _fmix64(mixed[valid])
    per_text = np.bincount(word_document[:count][valid], minlength=len(texts)).astype(np.int64)
    return shingles, per_text


def signatures_from_shingles(shingles: np.ndarray, per_text: np.ndarray) -> np.ndarray:
    """(n, PERMUTATIONS) uint32 MinHash signatures; rows of texts without a shingle are all 0xFFFFFFFF."""
    import rensa

    offsets = np.zeros(len(per_text) + 1, dtype=np.uint64)
    np.cumsum(per_text, out=offsets[1:])
    if len(per_text) == 0:
        return np.empty((0, PERMUTATIONS), dtype=np.uint32)
    matrix = rensa.RMinHash.digest_matrix_from_flat_token_hashes(shingles, offsets, PERMUTATIONS, SEED)
    signatures = np.array(matrix.to_rows(), dtype=np.uint32).reshape(len(per_text), PERMUTATIONS)
    signatures[per_text == 0] = 0xFFFFFFFF
    return signatures


def minhash_signatures(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Signatures of `texts` (a batch: the per-call overhead is paid once) and each text's shingle count."""
    shingles, per_text = shingle_hashes(texts)
    return signatures_from_shingles(shingles, per_text), per_text


def band_hashes(signatures: np.ndarray) -> np.ndarray:
    """(n, BANDS) uint64: each band's ROWS values hashed to one key; two texts collide in a band when all its
    rows are equal (a 64-bit key: a chance collision of distinct rows is ~n**2 / 2**65 per band)."""
    rows = signatures.reshape(len(signatures), BANDS, ROWS).astype(np.uint64)
    keys = np.zeros((len(signatures), BANDS), dtype=np.uint64)
    for row in range(ROWS):
        keys = _fmix64(keys ^ (rows[:, :, row] * _POSITION[row % len(_POSITION)]))
    # The band's number goes in too, so equal rows in two different bands are different keys.
    keys ^= np.arange(BANDS, dtype=np.uint64) * _POSITION[1]
    return _fmix64(keys)
