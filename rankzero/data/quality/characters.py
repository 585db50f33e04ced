"""Character shares, every document: symbols, punctuation, digits, link lines.

Language-agnostic and cheap (a C-level regular-expression pass each), with thresholds that ordinary
Korean and English prose and source code pass. Shares are per non-space character, outside table rows
(structure.py) unless the document is all table.
"""

from __future__ import annotations

import re

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


def count(pattern: re.Pattern, text: str) -> int:
    """Characters matching a one-character pattern: one C-level pass, no list of matches."""
    return len(text) - len(pattern.sub("", text))


def non_space_count(text: str) -> int:
    # str.split() and \s both split at str.isspace() characters; split runs ~3x faster than sub.
    return sum(map(len, text.split()))


def link_line_fraction(text: str) -> float:
    """Share of the non-empty lines that are a URL and little else: link lists, link farms.

    Per line rather than per character: a Q&A answer that cites three long URLs inside its sentences
    is mostly URL characters, and still prose.
    """
    if not URL.search(text):
        return 0.0
    lines = [line for line in text.splitlines() if line.strip()]
    links = sum(1 for line in lines if URL.search(line)
                and len(_WORD_CHARACTER.findall(URL.sub("", line))) < _LINK_LINE_MAX_WORD_CHARS)
    return links / len(lines)


def statistics(text: str, config=None) -> dict[str, float]:
    # Table rows are structure: a timetable under a paragraph does not make the paragraph "digits".
    body = without_table_rows(text)
    non_space = non_space_count(body) or 1
    return {
        "symbol_ratio": count(_SYMBOL, body) / non_space,
        "punctuation_ratio": count(_PUNCTUATION, body) / non_space,
        "digit_ratio": count(_DIGIT, body) / non_space,
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
