"""The numbers near dedup's and decontamination's hashes are made of, shared by the numpy references (dedup/shingles.py,
reference.py) and the compiled passes (passes.c, which native/ compiles with each of C_CONSTANTS as a
#define: the C and the Python cannot disagree); and MurmurHash3's finaliser in numpy.

    mixed = fmix64(values)                  # numpy, in place, uint64
"""

from __future__ import annotations

import numpy as np

WORD_BASE = np.uint64(0x100000001B3)  # a word's polynomial hash of its code points (odd: invertible mod 2**64)
WINDOW_BASE = np.uint64(0x9E3779B97F4A7C15)  # decontamination's spaceless windows: the polynomial of their letters
GRAM_BASE = np.uint64(0xBF58476D1CE4E5B9)  # decontamination's word n-grams: the polynomial of their words' hashes
# In near dedup's tables (dedup/shingles.py, dedup/kernel.py): a code point dropped from the text; one whose text
# unicodedata must normalise; EXPANDED + i, one that NFKC makes several of (their folds at expansions[i + 1:]).
DELETE, SLOW, EXPANDED = np.uint32(0xFFFFFFFF), np.uint32(0xFFFFFFFE), np.uint32(0x80000000)
# What decontamination's pass marks in a text, each a necessary condition for what pii.PiiMasker.find looks for: a
# run of NUMBER_RUN digits and cluster separators holding a digit (pii.py's number clusters), an '@' or its
# full-width or small form (e-mail: NFKC's '@', which the masker reads as one, pii_forms.address_view), a
# run of ASCII hex digits and colons holding "::" or 7 colons (an IPv6 candidate), "여권" or "assport" (passport
# numbers). A text with none of them gives the masker nothing to look at.
NUMBER_RUN = 7  # the shortest number cluster pii.py looks into
NUMBERS, AT_SIGN, COLONS, PASSPORT = 1, 2, 4, 8
AT_SIGNS = "@\uff20\ufe6b"
HEX_OR_COLON = "0123456789ABCDEFabcdef:"  # what an IPv6 candidate is made of (pii_checks.ipv6_candidates)
C_CONSTANTS = ("WORD_BASE", "WINDOW_BASE", "GRAM_BASE", "DELETE", "SLOW", "EXPANDED", "NUMBER_RUN", "NUMBERS",
               "AT_SIGN", "COLONS", "PASSPORT")


def fmix64(values: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser: spreads every input bit over the output (in place)."""
    values ^= values >> np.uint64(33)
    values *= np.uint64(0xFF51AFD7ED558CCD)
    values ^= values >> np.uint64(33)
    values *= np.uint64(0xC4CEB9FE1A85EC53)
    values ^= values >> np.uint64(33)
    return values
