"""The per-character work of decontamination (decontaminate.py) in one compiled pass over a batch of texts.

    texts = [prepare(text) for text in texts]              # NFKC of the words that need it (nfkc)
    codes, offsets = code_points(texts)                    # all texts' code points, flat, and where each starts
    bitmap = Bitmap.of(keys)                               # what `scan` may skip: no key hashes to a clear bit
    grams, windows, marks, runs = scan(codes, offsets, 8, 8, 4, bitmap)  # n, window, step; Hashes; marks; spans
    marks, runs = marks_of(texts)                          # the marks alone, of texts as given: what the masker reads

A *word* is a maximal run of word characters (`str.isalnum`: what `\\w` means in `re`, less "_"), lower-cased
by a table; everything else — spaces, punctuation, symbols — is a word break, as in decontaminate.words_of.
`scan` hashes each word (a polynomial over its code points, then MurmurHash3's finaliser), each run of `n`
consecutive words of a text, and each `window`-character window of the text's words written without spaces that
starts at every `step`-th character. With a bitmap it returns only the hashes whose bit is set: a document holding no
benchmark item gives almost nothing back, so no per-hash Python or sorting follows.

One loop per character in C (passes.c, through native/: no GIL held, so the tokenizer's threads keep running)
because the same work in Python (regex, split, a hash per word) ran at 12 MB/s per core, most of the prepare's
time with --decontaminate; no library hashes word n-grams and spaceless windows of Unicode text in one pass.
reference.py defines the same numbers in whole-array numpy: what runs where the install built no extension
(native.or_reference chooses per call), and what the tests hold the compiled pass to.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import numpy as np

from rankzero.data import native
from rankzero.data.native import code_points, constants, unicode_context
from rankzero.data.native.constants import AT_SIGNS, HEX_OR_COLON
from rankzero.data.native.hashing import EXPANDED, SLOW
from rankzero.data.native.table_cache import cached
from rankzero.data.native.unicode_context import alone, in_context_table
from rankzero.data.screen import reference
# What scan computes is defined there, with its code point tables (Hashes is read from here by decontaminate.py).
from rankzero.data.screen.reference import (ASTRAL, Hashes, astral_folds_of, fold, fold_table, kinds_table,
                                            marks_reference, scan_reference)


def prepare(text: str) -> str:
    """NFKC (checked first: most text already is). Lower case is the kernel's, one code point at a time, except
    where it is not a function of the code point alone: capital sigma (final or not) and the dotted capital I
    (two code points in lower case); a text holding one is lower-cased here."""
    if not unicodedata.is_normalized("NFKC", text):
        text = nfkc(text)
    return text.lower() if "\u03a3" in text or "\u0130" in text else text


# Code points NFKC leaves as they are wherever they stand: no compatibility or canonical mapping, no combining
# class, and never the second of a composition (tests/data/screen/test_decontaminate.py checks each). ASCII, Hangul
# syllables, CJK ideographs and the quotes, brackets and dots Korean text uses.
_UNSTABLE = re.compile("[^\x00-\x7f\u00b7\u2018\u2019\u201c\u201d\u3008-\u3011\u4e00-\u9fff\uac00-\ud7a3]")
_MOST_WINDOWS = 64  # a text with more such words (Japanese, say) is normalised whole, in one call, as before


def nfkc(text: str) -> str:
    """unicodedata.normalize("NFKC", text), normalising only the words (runs between spaces and line breaks) that
    hold a code point _UNSTABLE matches. Exact: a space or line break composes with nothing on either side and
    stops reordering, so NFKC of a text is that of its pieces between them, and a word of stable code points is
    its own NFKC. A petition with one "①" or "ㅠㅠ" is no longer decomposed and recomposed whole (what that saves on
    real Korean, where one text in nine needs NFKC: bench/RESULTS.md, issue 32)."""
    pieces, last = [], 0
    for match in _UNSTABLE.finditer(text):
        at = match.start()
        if at < last:
            continue
        if len(pieces) >= 2 * _MOST_WINDOWS:
            return unicodedata.normalize("NFKC", text)
        start = max(text.rfind(" ", last, at), last - 1) + 1
        start = max(text.rfind("\n", start, at), start - 1) + 1
        end = text.find(" ", at)
        end = len(text) if end < 0 else end
        end = min(end, text.find("\n", at, end) % (len(text) + 1))  # -1 (none) becomes len(text)
        pieces += (text[last:start], unicodedata.normalize("NFKC", text[start:end]))
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def letters(codes: np.ndarray) -> str:
    """The word characters of prepared code points, lower-cased, without the breaks between words: what the
    kernel's windows read (for the few texts whose whole question is checked by a substring test)."""
    folded = np.zeros(len(codes), dtype=np.uint32)
    basic = codes < ASTRAL
    folded[basic] = fold_table()[codes[basic]]
    astral, astral_folds = astral_folds_of(codes)
    if len(astral):
        folded[~basic] = astral_folds[np.searchsorted(astral, codes[~basic])]
    return folded[folded != 0].tobytes().decode("utf-32-le", "surrogatepass")


