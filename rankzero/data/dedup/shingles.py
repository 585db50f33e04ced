"""What a document's words and word 5-grams are, defined in numpy: the reference the native pass is tested against.

    shingles, per_text = numpy_shingle_hashes(texts)      # flat uint64 hashes of word 5-grams, and their count per text

Text is normalised first: NFKC, lower-case, every digit folded to "0", punctuation and symbols (Unicode
categories P* and S*, and "_") folded to a word break like whitespace, invisible format and control
characters dropped. A word is a run of what is left between breaks; its hash is the polynomial
sum c_i * B**i of its code points mod 2**64, mixed by fmix64; a shingle is 5 consecutive words of one
text, hashed as sum word_j * POSITION_j, mixed again. A text of fewer than 5 words has no shingle.

This module is their definition, in a few whole-batch numpy operations per piece of text: the reference the
compiled pass (kernel.py) must match bit for bit (tests/data/dedup/test_dedup_kernel.py), the table of the folding both
use, and what the pipeline runs where the install built no extension (kernel.shingle_hashes chooses).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from rankzero.data.native import constants
from rankzero.data.native.hashing import DELETE, WORD_BASE, fmix64
from rankzero.data.native.table_cache import cached

SHINGLE_WORDS = 5
PIECE_CHARS = 1 << 18  # characters per numpy pass (numpy_shingle_hashes); longer texts are cut at a space
_WORD_BASE_INVERSE = np.uint64(pow(0x100000001B3, -1, 1 << 64))
# One odd multiplier per position in the shingle (the splitmix64 / golden-ratio family of constants).
POSITION = np.array([0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB, 0xD6E8FEB86659FD93,
                     0xA0761D6478BD642F], dtype=np.uint64)[:SHINGLE_WORDS]
assert len(POSITION) == SHINGLE_WORDS, "a multiplier per word of the shingle (passes.c reads SHINGLE_WORDS of them)"


def fold(code: int) -> int:
    """A normalised code point's fold: 0 (a word break), DELETE (dropped), "0" (a digit) or itself."""
    char = chr(code)
    category = unicodedata.category(char)
    # Punctuation and symbols break words like spaces: "47,900원" is "00 000원", "a.b(c)" three words, and
    # the same template with other punctuation still matches. Invisible format characters (zero-width
    # space and joiner, soft hyphen) and other control characters are dropped: they split nothing.
    if char.isspace() or category[0] in "PS" or char == "_":
        return 0
    if category in ("Cf", "Cc", "Cs"):
        return int(DELETE)
    if category == "Nd":
        return ord("0")
    return code


@lru_cache(maxsize=1)
def fold_table() -> np.ndarray:
    """Code point → folded code point (0: a word break; DELETE: dropped), for the Basic Multilingual Plane. Read
    from this installation's cache after a first build (table_cache.py: 0.02 CPU-s a process)."""
    return cached("shingles", _build_fold_table, [__file__, constants.__file__])["fold"]


def _build_fold_table() -> dict[str, np.ndarray]:
    return {"fold": np.array([fold(code) for code in range(0x10000)], dtype=np.uint32)}


@lru_cache(maxsize=1)
def _powers() -> tuple[np.ndarray, np.ndarray]:
    """B**i and B**-i mod 2**64 for i < PIECE_CHARS (4 MB, made once per process)."""
    forward = np.full(PIECE_CHARS, WORD_BASE, dtype=np.uint64)
    forward[0] = 1
    backward = np.full(PIECE_CHARS, _WORD_BASE_INVERSE, dtype=np.uint64)
    backward[0] = 1
    return np.cumprod(forward), np.cumprod(backward)


def numpy_shingle_hashes(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The 64-bit hashes of every text's word 5-grams, flat, and each text's count of them. Characters go
    through numpy in pieces of at most PIECE_CHARS (~40 bytes of arrays per character), a longer text cut at
    a space or line break, and the last 4 words of a piece carried into the next: memory does not grow with
    the longest document beyond its shingles (8 bytes each)."""
    shingles, per_text = [], np.zeros(len(texts), np.int64)
    carry = (np.empty(0, np.uint64), np.empty(0, np.int32))
    piece, piece_owners, size = [], [], 0
    for index, text in enumerate(texts):
        for segment in (text,) if len(text) <= PIECE_CHARS else text_segments(text):
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
        mixed = words[:count] * POSITION[0]
        for position in range(1, SHINGLE_WORDS):
            mixed += words[position:position + count] * POSITION[position]
        shingles.append(fmix64(mixed[valid]))
        per_text += np.bincount(owners[:count][valid], minlength=len(per_text))
    keep = SHINGLE_WORDS - 1
    return words[-keep:], owners[-keep:]


def text_segments(text: str):
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
        folded = fold_table()[codes]
    else:  # emoji and rarer scripts: a few distinct characters, folded one by one
        folded = np.empty_like(codes)
        basic = codes < 0x10000
        folded[basic] = fold_table()[codes[basic]]
        unique, inverse = np.unique(codes[~basic], return_inverse=True)
        folded[~basic] = np.array([fold(int(code)) for code in unique], dtype=np.uint32)[inverse]
    kept = folded != DELETE
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
                             for base in (WORD_BASE, _WORD_BASE_INVERSE))
    terms = folded.astype(np.uint64)
    terms *= forward[:len(folded)]
    hashes = np.add.reduceat(terms, word_starts)
    hashes *= backward[word_starts]
    owners = np.asarray(segment_owners, dtype=np.int32)[np.searchsorted(starts, word_starts, side="right") - 1]
    return fmix64(hashes), owners
