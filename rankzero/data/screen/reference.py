"""What decontamination's pass (scan.scan) computes, defined in whole-batch numpy: the reference every
compiled pass must match bit for bit, and what a process without one runs.

    grams, windows, marks, runs = scan_reference(codes, offsets, 8, 8, 4, bitmap)   # as scan.scan

Its code point tables are defined here, below scan.py, and its constants in native/constants.py, which the
extension is compiled with: the compiled pass reads the same numbers. A word is a maximal
run of letters (the fold table's nonzero entries: `str.isalnum`, lower-cased) within one text; its hash is
fmix64(sum c_i * WORD_BASE**(length-1-i) ^ length); an n-gram is n consecutive words of a text, hashed as
fmix64(sum word_j * GRAM_BASE**(n-1-j)); a window is `window` consecutive letters of a text with the breaks
between words left out, fmix64(sum c_i * WINDOW_BASE**(window-1-i)), taken at the text's window-th letter and
every `step` letters after it. All arithmetic is mod 2**64.

Each polynomial is a difference of prefix sums: sum c_i B**(e-i) over [s, e] is B**e times the sum of
c_i B**-i over the same letters, and B**-1 exists mod 2**64 because every base is odd (numpy's uint64
arithmetic wraps, as the kernel's does). So a batch costs a fixed number of array passes whatever n and
window are, with no per-character Python. The marks come from the few positions that can set them ('@',
':', '권', 't', runs of digits and separators, runs of hex digits and colons), found with flatnonzero and owned
by searchsorted.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np

from rankzero.data.native.constants import AT_SIGN, AT_SIGNS, COLONS, HEX_OR_COLON, NUMBER_RUN, NUMBERS, PASSPORT
from rankzero.data.native.hashing import GRAM_BASE, WINDOW_BASE, WORD_BASE, fmix64
from rankzero.data.native.table_cache import cached

ASTRAL = 0x10000  # code points above the Basic Multilingual Plane are classified per batch (they are rare)


class Hashes(NamedTuple):
    values: np.ndarray  # uint64
    owners: np.ndarray  # int64: the index of the text each hash comes from


def fold(code: int) -> int:
    """A code point's lower case if that is a word character (`str.isalnum`), else 0: a word break."""
    lower = chr(code).lower()
    return ord(lower) if len(lower) == 1 and lower.isalnum() else 0


def kinds_table() -> np.ndarray:
    """2 for a decimal digit (what `\\d` matches), 1 for a separator of the masker's number clusters
    (pii_checks.py), else 0 (BMP)."""
    return _tables()["kinds"]


def fold_table() -> np.ndarray:
    """fold of each code point of the Basic Multilingual Plane."""
    return _tables()["fold"]


@lru_cache(maxsize=1)
def _tables() -> dict[str, np.ndarray]:
    """Both tables, from this installation's cache after a first build (table_cache.py: 0.03 CPU-s a process)."""
    from rankzero.data.screen import pii_checks, pii_forms

    return cached("ngram_scan", _build_tables, [__file__, pii_checks.__file__, pii_forms.__file__])


def _build_tables() -> dict[str, np.ndarray]:
    from rankzero.data.screen.pii_forms import cluster_separators

    separators = cluster_separators()
    kinds = np.fromiter((2 if chr(code).isdecimal() else 1 if chr(code) in separators else 0
                         for code in range(ASTRAL)), dtype=np.uint8, count=ASTRAL)
    return {"fold": np.fromiter(map(fold, range(ASTRAL)), dtype=np.uint32, count=ASTRAL), "kinds": kinds}


def astral_folds_of(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted code points above the BMP in `codes`, the fold of each)."""
    astral = np.unique(codes[codes >= ASTRAL]) if len(codes) and codes.max() >= ASTRAL else np.empty(0, np.uint32)
    return astral, np.array([fold(int(code)) for code in astral], dtype=np.uint32)


def scan_reference(codes: np.ndarray, offsets: np.ndarray, n: int, window: int, step: int,
                   bitmap) -> tuple[Hashes, Hashes, np.ndarray, np.ndarray]:
    """ngram_scan.scan (same arguments, `bitmap` an ngram_scan.Bitmap; same results, bit for bit), in numpy: about a
    fifth of the compiled pass's speed on real Korean, ~34 bytes of arrays per code point at the peak
    (bench/RESULTS.md)."""
    assert n >= 1 and window >= 1 and step >= 1, (n, window, step)
    codes, offsets = np.asarray(codes, dtype=np.uint32), np.asarray(offsets, dtype=np.int64)
    folds, kinds = _classify(codes)
    marks, runs = _marks(codes, offsets, kinds)
    positions = np.flatnonzero(folds)  # where each letter is in `codes`
    letters = folds[positions].astype(np.uint64)
    letter_offsets = np.searchsorted(positions, offsets)  # text t's letters: letters[letter_offsets[t]:...[t + 1]]
    words, word_offsets = _words(letters, positions, letter_offsets)
    grams = _rolled(words, word_offsets, n, 1, GRAM_BASE, bitmap.bits)
    windows = _rolled(letters, letter_offsets, window, step, WINDOW_BASE, bitmap.bits)
    return grams, windows, marks, runs


def marks_reference(codes: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """scan_reference's marks and number runs alone."""
    codes, offsets = np.asarray(codes, dtype=np.uint32), np.asarray(offsets, dtype=np.int64)
    return _marks(codes, offsets, _classify(codes)[1])


