"""Words and word 5-grams of texts in one compiled pass (passes.c, through native/): shingles.py's numbers, bit
for bit.

    words, per_text = word_hashes(texts)          # flat uint64 hash of every word, and each text's word count
    shingles, per_text = shingle_hashes(texts)    # flat uint64 hash of every word 5-gram, and each text's count

shingles.py defines the numbers in whole-array numpy operations: a dozen passes over arrays of the text's
size, and NFKC + lower-case in Python before them, all holding the GIL. Here one loop per character folds,
drops, finds the words and hashes them, without the GIL (the extension releases it), so the stage's encode threads
overlap. Where the extension is not built (no C compiler at install), shingle_hashes runs shingles.py's numpy.
word_hashes needs the extension (tests/data/dedup/test_dedup_kernel.py compares it with shingles.py's words).

NFKC + lower-case happen in the same loop for every text where they are a function of each code point alone:
one table maps a code point to the fold of its lower-cased NFKC form. The exceptions are tested against
`unicodedata` on every code point (tests/data/dedup/test_dedup_kernel.py):
- Hangul: compatibility jamo (ㅋ, ㅏ, half-width and circled forms) become conjoining jamo under NFKC, which
  then compose with their neighbours into syllables (initial + vowel, syllable + final); the loop composes them
  by the Unicode algorithm, so a text of "ㅋㅋ" or "ㅎㅏ" stays on the fast path.
- A code point NFKC makes several of ("…" → "...", "㈜" → "(주)", "㎡" → "m2") takes their folds from the table.
- Every code point that NFKC or lower() treats in context (a combining mark, a character that composes with the
  one before it, capital sigma, whose lower case depends on the next letter) marks its text: that text is
  normalised by `unicodedata` and folded by the plain table in a second call (3 of 3,691 real petitions).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from rankzero.data import native
from rankzero.data.dedup import shingles
from rankzero.data.dedup.shingles import (PIECE_CHARS, POSITION, SHINGLE_WORDS, fold, fold_table, numpy_shingle_hashes,
                                          text_segments)
from rankzero.data.native import code_points, constants, unicode_context
from rankzero.data.native.hashing import SLOW
from rankzero.data.native.table_cache import cached
from rankzero.data.native.unicode_context import alone, fill_folds, in_context_table

_CAPITAL_SIGMA = "\u03a3"


def _merge(fast: np.ndarray, fast_counts: np.ndarray, slow: np.ndarray,
           slow_counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each unit's words from `fast`, or from `slow` where fast_counts is -1 (in order), and their counts."""
    counts = fast_counts.copy()
    from_slow = counts < 0
    counts[from_slow] = slow_counts
    out = np.empty(int(counts.sum()), dtype=np.uint64)
    in_slow = np.repeat(from_slow, counts)
    out[~in_slow] = fast
    out[in_slow] = slow
    return out, counts


