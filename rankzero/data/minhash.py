"""MinHash signatures of documents, for near-duplicate removal (neardup.py): the same numbers in every process.

    signatures, shingles = minhash_signatures(texts)      # (n, PERMUTATIONS) uint32, and word 5-grams per text
    bands, rows = lsh_shape(0.8)                          # 20 x 6: the LSH bands for a threshold
    keys = band_hashes(signatures, rows)                  # (n, bands) uint64: the LSH keys

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

import itertools
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

SHINGLE_WORDS = 5
PERMUTATIONS = 120  # divisible by many band sizes (lsh_shape)
CANDIDATE_PROBABILITY = 0.99  # a pair at the threshold shares a band at least this often
SEED = 19  # fixed: the permutations are part of the output's definition (the fingerprint names rensa's version)

PIECE_CHARS = 1 << 18  # characters per numpy pass (shingle_hashes)
_DELETE = np.uint32(0xFFFFFFFF)
_WORD_BASE = np.uint64(0x100000001B3)  # odd, so invertible mod 2**64
_WORD_BASE_INVERSE = np.uint64(pow(0x100000001B3, -1, 1 << 64))
# One odd multiplier per position in the shingle (the splitmix64 / golden-ratio family of constants).
_POSITION = np.array([0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB, 0xD6E8FEB86659FD93,
                      0xA0761D6478BD642F], dtype=np.uint64)[:SHINGLE_WORDS]


def algorithm(threshold: float) -> dict:
    """What the decision depends on besides the text and the threshold (enters the fingerprint)."""
    import rensa

    bands, rows = lsh_shape(threshold)
    return {"shingle_words": SHINGLE_WORDS, "permutations": PERMUTATIONS, "bands": bands, "rows": rows, "seed": SEED,
            "rensa_algorithm": rensa.RMinHash.ALGORITHM_VERSION, "normalisation": 1}


def lsh_shape(threshold: float) -> tuple[int, int]:
    """(bands, rows), bands x rows = PERMUTATIONS: the most rows per band (the fewest chance candidates) for
    which two documents of Jaccard similarity `threshold` share a band with probability >= 0.99, i.e.
    1 - (1 - threshold**rows)**bands >= 0.99. 0.8 → 20 x 6 (0.998); 0.9 → 12 x 10; 0.7 → 30 x 4; 0.5 → 40 x 3."""
    for rows in sorted((r for r in range(1, PERMUTATIONS + 1) if PERMUTATIONS % r == 0), reverse=True):
        bands = PERMUTATIONS // rows
        if 1 - (1 - threshold ** rows) ** bands >= CANDIDATE_PROBABILITY:
            return bands, rows
    return PERMUTATIONS, 1


def _fold(code: int) -> int:
    char = chr(code)
    if char.isspace():
        return 0
    category = unicodedata.category(char)
    if category[0] in "PS" or char == "_":
        return int(_DELETE)
    if category == "Nd":
        return ord("0")
    return code


@lru_cache(maxsize=1)
def _fold_table() -> np.ndarray:
    """Code point → folded code point (0: a word break; _DELETE: dropped), for the Basic Multilingual Plane."""
    return np.array([_fold(code) for code in range(0x10000)], dtype=np.uint32)


@lru_cache(maxsize=1)
def _powers() -> tuple[np.ndarray, np.ndarray]:
    """B**i and B**-i mod 2**64 for i < PIECE_CHARS (4 MB, made once per process)."""
    forward = np.full(PIECE_CHARS, _WORD_BASE, dtype=np.uint64)
    forward[0] = 1
    backward = np.full(PIECE_CHARS, _WORD_BASE_INVERSE, dtype=np.uint64)
    backward[0] = 1
    return np.cumprod(forward), np.cumprod(backward)


def _fmix64(values: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser: spreads every input bit over the output (in place, uint64)."""
    values ^= values >> np.uint64(33)
    values *= np.uint64(0xFF51AFD7ED558CCD)
    values ^= values >> np.uint64(33)
    values *= np.uint64(0xC4CEB9FE1A85EC53)
    values ^= values >> np.uint64(33)
    return values


