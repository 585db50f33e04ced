"""Character shares, every document: symbols, punctuation, digits, link lines.

Language-agnostic and cheap (a C-level regular-expression pass each), with thresholds that ordinary
Korean and English prose and source code pass. Shares are per non-space character, outside table rows
(structure.py) unless the document is all table.
"""

from __future__ import annotations

import functools
import re
from collections import Counter

import numpy as np

from rankzero.data.quality.structure import without_table_rows

WHITESPACE = re.compile(r"\s")
URL = re.compile(r"(?:https?://|www\.)\S+", re.IGNORECASE)
_DIGIT = re.compile(r"\d")
_PUNCTUATION = re.compile(r"[^\w\s]")
_WORD_CHARACTER = re.compile(r"\w")
# Symbols = non-alphanumeric, non-ASCII, and not the punctuation Korean prose uses (· … 「」 ‘’ “” – —).
_SYMBOL = re.compile(r"[^\w\s\x00-\x7f·…‥「」『』〈〉《》【】〔〕、。‘’“”–—―′″°℃％，．：；！？～]")
# A line whose text outside its URLs has fewer word characters than this is a link ("출처: https://…").
_LINK_LINE_MAX_WORD_CHARS = 10


# Character classes, counted in one pass: each code point of the Basic Multilingual Plane is classified
# once (a bit mask in a 64 K table, built on first use), and a text's masks are counted with numpy
# (UTF-32 code points → table → bincount). It replaces six regular-expression passes (\w, \d, \s, Hangul,
# symbols, punctuation), several times slower on Korean text (bench/RESULTS.md, issue 20); a text with
# characters beyond the BMP (emoji) is counted per distinct character instead. The masks follow re's
# own definitions for str: \s is str.isspace, \w is str.isalnum or "_", \d is str.isdecimal.
SPACE, WORD, DIGIT, HANGUL, SYMBOL = 1, 2, 4, 8, 16
_HANGUL_CHARACTER = re.compile(r"[\uac00-\ud7a3\u3131-\u318e]")   # syllables and compatibility jamo


def _character_class(char: str) -> int:
    return (SPACE * char.isspace() | WORD * (char.isalnum() or char == "_") | DIGIT * char.isdecimal()
            | HANGUL * bool(_HANGUL_CHARACTER.match(char)) | SYMBOL * bool(_SYMBOL.match(char)))


@functools.lru_cache(maxsize=1)
def _bmp_classes() -> np.ndarray:
    return np.array([_character_class(chr(code)) for code in range(0x10000)], dtype=np.uint8)


@functools.lru_cache(maxsize=4)
def class_counts(text: str) -> dict[int, int]:
    """Characters per class mask (SPACE | WORD | DIGIT | HANGUL | SYMBOL) in the text."""
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    if codes.size and int(codes.max()) > 0xFFFF:
        counts: dict[int, int] = {}
        for char, number in Counter(text).items():
            mask = _character_class(char)
            counts[mask] = counts.get(mask, 0) + number
        return counts
    return {mask: int(number) for mask, number in enumerate(np.bincount(_bmp_classes()[codes])) if number}


def class_total(counts: dict[int, int], flag: int, absent: int = 0) -> int:
    """Characters with `flag` set (and none of `absent`)."""
    return sum(number for mask, number in counts.items() if mask & flag and not mask & absent)


def may_hold_url(text: str) -> bool:
    """False only when URL cannot match (no "://", no "www." in any case): a C-level check that spares
    most documents the case-blind URL pass."""
    return "://" in text or ("." in text and "www." in text.casefold())


def count(pattern: re.Pattern, text: str) -> int:
    """Characters matching a one-character pattern: one C-level pass, no list of matches."""
    return len(text) - len(pattern.sub("", text))


def non_space_count(text: str) -> int:
    # str.split() and \s both split at str.isspace() characters; split is the faster of the two.
    return sum(map(len, text.split()))


def link_line_fraction(text: str) -> float:
    """Share of the non-empty lines that are a URL and little else: link lists, link farms.

    Per line rather than per character: a Q&A answer that cites three long URLs inside its sentences
    is mostly URL characters, and still prose.
    """
    if not may_hold_url(text) or not URL.search(text):
        return 0.0
    lines = [line for line in text.splitlines() if line.strip()]
    links = sum(1 for line in lines if URL.search(line)
                and len(_WORD_CHARACTER.findall(URL.sub("", line))) < _LINK_LINE_MAX_WORD_CHARS)
    return links / len(lines)


def statistics(text: str, config=None) -> dict[str, float]:
    # Table rows are structure: a timetable under a paragraph does not make the paragraph "digits".
    body = without_table_rows(text)
    counts = class_counts(body)
    non_space = len(body) - class_total(counts, SPACE) or 1
    return {
        "symbol_ratio": class_total(counts, SYMBOL) / non_space,
        "punctuation_ratio": sum(number for mask, number in counts.items() if not mask & (WORD | SPACE)) / non_space,
        "digit_ratio": class_total(counts, DIGIT) / non_space,
        "link_line_fraction": link_line_fraction(text),
    }


def reason(stats: dict, config) -> str | None:
    if stats["symbol_ratio"] > config.max_symbol_ratio:
        return "high_symbol_ratio"
    if stats["punctuation_ratio"] > config.max_punctuation_ratio:
        return "high_punctuation_ratio"
    if stats["digit_ratio"] > config.max_digit_ratio:
        return "high_digit_ratio"
    if stats["link_line_fraction"] > config.max_link_line_fraction:
        return "link_lines"
    return None