class Bitmap:
    """A set of 64-bit hashes as bits (one per key's low bits): a bit that is clear proves a hash is no key.
    64-128 bits per key keep chance hits near 1% (at 16-32, 6% of a text's hashes came back, and sorting and
    looking them up was a tenth of `find`; bench/RESULTS.md), at most 2**27 bits (16 MB)."""

    def __init__(self, bits: np.ndarray):
        self.bits = bits

    @classmethod
    def of(cls, *keys: np.ndarray) -> Bitmap:
        count = sum(len(k) for k in keys)
        size = 1 << min(27, max(12, (64 * count).bit_length()))
        bits = np.zeros(size // 64, dtype=np.uint64)
        for values in keys:
            slots = values & np.uint64(size - 1)
            np.bitwise_or.at(bits, (slots >> np.uint64(6)).astype(np.int64), np.uint64(1) << (slots & np.uint64(63)))
        return cls(bits)

    @classmethod
    def everything(cls) -> Bitmap:
        """No filter: every hash passes."""
        return cls(np.full(1, np.uint64(0xFFFFFFFFFFFFFFFF)))


@native.or_reference(scan_reference)
def scan(codes: np.ndarray, offsets: np.ndarray, n: int, window: int, step: int,
         bitmap: Bitmap) -> tuple[Hashes, Hashes, np.ndarray, np.ndarray]:
    """(word n-gram hashes, window hashes) of each text of `prepare`d code points, in text order, those whose bit
    `bitmap` sets; a uint8 of marks per text: what of pii.py's candidates it may hold (native/constants.py); and per text the
    [start, end) offsets that hold every run of NUMBER_RUN digits and separators with a digit (0, 0 for none):
    where its clusters can be. reference.scan_reference defines them."""
    astral, astral_folds = astral_folds_of(codes)
    grams, windows, marks, runs, _ = _compiled_scan(codes, offsets, n, window, step, bitmap, 1, fold_table(),
                                                    _NO_EXPANSIONS, astral, astral_folds)
    return grams, windows, marks, runs


def _reference_scan_texts(texts: list[str], n: int, window: int, step: int,
                          bitmap: Bitmap) -> tuple[Hashes, Hashes, np.ndarray, np.ndarray]:
    """scan_texts in numpy: scan_reference's hashes of the `prepare`d texts, marks_reference's of the texts as given."""
    grams, windows, _, _ = scan_reference(*code_points([prepare(text) for text in texts]), n, window, step, bitmap)
    return (grams, windows, *marks_reference(*code_points(texts)))


@native.or_reference(_reference_scan_texts)
def scan_texts(texts: list[str], n: int, window: int, step: int,
               bitmap: Bitmap) -> tuple[Hashes, Hashes, np.ndarray, np.ndarray]:
    """`scan`'s hashes of the texts `prepare`d, with the marks and number runs of the texts as given (what the
    masker reads). The compiled pass normalises as it goes, by a table of each code point's folds under NFKC
    (_normalising_table); a text where that is not a function of each code point alone (a combining mark, Hangul
    jamo that compose, capital sigma: 21 of 13,068 real Korean texts) is `prepare`d in Python and scanned again.
    `prepare` on every text, one in nine of which needs NFKC, held the GIL for a sixth of the screen's time."""
    codes, offsets = code_points(texts)
    table, expansions = _normalising_table()
    astral, astral_folds = _astral_normalised_folds(codes)
    grams, windows, marks, runs, slow = _compiled_scan(codes, offsets, n, window, step, bitmap, 2, table,
                                                       expansions, astral, astral_folds)
    again = np.flatnonzero(slow)
    if len(again):
        more_grams, more_windows, _, _ = scan(*code_points([prepare(texts[i]) for i in again.tolist()]), n, window,
                                              step, bitmap)
        grams = _merged(grams, Hashes(more_grams.values, again[more_grams.owners]))
        windows = _merged(windows, Hashes(more_windows.values, again[more_windows.owners]))
    return grams, windows, marks, runs


def _merged(first: Hashes, second: Hashes) -> Hashes:
    """Both, in text order (each text's hashes come from one of them, in their order)."""
    if not len(second.values):
        return first
    owners = np.concatenate((first.owners, second.owners))
    order = np.argsort(owners, kind="stable")
    return Hashes(np.concatenate((first.values, second.values))[order], owners[order])


def _reference_marks_of(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    return marks_reference(*code_points(texts))


@native.or_reference(_reference_marks_of)
def marks_of(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """scan's marks and number runs of each text as given, with no hash formed: what the PII masker needs to skip
    most documents, where no --decontaminate pass gives it."""
    codes, offsets = code_points(texts)
    astral, astral_folds = astral_folds_of(codes)
    _, _, marks, runs, _ = _compiled_scan(codes, offsets, 1, 1, 1, Bitmap.everything(), 0, fold_table(),
                                          _NO_EXPANSIONS, astral, astral_folds)
    return marks, runs


_NO_EXPANSIONS = np.zeros(1, dtype=np.uint32)


@lru_cache(maxsize=1)
def _marking_kinds() -> np.ndarray:
    """kinds_table (1 a number separator, 2 a digit) as the compiled pass reads it, with three bits more: 4 for the
    code points the other marks start from (the at signs, ":", "t" of "assport", "권" of "여권": one test a code point
    finds them all), 8 for what an IPv6 candidate is made of (ASCII hex digits and ':'), 16 for an at sign (the
    table, not the C, says which code points are: constants.AT_SIGNS)."""
    kinds = kinds_table().copy()
    special = [ord(char) for char in AT_SIGNS + ":t권"]
    assert not kinds[special].any(), "a marked code point is a digit or a number separator"
    kinds[special] |= 4
    kinds[[ord(char) for char in HEX_OR_COLON]] |= 8
    kinds[[ord(char) for char in AT_SIGNS]] |= 16
    return kinds


def _compiled_scan(codes: np.ndarray, offsets: np.ndarray, n: int, window: int, step: int, bitmap: Bitmap,
                   hashing: int, table: np.ndarray, expansions: np.ndarray, astral: np.ndarray,
                   astral_folds: np.ndarray) -> tuple[Hashes, Hashes, np.ndarray, np.ndarray, np.ndarray]:
    """passes.c's scan; `hashing` 0 (marks alone), 1 (prepared code points) or 2 (as read, `table` normalising)."""
    assert n >= 1 and window >= 1 and step >= 1, (n, window, step)  # the rings' sizes
    texts = len(offsets) - 1
    marks, runs = np.zeros(texts, dtype=np.uint8), np.zeros((texts, 2), dtype=np.int64)
    slow, counts = np.zeros(texts, dtype=np.uint8), np.zeros(3, dtype=np.int64)
    # Room for every n-gram (a word and its break take two code points) and every window, unless expansions
    # make more (then again with twice the room): np.empty only reserves the memory, and the pages written are
    # those of the few hashes that pass.
    room = (len(codes) // min(2, step) + len(offsets)) if hashing else 0
    while True:
        grams = Hashes(np.empty(room, np.uint64), np.empty(room, np.int64))
        windows = Hashes(np.empty(room, np.uint64), np.empty(room, np.int64))
        native.passes().scan(codes, offsets, table, expansions, astral, astral_folds, n, window, step, hashing,
                             bitmap.bits, _marking_kinds(), *grams, *windows, marks, runs, slow, counts)
        if not counts[2]:
            break
        room *= 2
        marks[:], runs[:] = 0, 0
    gram_count, window_count = int(counts[0]), int(counts[1])
    return (Hashes(grams.values[:gram_count], grams.owners[:gram_count]),
            Hashes(windows.values[:window_count], windows.owners[:window_count]), marks, runs, slow)


def normalised_folds(code: int) -> list[int] | None:
    """The folds (reference._fold) of NFKC(code), where `prepare` gives them whatever stands around it; else
    None. A Hangul jamo is its own fold: the compiled pass sends a text to `prepare` where two compose."""
    mapped = alone(chr(code))
    if mapped is None or "\u03a3" in mapped or "\u0130" in mapped:  # what `prepare` lower-cases whole texts for
        return None
    return [fold(ord(part)) for part in mapped]


def _astral_normalised_folds(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted code points above the BMP in `codes`, the normalised fold of each, SLOW where that is not one)."""
    astral, _ = astral_folds_of(codes)
    folds = [normalised_folds(int(code)) for code in astral]
    return astral, np.array([parts[0] if parts and len(parts) == 1 and not _composing(parts[0]) else SLOW
                             for parts in folds], dtype=np.uint32)


def _composing(folds):
    """A vowel or a final jamo: a fold Hangul composes with the one before it (passes.c's `composes`). Of one fold
    or, element-wise, of an array of them."""
    return ((folds >= 0x1161) & (folds <= 0x1175)) | ((folds >= 0x11A8) & (folds <= 0x11C2))


@lru_cache(maxsize=1)
def _normalising_table() -> tuple[np.ndarray, np.ndarray]:
    """normalised_folds of the Basic Multilingual Plane as the compiled pass reads them: a fold, SLOW, or
    EXPANDED + i for several folds (expansions[i] of them at expansions[i + 1:]). Built once per installation
    (table_cache.py)."""
    arrays = cached("ngram_nfkc", _build_normalising_table,
                    [__file__, reference.__file__, constants.__file__, unicode_context.__file__])
    return arrays["table"], arrays["expansions"]


def _build_normalising_table() -> dict[str, np.ndarray]:
    """NFKC of the whole plane in one call, each code point behind U+0000 (a starter that composes with nothing, so
    each comes out as it would alone); normalised_folds for the code points it changes or that stand in context."""
    chars = list(map(chr, range(1, ASTRAL)))
    joined = "\0".join(chars)
    context = in_context_table()
    table = np.empty(ASTRAL, dtype=np.uint32)
    table[:] = fold_table()
    unchanged = [a == b for a, b in zip(chars, unicodedata.normalize("NFKC", joined).split("\0"))]
    decomposed = [d[0] for d in unicodedata.normalize("NFKD", joined).split("\0")]
    expansions, _ = unicode_context.fill_folds(table, (
        index + 1 for index, same in enumerate(unchanged) if not same or context[index + 1]
        or context[ord(decomposed[index])] or chars[index] in "\u03a3\u0130"), normalised_folds)
    # A fold that Hangul composes with the one before it (a vowel or a final jamo: ㅠ, ㅏ, ㄳ...) is written as an
    # expansion of one, whose path asks passes.c's `composes`: the path of a single fold then asks nothing.
    composing = np.flatnonzero(_composing(table))
    extra = np.empty(2 * len(composing), dtype=np.uint32)
    extra[0::2], extra[1::2] = 1, table[composing]
    table[composing] = EXPANDED + len(expansions) + 2 * np.arange(len(composing), dtype=np.uint32)
    return {"table": table, "expansions": np.concatenate((expansions, extra))}
