"""Repetition and filler, every document: placeholders, boilerplate lines, repeated lines, paragraphs
and word n-grams (FineWeb-2's kor_Hang values; Gopher's for paragraphs).

N-grams are over whitespace words (eojeol for Korean), not Kiwi morphemes: these checks run before
Kiwi and treat every script alike.
"""

from __future__ import annotations

import functools
import re
from collections import Counter

from rankzero.data.quality.structure import legal_unit_lines

_PARAGRAPH_BREAK = re.compile(r"\n[ \t\r\f\v]*\n")
_HAS_WORD = re.compile(r"\w")
TOP_NGRAMS = (2, 3, 4)
DUP_NGRAMS = (5, 6, 7, 8, 9, 10)


@functools.lru_cache(maxsize=16)
def _phrase_pattern(phrases: tuple[str, ...]) -> re.Pattern | None:
    return re.compile("|".join(map(re.escape, phrases)), re.IGNORECASE) if phrases else None


def head(text: str, limit: int) -> str:
    """The first `limit` characters, cut at a line break when one is near so no line is halved."""
    if len(text) <= limit:
        return text
    cut = text.rfind("\n", 0, limit)
    return text[:cut] if cut > limit // 2 else text[:limit]


def boilerplate_fraction(text: str, phrases: tuple[str, ...]) -> float:
    """Share of the non-empty lines holding a boilerplate phrase (cookie banners, copyright, login)."""
    pattern = _phrase_pattern(phrases)
    if pattern is None or not pattern.search(text):  # one pass over the text; most hold no phrase
        return 0.0
    lines = [line for line in text.splitlines() if line.strip()]
    return sum(1 for line in lines if pattern.search(line)) / len(lines)


def duplicate_fraction(parts: list[str]) -> float:
    """Share of the non-empty parts (lines, paragraphs) that repeat an earlier one.

    Parts without a letter or digit ("}", "---") are ignored: code closes many blocks the same way.
    """
    parts = [part for part in (part.strip() for part in parts) if part and _HAS_WORD.search(part)]
    return (len(parts) - len(set(parts))) / len(parts) if parts else 0.0


def top_ngram_share(words: list[str], n: int, total_chars: int) -> float:
    """Characters covered by the most frequent word n-gram (count x its length) per word character."""
    if len(words) < n:
        return 0.0
    counts = Counter(zip(*(words[start:] for start in range(n))))
    gram, count = counts.most_common(1)[0]
    return count * sum(map(len, gram)) / total_chars if count > 1 else 0.0


def dup_ngram_share(words: list[str], n: int, total_chars: int) -> float:
    """Characters in word n-grams that repeat an earlier n-gram, counted without overlap (Gopher)."""
    grams = list(zip(*(words[start:] for start in range(n))))
    if len(set(grams)) == len(grams):
        return 0.0  # nothing repeats (most documents): no need for the position-by-position walk
    seen, repeated, start, last = set(), 0, 0, len(words) - n
    while start <= last:
        gram = grams[start]
        if gram in seen:
            repeated += sum(map(len, gram))
            start += n
        else:
            seen.add(gram)
            start += 1
    return repeated / total_chars


def statistics(text: str, config) -> dict[str, float]:
    lines = text.splitlines()
    placeholder = _phrase_pattern(tuple(config.placeholder_phrases))
    # Past ngram_max_chars the Python loops cost more than they tell; repetition shows early.
    words = head(text, config.ngram_max_chars).split()
    total_chars = sum(map(len, words)) or 1
    stats = {
        "placeholder": float(bool(placeholder and placeholder.search(text))),
        "boilerplate_line_fraction": boilerplate_fraction(text, tuple(config.boilerplate_phrases)),
        "dup_line_fraction": duplicate_fraction(lines),
        "dup_paragraph_fraction": duplicate_fraction(_PARAGRAPH_BREAK.split(text)),
    }
    for n in TOP_NGRAMS:
        stats[f"top_{n}gram_char_share"] = top_ngram_share(words, n, total_chars)
    share = 1.0
    for n in DUP_NGRAMS:
        # A repeated n-gram holds a repeated shorter one: once none repeats, no longer one does.
        share = dup_ngram_share(words, n, total_chars) if share else 0.0
        stats[f"dup_{n}gram_char_share"] = share
    units, share = legal_unit_lines(text)
    stats["statute_shaped"] = float(units >= STATUTE_MIN_UNIT_LINES and share >= STATUTE_MIN_UNIT_LINE_SHARE)
    return stats


# A statute repeats its formulas by design: every 부칙 says "이 영은 공포한 날부터 시행한다", every amendment
# "…을 …으로 한다", every clause "…에 따른 …". A document whose lines are mostly a statute's units (articles
# 제N조, clauses ①, 부칙 <제N호,date>, amendment items <N>; structure.legal_unit_lines) is held to n-gram
# limits `statute_ngram_factor` times the others' (docs/quality.md: 8% of real statute documents were
# dropped as n-gram repetition; no document of the junk sample, ko_real_dev or the eleven genres is
# statute-shaped). Repeated lines and paragraphs are judged as for every document.
STATUTE_MIN_UNIT_LINES = 3
STATUTE_MIN_UNIT_LINE_SHARE = 0.3


def reason(stats: dict, config) -> str | None:
    if stats["placeholder"]:
        return "placeholder_text"
    if stats["boilerplate_line_fraction"] > config.max_boilerplate_line_fraction:
        return "boilerplate"
    if stats["dup_line_fraction"] > config.max_dup_line_fraction:
        return "dup_lines"
    if stats["dup_paragraph_fraction"] > config.max_dup_paragraph_fraction:
        return "dup_paragraphs"
    factor = config.statute_ngram_factor if stats["statute_shaped"] else 1.0
    if any(stats[f"top_{n}gram_char_share"] > factor * getattr(config, f"max_top_{n}gram_char_share")
           for n in TOP_NGRAMS):
        return "top_ngram_repetition"
    if any(stats[f"dup_{n}gram_char_share"] > factor * getattr(config, f"max_dup_{n}gram_char_share")
           for n in DUP_NGRAMS):
        return "dup_ngram_repetition"
    return None