def _classify(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(each code point's fold: its lower-cased letter or 0, a break; its kind: 2 a digit, 1 a cluster separator,
    else 0). Above the BMP, kinds are 2: the masker's `\\d` range is the astral planes whole (pii_checks.py)."""
    if not len(codes) or codes.max() < ASTRAL:
        return fold_table()[codes], kinds_table()[codes]
    astral = codes >= ASTRAL
    basic = np.where(astral, 0, codes)
    folds, kinds = fold_table()[basic], kinds_table()[basic]
    distinct, distinct_folds = astral_folds_of(codes)
    folds[astral] = distinct_folds[np.searchsorted(distinct, codes[astral])]
    kinds[astral] = 2
    return folds, kinds


# A power base**i is base**(i mod _BLOCK) times base**(_BLOCK * (i // _BLOCK)): a table of _BLOCK + 1 powers kept per
# base, and per call one of count / _BLOCK, instead of a cumulative product over every letter (8x the time).
_BLOCK_BITS = 12
_BLOCK = 1 << _BLOCK_BITS


@lru_cache(maxsize=None)
def _block_powers(base: int) -> np.ndarray:
    """base**i mod 2**64 for i <= _BLOCK (np.cumprod's uint64 products wrap, as the kernel's do)."""
    powers = np.full(_BLOCK + 1, base, dtype=np.uint64)
    powers[0] = 1
    return np.cumprod(powers)


def _powers(base: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(base**i for i < _BLOCK, base**(_BLOCK * j) for j <= count // _BLOCK)."""
    low = _block_powers(base)
    high = np.full(count // _BLOCK + 1, low[_BLOCK], dtype=np.uint64)
    high[0] = 1
    return low[:_BLOCK], np.cumprod(high, out=high)


def _powers_at(base: int, exponents: np.ndarray) -> np.ndarray:
    """base**e mod 2**64 for each of `exponents` (int64, not negative)."""
    low, high = _powers(base, int(exponents.max()) if len(exponents) else 0)
    return low[exponents & (_BLOCK - 1)] * high[exponents >> _BLOCK_BITS]


def _times_powers(items: np.ndarray, base: int) -> np.ndarray:
    """items[i] * base**i mod 2**64 for every i: whole blocks of _BLOCK as rows of a matrix, times both tables."""
    low, high = _powers(base, len(items))
    whole = len(items) - len(items) % _BLOCK
    result = np.empty_like(items)
    rows = result[:whole].reshape(-1, _BLOCK)
    np.multiply(items[:whole].reshape(-1, _BLOCK), low, out=rows)
    rows *= high[:len(rows), None]
    np.multiply(items[whole:], low[:len(items) - whole], out=result[whole:])
    result[whole:] *= high[len(rows)]
    return result


def _inverse(base: np.uint64) -> int:
    """base**-1 mod 2**64: every base is odd, so it exists."""
    return pow(int(base), -1, 1 << 64)


def _words(letters: np.ndarray, positions: np.ndarray, letter_offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the hash of every word, in text order; word_offsets: text t's words are words[word_offsets[t]:...[t + 1]]).
    A word starts at a letter whose code point does not follow the previous letter's, or that starts a text."""
    count = len(letters)
    if not count:
        return np.empty(0, np.uint64), np.zeros(len(letter_offsets), np.int64)
    starts = np.empty(count, dtype=bool)
    starts[0] = True
    np.not_equal(np.diff(positions), 1, out=starts[1:])
    starts[letter_offsets[letter_offsets < count]] = True
    word_starts = np.flatnonzero(starts)
    word_ends = np.append(word_starts[1:], count)  # exclusive
    # sum c_i B**(end-1-i) over a word: B**(end-1) times the sum of c_i B**-i (kernel: hash = hash * B + c).
    hashes = np.add.reduceat(_times_powers(letters, _inverse(WORD_BASE)), word_starts)
    hashes *= _powers_at(int(WORD_BASE), word_ends - 1)
    hashes ^= (word_ends - word_starts).astype(np.uint64)
    return fmix64(hashes), np.searchsorted(word_starts, letter_offsets)


def _rolled(items: np.ndarray, item_offsets: np.ndarray, width: int, step: int, base: np.uint64,
            bits: np.ndarray) -> Hashes:
    """fmix64 of sum items_i * base**(end-i) over the `width` items ending at each text's width-th item and
    every `step`-th after it (the kernel's rolling hashes: only whole spans are ever taken), those `bits` lets
    through, in text order."""
    texts = len(item_offsets) - 1
    lengths = np.diff(item_offsets)
    counts = np.where(lengths >= width, (lengths - width) // step + 1, 0)
    owners = np.repeat(np.arange(texts, dtype=np.int64), counts)
    if not len(owners):
        return Hashes(np.empty(0, np.uint64), owners)
    firsts = np.cumsum(counts) - counts  # where each text's spans begin in `owners`
    ends = item_offsets[owners] + (width - 1)  # inclusive: the span's last item
    ends += (np.arange(len(owners), dtype=np.int64) - firsts[owners]) * step
    prefix = np.zeros(len(items) + 1, dtype=np.uint64)  # prefix[i]: sum of items_j * base**-j for j < i
    np.cumsum(_times_powers(items, _inverse(base)), out=prefix[1:])
    values = prefix[ends + 1]
    values -= prefix[ends + 1 - width]
    values *= _powers_at(int(base), ends)
    fmix64(values)
    slot = values & np.uint64(len(bits) * 64 - 1)
    passes = ((bits[(slot >> np.uint64(6)).astype(np.int64)] >> (slot & np.uint64(63))) & np.uint64(1)).astype(bool)
    return Hashes(values[passes], owners[passes])


_HEX_OR_COLON_CODES = np.array([ord(char) for char in HEX_OR_COLON], dtype=np.uint32)
_AT_SIGN_CODES = np.array([ord(char) for char in AT_SIGNS], dtype=np.uint32)


def _runs(flags: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[start, end) of each run of True within one text (a text boundary splits a run in two)."""
    padded = np.zeros(len(flags) + 2, dtype=np.int8)  # one 0 either side: every run starts and ends
    padded[1:-1] = flags
    changes = np.flatnonzero(np.diff(padded))  # a run's start, then its end, alternately
    starts, ends = changes[0::2], changes[1::2]
    inner = offsets[1:-1]
    inner = inner[padded[inner] & padded[inner + 1] == 1]
    if len(inner):
        starts, ends = np.sort(np.concatenate((starts, inner))), np.sort(np.concatenate((ends, inner)))
    return starts, ends


def _marks(codes: np.ndarray, offsets: np.ndarray, kinds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the marks of each text (native/constants.py), the [start, end) that holds its qualifying number runs), as the
    compiled pass sets them."""
    texts = len(offsets) - 1
    marks = np.zeros(texts, dtype=np.uint8)
    runs = np.zeros((texts, 2), dtype=np.int64)

    def owner(at: np.ndarray) -> np.ndarray:
        return np.searchsorted(offsets, at, side="right") - 1

    def follows(at: np.ndarray, text: str) -> np.ndarray:
        """Which positions `at` have `text` just before them, in their own text."""
        ok = at - len(text) >= offsets[owner(at)]
        for back, char in enumerate(reversed(text), 1):
            ok &= codes[np.maximum(at - back, 0)] == ord(char)
        return ok

    marks[owner(np.flatnonzero(np.isin(codes, _AT_SIGN_CODES)))] |= AT_SIGN
    # An IPv6 candidate: a run of ASCII hex digits and colons that holds "::" or 7 colons.
    colons = np.flatnonzero(codes == ord(":"))
    colon_owners = owner(colons)
    doubled = colon_owners[1:][(colons[1:] == colons[:-1] + 1) & (colon_owners[1:] == colon_owners[:-1])]
    marks[doubled] |= COLONS
    starts, ends = _runs(np.isin(codes, _HEX_OR_COLON_CODES), offsets)
    in_run = np.searchsorted(colons, ends) - np.searchsorted(colons, starts)
    marks[owner(starts[in_run >= 7])] |= COLONS
    # "assport": the seven code points up to a 't' are those, within its text.
    for last, before in (("권", "여"), ("t", "asspor")):
        at = np.flatnonzero(codes == ord(last))
        marks[owner(at[follows(at, before)])] |= PASSPORT

    # Runs of kinds 1 and 2 (digits, separators) within one text; a run of NUMBER_RUN or more that holds a digit
    # sets NUMBERS.
    starts, ends = _runs(kinds != 0, offsets)
    long = ends - starts >= NUMBER_RUN
    starts, ends = starts[long], ends[long]
    if len(starts):
        digits = np.flatnonzero(kinds == 2)
        holds_digit = np.searchsorted(digits, starts) < np.searchsorted(digits, ends)
        starts, ends = starts[holds_digit], ends[holds_digit]
    if len(starts):
        run_owners = owner(starts)
        marks[run_owners] |= NUMBERS
        first = np.concatenate(([True], run_owners[1:] != run_owners[:-1]))
        last = np.concatenate((run_owners[1:] != run_owners[:-1], [True]))
        runs[run_owners[first], 0] = starts[first] - offsets[run_owners[first]]
        runs[run_owners[last], 1] = ends[last] - offsets[run_owners[last]]
    return marks, runs
