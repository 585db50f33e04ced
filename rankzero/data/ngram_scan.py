"""The per-character work of decontamination (decontaminate.py) in one compiled pass over a batch of texts.

    texts = [prepare(text) for text in texts]              # NFKC of the words that need it (nfkc)
    codes, offsets = code_points(texts)                    # all texts' code points, flat, and where each starts
    bitmap = Bitmap.of(keys)                               # what `scan` may skip: no key hashes to a clear bit
    grams, windows, marks, runs = scan(codes, offsets, 8, 8, 4, bitmap)  # n, window, step; Hashes; MARKS; spans
    marks, runs = marks_of(texts)                          # the marks alone, of texts as given: what the masker reads

A *word* is a maximal run of word characters (`str.isalnum`: what `\\w` means in `re`, less "_"), lower-cased
by a table; everything else — spaces, punctuation, symbols — is a word break, as in decontaminate.words_of. `scan` hashes each word
(a polynomial over its code points, then MurmurHash3's finaliser), each run of `n` consecutive words of a
text, and each `window`-character window of the text's words written without spaces that starts at every
`step`-th character. With a bitmap it returns only the hashes whose bit is set: a document holding no
benchmark item gives almost nothing back, so no per-hash Python or sorting follows.

One loop per character in C (passes.c, through native.py: no GIL held, so the tokenizer's threads keep running)
because the same work in Python (regex, split, a hash per word) ran at 12 MB/s per core, most of the prepare's
time with --decontaminate; no library hashes word n-grams and spaceless windows of Unicode text in one pass.
ngram_reference.py defines the same numbers in whole-array numpy: what a process without a C compiler runs, and
what the tests hold the compiled pass to.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import numpy as np

from rankzero.data import native
# What scan computes is defined there, with its constants and code point tables (MARKS, NUMBERS and Hashes are
# read from here by decontaminate.py and screen.py).
from rankzero.data.ngram_reference import ASTRAL, MARKS, NUMBERS, Hashes, _astral_folds, _fold_table, _kinds_table


def prepare(text: str) -> str:
    """NFKC (checked first: most text already is). Lower case is the kernel's, one code point at a time, except
    where it is not a function of the code point alone: capital sigma (final or not) and the dotted capital I
    (two code points in lower case); a text holding one is lower-cased here."""
    if not unicodedata.is_normalized("NFKC", text):
        text = nfkc(text)
    return text.lower() if "\u03a3" in text or "\u0130" in text else text


# Code points NFKC leaves as they are wherever they stand: no compatibility or canonical mapping, no combining
# class, and never the second of a composition (tests/test_decontaminate.py checks each). ASCII, Hangul
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


def code_points(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(uint32 code points of all texts back to back, int64 offsets: text i is codes[offsets[i]:offsets[i+1]])."""
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), out=offsets[1:])
    codes = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    return codes, offsets


def letters(codes: np.ndarray) -> str:
    """The word characters of prepared code points, lower-cased, without the breaks between words: what the
    kernel's windows read (for the few texts whose whole question is checked by a substring test)."""
    folded = np.zeros(len(codes), dtype=np.uint32)
    basic = codes < ASTRAL
    folded[basic] = _fold_table()[codes[basic]]
    astral, astral_folds = _astral_folds(codes)
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


def scan(codes: np.ndarray, offsets: np.ndarray, n: int, window: int, step: int,
         bitmap: Bitmap) -> tuple[Hashes, Hashes, np.ndarray, np.ndarray]:
    """(word n-gram hashes, window hashes) of each text, in text order, those whose bit `bitmap` sets; a uint8
    of MARKS per text: what of pii.py's candidates it may hold; and per text the [start, end) offsets that hold
    every run of NUMBER_RUN digits and separators with a digit (0, 0 for none): where its clusters can be. A clear
    NUMBERS bit proves the text holds no number cluster, in the text as given to `prepare` too: NFKC maps every digit and separator to digits and
    separators (a digit to a digit) and composes none of them with a neighbour (tests/test_pii.py checks every
    code point), so a run of them only grows. The other bits are exact for the text scanned; only for a text
    that `prepare` returned unchanged are they the masker's own tests (ContaminationIndex.find_with_marks)."""
    passes = native.library()
    if passes is None:
        from rankzero.data.ngram_reference import scan_reference

        return scan_reference(codes, offsets, n, window, step, bitmap)
    return _compiled_scan(passes, codes, offsets, n, window, step, bitmap, hashing=True)


def marks_of(texts: list[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """scan's marks and number runs of each text as given (no `prepare`: the masker reads the text as given), with
    no hash formed: what the PII masker needs to skip most documents, where no --decontaminate pass gives it.
    None where the compiled pass is unavailable (the masker then looks at every text itself)."""
    passes = native.library()
    if passes is None:
        return None
    codes, offsets = code_points(texts)
    _, _, marks, runs = _compiled_scan(passes, codes, offsets, 1, 1, 1, Bitmap.everything(), hashing=False)
    return marks, runs


def _compiled_scan(passes, codes: np.ndarray, offsets: np.ndarray, n: int, window: int, step: int, bitmap: Bitmap,
                   hashing: bool) -> tuple[Hashes, Hashes, np.ndarray, np.ndarray]:
    astral, astral_folds = _astral_folds(codes)
    # Room for every n-gram (a word and its break take two code points) and every window: np.empty only
    # reserves the memory, and the pages written are those of the few hashes that pass.
    gram_room = (len(codes) // 2 + len(offsets)) if hashing else 0
    window_room = (len(codes) // step + len(offsets)) if hashing else 0
    grams = Hashes(np.empty(gram_room, np.uint64), np.empty(gram_room, np.int64))
    windows = Hashes(np.empty(window_room, np.uint64), np.empty(window_room, np.int64))
    marks = np.zeros(len(offsets) - 1, dtype=np.uint8)
    runs = np.zeros((len(offsets) - 1, 2), dtype=np.int64)
    counts = np.zeros(2, dtype=np.int64)
    passes.scan(codes, offsets, len(offsets) - 1, _fold_table(), astral, len(astral), astral_folds, n, window, step,
                int(hashing), bitmap.bits, len(bitmap.bits), _kinds_table(), np.zeros(n, np.uint64),
                np.zeros(window, np.uint64), *grams, *windows, marks, runs, counts)
    gram_count, window_count = counts.tolist()
    return (Hashes(grams.values[:gram_count], grams.owners[:gram_count]),
            Hashes(windows.values[:window_count], windows.owners[:window_count]), marks, runs)
