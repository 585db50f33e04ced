"""The numbers the compiled passes (passes.c) and their numpy references share, as plain Python integers.

    from rankzero.data.native.constants import NUMBERS, AT_SIGN     # the marks decontamination's pass sets

This module imports nothing: setup.py reads it (runpy) to write each name of C_CONSTANTS into the header the
extension is compiled with (passes_constants.h), so the C and the Python cannot disagree, and the built module
reports the values it was compiled with (`_passes.CONSTANTS`, compared in tests/data/native/test_native.py). hashing.py holds the
hashes' numbers as the numpy types the references compute in.
"""

# Hashes: a word's polynomial of its code points (odd: invertible mod 2**64, near dedup and decontamination); the
# polynomial of decontamination's spaceless windows' letters; that of its word n-grams' word hashes.
WORD_BASE = 0x100000001B3
WINDOW_BASE = 0x9E3779B97F4A7C15
GRAM_BASE = 0xBF58476D1CE4E5B9

# Code point tables (near dedup's dedup/shingles.py, dedup/kernel.py; decontamination's screen/scan.py): a code point
# dropped from the text; one whose text unicodedata must normalise; EXPANDED + i, one that NFKC makes several of
# (their folds at expansions[i + 1:]).
DELETE = 0xFFFFFFFF
SLOW = 0xFFFFFFFE
EXPANDED = 0x80000000

# What decontamination's pass marks in a text for the PII masker (screen/pii.py), each a necessary condition for
# what PiiMasker.find looks for: a run of NUMBER_RUN digits and cluster separators holding a digit (pii.py's number
# clusters), an '@' or its full-width or small form (e-mail: NFKC's '@', which the masker reads as one,
# pii_forms.address_view), a run of ASCII hex digits and colons holding "::" or 7 colons (an IPv6 candidate),
# "여권" or "assport" (passport numbers). A text with none of them gives the masker nothing to look at.
NUMBER_RUN = 7  # the shortest number cluster pii.py looks into
NUMBERS, AT_SIGN, COLONS, PASSPORT = 1, 2, 4, 8
AT_SIGNS = "@\uff20\ufe6b"
HEX_OR_COLON = "0123456789ABCDEFabcdef:"  # what an IPv6 candidate is made of (pii_checks.ipv6_candidates)

C_CONSTANTS = ("WORD_BASE", "WINDOW_BASE", "GRAM_BASE", "DELETE", "SLOW", "EXPANDED", "NUMBER_RUN", "NUMBERS",
               "AT_SIGN", "COLONS", "PASSPORT")
