"""The numba kernel of ngram_scan.py (its own module so that numba is imported only when it is used, and so
that numba can cache the compiled code: it caches module-level functions only)."""

import numba
import numpy as np

from rankzero.data.hashing import compiled, fmix64
# The constants are ngram_reference.py's, the definition this kernel must match (tests/test_ngram_reference.py).
from rankzero.data.ngram_reference import AT_SIGN, COLONS, GRAM_BASE, NUMBER_RUN, NUMBERS, PASSPORT, WINDOW_BASE, \
    WORD_BASE

_ASSPORT = np.uint64(int.from_bytes(b"assport", "big"))  # the last seven ASCII code points, a byte each
_SEVEN_BYTES = np.uint64((1 << 56) - 1)


_fmix64 = compiled(fmix64)  # every input bit reaches every output bit (the bitmap uses low bits)


@numba.njit(inline="always")
def _passes(bits, value):
    slot = value & np.uint64(len(bits) * 64 - 1)
    return (bits[np.int64(slot >> np.uint64(6))] >> (slot & np.uint64(63))) & np.uint64(1)


@compiled
def scan_kernel(codes, offsets, table, astral, astral_folds, n, window, step, bits, grams, gram_owners, windows,
                window_owners, kinds, marks, runs):
    """See ngram_scan.scan. One pass over each text's code points. The n-gram and window hashes roll (Rabin-Karp:
    times the base, plus the newest, minus the oldest times base**length; mod 2**64), so each costs the same
    whatever n and window are; the oldest word and character come from rings of the last n and `window`. The
    hashes that pass go to the output arrays, which the caller sizes for every possible one; returns how many.
    Beside them, marks[text] gets NUMBERS where the text has a run of NUMBER_RUN characters of `kinds` 1 or 2
    (digits and the separators of pii_checks.py's number clusters) holding a digit (2), astral code points counting as
    digits; AT_SIGN for an '@'; COLONS for "::" or 7 colons; PASSPORT for "여권" or "assport". runs[text] gets where
    the runs that set NUMBERS lie: [start of the first, end of the last), offsets within the text."""
    gram_count = 0
    window_count = 0
    words = np.zeros(n, np.uint64)
    chars = np.zeros(window, np.uint64)
    gram_power = np.uint64(1)
    for _ in range(n):
        gram_power *= GRAM_BASE
    window_power = np.uint64(1)
    for _ in range(window):
        window_power *= WINDOW_BASE
    for text in range(len(offsets) - 1):
        words[:] = 0
        chars[:] = 0
        word_count = 0
        word_slot = 0
        gram = np.uint64(0)
        char_count = 0
        char_slot = 0
        rolling = np.uint64(0)
        until_window = window  # characters until the next sampled window ends
        hash_ = np.uint64(0)
        length = 0
        run = 0
        digit = False
        colons = 0
        previous = 0
        ascii_tail = np.uint64(0)
        end = offsets[text + 1]
        for at in range(offsets[text], end + 1):  # one step past the end closes the last word
            code = np.uint64(0)  # the lower-cased word character, or 0: a break (and the end of the text)
            if at < end:
                raw = codes[at]
                if raw < 128:
                    ascii_tail = ((ascii_tail << np.uint64(8)) | np.uint64(raw)) & _SEVEN_BYTES
                    if raw == 64:
                        marks[text] |= AT_SIGN
                    elif raw == 58:
                        colons += 1
                        if previous == 58 or colons >= 7:
                            marks[text] |= COLONS
                    elif raw == 116 and ascii_tail == _ASSPORT:
                        marks[text] |= PASSPORT
                else:
                    ascii_tail = np.uint64(0)
                    if raw == 0xAD8C and previous == 0xC5EC:  # 권 after 여
                        marks[text] |= PASSPORT
                previous = raw
                if codes[at] < 65536:
                    code = np.uint64(table[codes[at]])
                    kind = kinds[codes[at]]
                else:
                    code = np.uint64(astral_folds[np.searchsorted(astral, codes[at])])
                    kind = 2
                if kind:
                    run += 1
                    digit = digit or kind == 2
                    if run >= NUMBER_RUN and digit:
                        if not marks[text] & NUMBERS:
                            marks[text] |= NUMBERS
                            runs[text, 0] = at - offsets[text] - run + 1
                        runs[text, 1] = at - offsets[text] + 1
                else:
                    run = 0
                    digit = False
            if code:
                hash_ = hash_ * WORD_BASE + code
                length += 1
                rolling = rolling * WINDOW_BASE + code - chars[char_slot] * window_power
                chars[char_slot] = code
                char_slot += 1
                if char_slot == window:
                    char_slot = 0
                char_count += 1
                until_window -= 1
                if until_window == 0:
                    until_window = step
                    value = _fmix64(rolling)
                    if _passes(bits, value):
                        windows[window_count] = value
                        window_owners[window_count] = text
                        window_count += 1
            elif length:
                word_hash = _fmix64(hash_ ^ np.uint64(length))
                gram = gram * GRAM_BASE + word_hash - words[word_slot] * gram_power
                words[word_slot] = word_hash
                word_slot += 1
                if word_slot == n:
                    word_slot = 0
                word_count += 1
                hash_ = np.uint64(0)
                length = 0
                if word_count >= n:
                    value = _fmix64(gram)
                    if _passes(bits, value):
                        grams[gram_count] = value
                        gram_owners[gram_count] = text
                        gram_count += 1
    return gram_count, window_count