def shingle_hashes(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The 64-bit hashes of every text's word 5-grams, flat, and each text's count of them. Texts go through
    numpy in pieces of about PIECE_CHARS characters: the arrays (~40 bytes per character) stay small."""
    normalised = [unicodedata.normalize("NFKC", text).lower() for text in texts]
    shingles, counts, piece, size = [], [], [], 0
    for text in normalised:
        if piece and size + len(text) > PIECE_CHARS:
            counts.append(_piece_shingles(piece, shingles))
            piece, size = [], 0
        piece.append(text)
        size += len(text) + 1
    if piece:
        counts.append(_piece_shingles(piece, shingles))
    if not counts:
        return np.empty(0, np.uint64), np.zeros(0, np.int64)
    return (np.concatenate(shingles) if shingles else np.empty(0, np.uint64)), np.concatenate(counts)


def _piece_shingles(normalised: list[str], out: list[np.ndarray]) -> np.ndarray:
    """Append the shingle hashes of these normalised texts to `out`; return each text's count."""
    # One space between texts: no word spans two of them.
    codes = np.frombuffer(" ".join(normalised).encode("utf-32-le"), dtype=np.uint32)
    starts = np.zeros(len(normalised), dtype=np.int64)
    np.cumsum([len(text) + 1 for text in normalised[:-1]], out=starts[1:])
    if len(codes) and codes.max() < 0x10000:
        folded = _fold_table()[codes]
    else:  # emoji and rarer scripts: a few distinct characters, folded one by one
        folded = np.empty_like(codes)
        basic = codes < 0x10000
        folded[basic] = _fold_table()[codes[basic]]
        unique, inverse = np.unique(codes[~basic], return_inverse=True)
        folded[~basic] = np.array([_fold(int(code)) for code in unique], dtype=np.uint32)[inverse]
    kept = folded != _DELETE
    if not kept.all():
        starts = np.cumsum(np.concatenate(([0], kept)))[starts]  # the texts' starts once deletions are made
        folded = folded[kept]
    word_char = folded != 0
    if not word_char.any():
        return np.zeros(len(normalised), np.int64)
    word_starts = np.flatnonzero(word_char & ~np.concatenate(([False], word_char[:-1])))
    # Polynomial hash of each word's code points: sum c_i * B**i over the word (word breaks are 0), times
    # B**-start: the same word hashes the same wherever it is.
    if len(folded) <= PIECE_CHARS:
        forward, backward = _powers()
    else:  # one text longer than a piece
        forward = np.full(len(folded), _WORD_BASE, dtype=np.uint64)
        backward = np.full(len(folded), _WORD_BASE_INVERSE, dtype=np.uint64)
        forward[0] = backward[0] = 1
        forward, backward = np.cumprod(forward), np.cumprod(backward)
    terms = folded.astype(np.uint64)
    terms *= forward[:len(folded)]
    words = np.add.reduceat(terms, word_starts)
    words *= backward[word_starts]
    words = _fmix64(words)
    word_document = np.searchsorted(starts, word_starts, side="right") - 1

    count = len(words) - SHINGLE_WORDS + 1
    if count <= 0:
        return np.zeros(len(normalised), np.int64)
    valid = word_document[:count] == word_document[SHINGLE_WORDS - 1:]
    mixed = words[:count] * _POSITION[0]
    for position in range(1, SHINGLE_WORDS):
        mixed += words[position:position + count] * _POSITION[position]
    out.append(_fmix64(mixed[valid]))
    return np.bincount(word_document[:count][valid], minlength=len(normalised)).astype(np.int64)


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
        keys = _fmix64(keys ^ (values[:, :, row] * _POSITION[row % len(_POSITION)]))
    # The band's number goes in too, so equal rows in two different bands are different keys.
    keys ^= np.arange(bands, dtype=np.uint64) * _POSITION[1]
    return _fmix64(keys)
