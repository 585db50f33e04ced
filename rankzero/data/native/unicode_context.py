"""Which code points NFKC treats in context, for the compiled passes that normalise one code point at a time.

    in_context("\u0301")          # True: a combining mark (reordered, composed with what precedes it)
    alone("㈜")                   # "(주)": NFKC of a code point wherever it stands, None where context decides
    in_context_table()            # the same for every code point of the Basic Multilingual Plane, as a bool array
    expansions, most = fill_folds(table, codes, folds_of)   # a pass's table of each code point's folds

NFKC of a text is the NFKC of each code point, joined, except where a code point takes part in canonical
reordering or composition with a neighbour: a combining mark, or a starter that is the second of a canonical pair
(Hangul's algorithmic pairs aside: the passes compose those themselves). Near dedup's pass (dedup/kernel.py) and
decontamination's (scan.py) send a text holding such a code point to `unicodedata` instead.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

import numpy as np

from rankzero.data.native.hashing import EXPANDED, SLOW
from rankzero.data.native.table_cache import cached


def fill_folds(table: np.ndarray, codes, folds_of) -> tuple[np.ndarray, int]:
    """Writes each of `codes`' folds into `table` as the compiled passes read it: SLOW where `folds_of(code)` is None
    (its text goes to unicodedata), the fold where it is one, EXPANDED + i where it is several (expansions[i] of
    them at expansions[i + 1:]). Returns (expansions, the most folds of one code point)."""
    expansions, most = [0], 1
    for code in codes:
        folds = folds_of(code)
        if folds is None:
            table[code] = SLOW
        elif len(folds) == 1:
            table[code] = folds[0]
        else:
            table[code] = EXPANDED + len(expansions)
            expansions += [len(folds), *folds]
            most = max(most, len(folds))
    return np.array(expansions, dtype=np.uint32), most


def alone(char: str) -> str | None:
    """NFKC of `char`, where that is what NFKC makes of it in any text; None where it depends on the code points
    around it: a combining mark or a starter that composes with the code point before it, first in the
    decomposition (what meets the previous code point) or anywhere in the result (what meets the next). Hangul
    jamo are not in context here: the passes compose them, or send their text to unicodedata."""
    mapped = unicodedata.normalize("NFKC", char)
    if in_context(unicodedata.normalize("NFKD", char)[:1]) or any(map(in_context, mapped)):
        return None
    return mapped


def in_context(char: str) -> bool:
    """A combining mark (reordered, composed) or a starter that composes with the code point before it."""
    return char != "" and (unicodedata.combining(char) != 0 or ord(char) in composing_seconds())


@lru_cache(maxsize=1)
def in_context_table() -> np.ndarray:
    """Per BMP code point: a combining mark, or a starter that composes with the code point before it."""
    table = np.fromiter(map(unicodedata.combining, map(chr, range(0x10000))), dtype=np.int64, count=0x10000) != 0
    table[np.array(sorted(code for code in composing_seconds() if code < 0x10000), dtype=np.int64)] = True
    return table


@lru_cache(maxsize=1)
def composing_seconds() -> frozenset[int]:
    """The second code point of every canonical pair decomposition: what canonical composition may merge into the
    code point before it (Hangul's algorithmic pairs are not among them). Canonical pair decompositions end below
    U+30000 (tests/data/dedup/test_dedup_kernel.py checks the whole range). Read from this installation's cache after a
    first build (table_cache.py)."""
    return frozenset(cached("composing_seconds", build_composing_seconds, [__file__])["codes"].tolist())


def build_composing_seconds() -> dict[str, np.ndarray]:
    pairs = (decomposition.split() for decomposition in map(unicodedata.decomposition, map(chr, range(0x30000)))
             if decomposition and decomposition[0] != "<")
    return {"codes": np.array(sorted({int(parts[1], 16) for parts in pairs if len(parts) == 2}), dtype=np.int64)}
