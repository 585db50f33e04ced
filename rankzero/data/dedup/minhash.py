"""MinHash signatures of documents, for near-duplicate removal (near.py): the same numbers in every process.

    signatures, shingles = minhash_signatures(texts)      # (n, PERMUTATIONS) uint32, and word 5-grams per text
    bands, rows = lsh_shape(0.8)                          # 20 x 6: the LSH bands for a threshold
    keys = band_hashes(signatures, rows)                  # (n, bands) uint64: the LSH keys

Text is normalised first: NFKC, lower-case, every digit folded to "0", punctuation and symbols (Unicode
categories P* and S*, and "_") folded to a word break like whitespace, invisible format and control
characters dropped. A shingle is 5 consecutive
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


def _fold(code: int) -> int:
    char = chr(code)
    category = unicodedata.category(char)
    # Punctuation and symbols break words like spaces: "47,900원" is "00 000원", "a.b(c)" three words, and
    # the same template with other punctuation still matches. Invisible format characters (zero-width
    # space and joiner, soft hyphen) and other control characters are dropped: they split nothing.
    if char.isspace() or category[0] in "PS" or char == "_":
        return 0
    if category in ("Cf", "Cc", "Cs"):
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
    """The 64-bit hashes of every text's word 5-grams, flat, and each text's count of them. Characters go
    through numpy in pieces of at most PIECE_CHARS (~40 bytes of arrays per character), a longer text cut at
    a space or line break, and the last 4 words of a piece carried into the next: memory does not grow with
    the longest document beyond its shingles (8 bytes each)."""
    shingles, per_text = [], np.zeros(len(texts), np.int64)
    carry = (np.empty(0, np.uint64), np.empty(0, np.int32))
    piece, piece_owners, size = [], [], 0
    for index, text in enumerate(texts):
        for segment in (text,) if len(text) <= PIECE_CHARS else _segments(text):
            # NFKC per segment: no composition crosses a space, and a whole long text would be decomposed at
            # once into a buffer of 4 bytes per code point (Hangul: 2-3 jamo per syllable).
            segment = unicodedata.normalize("NFKC", segment).lower()
            if piece and size + len(segment) > PIECE_CHARS:
                carry = _piece_shingles(piece, piece_owners, carry, shingles, per_text)
                piece, piece_owners, size = [], [], 0
            piece.append(segment)
            piece_owners.append(index)
            size += len(segment) + 1
    if piece:
        _piece_shingles(piece, piece_owners, carry, shingles, per_text)
    return (np.concatenate(shingles) if shingles else np.empty(0, np.uint64)), per_text


def _piece_shingles(segments: list[str], segment_owners: list[int], carry: tuple, shingles: list,
                    per_text: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Append the 5-grams ending in these segments' words to `shingles` (counted in `per_text`); `carry` is the
    previous piece's last words and their texts. Returns this piece's carry."""
    words, owners = _piece_words(segments, segment_owners)
    words, owners = np.concatenate([carry[0], words]), np.concatenate([carry[1], owners])
    count = len(words) - SHINGLE_WORDS + 1
    if count > 0:
        valid = owners[:count] == owners[SHINGLE_WORDS - 1:]
        mixed = words[:count] * _POSITION[0]
        for position in range(1, SHINGLE_WORDS):
            mixed += words[position:position + count] * _POSITION[position]
        shingles.append(_fmix64(mixed[valid]))
        per_text += np.bincount(owners[:count][valid], minlength=len(per_text))
    keep = SHINGLE_WORDS - 1
    return words[-keep:], owners[-keep:]


def _segments(text: str):
    """A text in pieces of at most PIECE_CHARS characters, each cut before a space or line break
    (only a run of PIECE_CHARS characters without one is cut inside it)."""
    start = 0
    while len(text) - start > PIECE_CHARS:
        end = start + PIECE_CHARS
        cut = max(text.rfind(" ", start + 1, end), text.rfind("\n", start + 1, end))
        cut = end if cut <= start else cut
        yield text[start:cut]
        start = cut
    yield text[start:]


def _piece_words(segments: list[str], segment_owners: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The word hashes of these normalised segments (joined: at most PIECE_CHARS characters) and the index of
    the text each word is in."""
    # One space between segments: no word spans two of them.
    codes = np.frombuffer(" ".join(segments).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    starts = np.zeros(len(segments), dtype=np.int64)
    np.cumsum([len(segment) + 1 for segment in segments[:-1]], out=starts[1:])
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
        starts = np.cumsum(np.concatenate(([0], kept)))[starts]  # the segments' starts once deletions are made
        folded = folded[kept]
    word_char = folded != 0
    word_starts = np.flatnonzero(word_char & ~np.concatenate(([False], word_char[:-1])))
    if not len(word_starts):
        return np.empty(0, np.uint64), np.empty(0, np.int32)
    # Polynomial hash of each word's code points: sum c_i * B**i over the word (word breaks are 0), times
    # B**-start: the same word hashes the same wherever it is.
    forward, backward = _powers()
    if len(folded) > len(forward):  # normalising lengthened a segment (NFKC expands some characters)
        forward, backward = (np.cumprod(np.concatenate((np.ones(1, np.uint64), np.full(len(folded) - 1, base))))
                             for base in (_WORD_BASE, _WORD_BASE_INVERSE))
    terms = folded.astype(np.uint64)
    terms *= forward[:len(folded)]
    hashes = np.add.reduceat(terms, word_starts)
    hashes *= backward[word_starts]
    owners = np.asarray(segment_owners, dtype=np.int32)[np.searchsorted(starts, word_starts, side="right") - 1]
    return _fmix64(hashes), owners


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