def word_hashes(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The hash of every word of every normalised text (shingles.py: fmix64 of the polynomial hash), flat, and
    each text's number of words. Texts longer than PIECE_CHARS are cut at spaces as shingles.py cuts them."""
    units, first_unit = _units(texts)
    lengths = np.fromiter(map(len, units), dtype=np.int64, count=len(units))
    ends = np.cumsum(lengths)
    # Pieces of about PIECE_CHARS characters: the UTF-32 copy and the word buffer stay small (~8 bytes a character).
    cuts = np.unique(np.searchsorted(ends, np.arange(PIECE_CHARS, int(ends[-1]) if len(ends) else 0, PIECE_CHARS),
                                     side="right"))
    words, counts = [], []
    for start, stop in zip(np.concatenate(([0], cuts)).tolist(), np.concatenate((cuts, [len(units)])).tolist()):
        if stop > start:
            piece_words, piece_counts = _piece_words(units[start:stop])
            words.append(piece_words)
            counts.append(piece_counts)
    unit_counts = np.concatenate(counts) if counts else np.zeros(0, np.int64)
    per_text = unit_counts if first_unit is None else np.add.reduceat(unit_counts, first_unit)
    return (np.concatenate(words) if words else np.empty(0, np.uint64)), per_text


@native.or_reference(numpy_shingle_hashes)
def shingle_hashes(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The 64-bit hash of every text's word 5-grams, flat, and each text's count of them (as shingles.py)."""
    words, per_text = word_hashes(texts)
    out = np.empty(int(np.maximum(per_text - SHINGLE_WORDS + 1, 0).sum()), dtype=np.uint64)
    out_per_text = np.empty(len(per_text), dtype=np.int64)
    native.passes().shingle_hashes(words, per_text, POSITION, SHINGLE_WORDS, out, out_per_text)
    return out, out_per_text


def _units(texts: Sequence[str]) -> tuple[Sequence[str], np.ndarray | None]:
    """The texts, those longer than PIECE_CHARS as their segments, and where each text's first unit is (None: one
    unit per text)."""
    if all(len(text) <= PIECE_CHARS for text in texts):
        return texts, None
    units, first_unit = [], []
    for text in texts:
        first_unit.append(len(units))
        units.extend([text] if len(text) <= PIECE_CHARS else text_segments(text))
    return units, np.asarray(first_unit, dtype=np.int64)


def _piece_words(units: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Word hashes of a few units (texts or segments) and each unit's count: the table's pass first, then
    unicodedata's NFKC + lower() and the plain fold for the units it marked."""
    words, counts = _scan_units(units, normalising=True)
    slow = np.flatnonzero(counts < 0)
    if not len(slow):
        return words, counts
    normalised = [unicodedata.normalize("NFKC", units[index]).lower() for index in slow.tolist()]
    slow_words, slow_counts = _scan_units(normalised, normalising=False)
    return _merge(words, counts, slow_words, slow_counts)


def _scan_units(units: Sequence[str], normalising: bool) -> tuple[np.ndarray, np.ndarray]:
    codes, offsets = code_points(units)
    table, expansions, most_words = normalising_table() if normalising else (fold_table(), _NO_EXPANSIONS, 1)
    astral_codes = np.empty(0, np.uint32)
    if len(codes) and codes.max() >= 0x10000:  # emoji and rarer scripts: a few distinct code points, one by one
        astral_codes = np.unique(codes[codes >= 0x10000])
    astral_folds = np.fromiter(map(_astral_normalised_fold if normalising else fold, astral_codes.tolist()),
                               dtype=np.uint32, count=len(astral_codes))
    counts = np.empty(len(units), dtype=np.int64)
    size = len(codes) // 2 + len(units) + most_words  # a word is a code point and a break, but for expansions
    while True:
        words = np.empty(size, dtype=np.uint64)
        written = native.passes().word_hashes(codes, offsets, table, expansions, most_words, astral_codes,
                                              astral_folds, words, counts)
        if written >= 0:
            return words[:written].copy(), counts
        size *= 2


_NO_EXPANSIONS = np.zeros(1, dtype=np.uint32)


def normalised_folds(code: int) -> list[int] | None:
    """The folds of lower(NFKC(code)), where they do not depend on the code points around it; else None. A Hangul
    jamo is its own fold: the scan composes it with its neighbour (passes.c's `hangul`)."""
    mapped = alone(chr(code))
    if mapped is None or _CAPITAL_SIGMA in mapped:  # capital sigma: its lower case depends on the letters after it
        return None
    return [fold(ord(lowered)) for lowered in mapped.lower()]


def _astral_normalised_fold(code: int) -> int:
    folds = normalised_folds(code)
    return int(SLOW) if folds is None or len(folds) != 1 else folds[0]


@lru_cache(maxsize=1)
def normalising_table() -> tuple[np.ndarray, np.ndarray, int]:
    """normalised_folds of the Basic Multilingual Plane, as the scan reads them: a fold, SLOW, or EXPANDED + i
    for a code point of several folds (expansions[i] of them at expansions[i + 1:]); and the most folds of one
    code point. Built once per installation (~0.1 CPU-s; table_cache.py), then read from disk."""
    arrays = cached("dedup_kernel", _build_normalising_table,
                    [__file__, shingles.__file__, constants.__file__, unicode_context.__file__])
    return arrays["table"], arrays["expansions"], int(arrays["most_words"])


def _build_normalising_table() -> dict[str, np.ndarray]:
    """NFKC, NFKD and lower() of all code points at once, each behind U+0000 (a starter that composes with
    nothing, so each comes out as it would alone), normalised_folds for the rest."""
    chars = list(map(chr, range(1, 0x10000)))
    joined = "\0".join(chars)
    context = in_context_table()
    starts_in_context = context.tolist()
    # Unchanged by NFKC and lower(), and no decomposition that starts with a code point in context: its own fold.
    stable = [a == b == c and not starts_in_context[ord(d[0])] for a, b, c, d in zip(
        chars, unicodedata.normalize("NFKC", joined).split("\0"), joined.lower().split("\0"),
        unicodedata.normalize("NFKD", joined).split("\0"))]
    folds = fold_table()
    table = np.empty(0x10000, dtype=np.uint32)
    table[1:] = np.where(context[1:], SLOW, folds[1:])
    codes = [0, *(index + 1 for index in np.flatnonzero(~np.array(stable)).tolist())]
    expansions, most_words = fill_folds(table, codes, normalised_folds)
    return {"table": table, "expansions": expansions, "most_words": np.array(most_words)}
