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


def fold(text: str) -> str:
    """The text as `contains_phrase` reads it: case-folded, and the Turkish İ and ı made "i" — re's
    case-blind match takes both for "i" ("COOKİE POLICY"), where casefold makes İ two characters (i and a
    combining dot) and leaves ı alone. No other character re's match equates with a letter of the phrases
    folds differently (checked over every code point against the default phrases)."""
    folded = text.casefold()
    if "\u0307" in folded or "ı" in folded:
        folded = folded.replace("i\u0307", "i").replace("ı", "i")
    return folded


def contains_phrase(folded: str, phrases: tuple[str, ...]) -> bool:
    """Whether the folded text (`fold`) holds one of the phrases: a C-level substring search per phrase,
    much cheaper than one pass of their case-blind alternation, which runs only on the few that do."""
    return any(phrase in folded for phrase in _folded(phrases))


@functools.lru_cache(maxsize=16)
def _folded(phrases: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(fold(phrase) for phrase in phrases)


def boilerplate_fraction(text: str, phrases: tuple[str, ...], folded: str | None = None) -> float:
    """Share of the non-empty lines holding a boilerplate phrase (cookie banners, copyright, login)."""
    pattern = _phrase_pattern(phrases)
    if folded is not None and not contains_phrase(folded, phrases):
        return 0.0
    if pattern is None or not pattern.search(text):  # one pass over the text; most hold no phrase
        return 0.0
    lines = [line for line in text.splitlines() if line.strip()]
    return sum(1 for line in lines if pattern.search(line)) / len(lines)


def duplicate_fraction(parts: list[str]) -> float:
    """Share of the non-empty parts (lines, paragraphs) that repeat an earlier one.

    Parts without a letter or digit ("}", "---") are ignored: code closes many blocks the same way.
    """
    parts = [part for part in (part.strip() for part in parts) if part]
    if len(set(parts)) == len(parts):
        return 0.0  # nothing repeats (most documents): no part needs the word check
    parts = [part for part in parts if _HAS_WORD.search(part)]
    return (len(parts) - len(set(parts))) / len(parts) if parts else 0.0


def top_ngram_share(words: list[str], n: int, total_chars: int) -> float:
    """Characters covered by the most frequent word n-gram (count x its length) per word character."""
    if len(words) < n:
        return 0.0
    counts = Counter(zip(*(words[start:] for start in range(n))))
    gram, count = counts.most_common(1)[0]
    return count * sum(map(len, gram)) / total_chars if count > 1 else 0.0


def dup_ngram_share(words: list[str], n: int, total_chars: int, repeated: str | None = None) -> float:
    """Characters in word n-grams that repeat an earlier n-gram, counted without overlap (Gopher).

    `repeated`: "1" or "0" per word, whether the word occurs more than once. An n-gram with a "0" word
    occurs once, so it never repeats and the walk may pass over it: the same result, fewer steps.
    """
    if repeated is None:
        counts = Counter(words)
        repeated = "".join(["1" if counts[word] > 1 else "0" for word in words])
    seen, total, start = set(), 0, 0
    for match in re.finditer(f"(?=1{{{n}}})", repeated):
        index = match.start()
        if index < start:
            continue  # inside an n-gram already counted as repeated
        gram = tuple(words[index:index + n])
        if gram in seen:
            total += sum(map(len, gram))
            start = index + n
        else:
            seen.add(gram)
    return total / total_chars


def statistics(text: str, config) -> dict[str, float]:
    lines = text.splitlines()
    placeholder = _phrase_pattern(tuple(config.placeholder_phrases))
    # Past ngram_max_chars the Python loops cost more than they tell; repetition shows early.
    words = head(text, config.ngram_max_chars).split()
    total_chars = sum(map(len, words)) or 1
    folded = fold(text)
    placeholders = tuple(config.placeholder_phrases)
    stats = {
        "placeholder": float(bool(placeholder and contains_phrase(folded, placeholders) and placeholder.search(text))),
        "boilerplate_line_fraction": boilerplate_fraction(text, tuple(config.boilerplate_phrases), folded),
        "dup_line_fraction": duplicate_fraction(lines),
        "dup_paragraph_fraction": duplicate_fraction(_PARAGRAPH_BREAK.split(text)),
    }
    # The n-gram loops are Python and most documents repeat little, so two exact short cuts first (one
    # C-level count of the words): an n-gram occurring c times covers at most the characters its n words
    # cover, each at most `most` (count x length of the word covering most), so n x most bounds every
    # top-n share — below the limit, that bound is reported instead; and a repeated 5-gram needs five
    # consecutive words that each occur twice — without such a run, no n-gram of 5 or more repeats.
    counts = Counter(words)
    most = max((number * len(word) for word, number in counts.items() if number > 1), default=0)
    for n in TOP_NGRAMS:
        bound = n * most / total_chars
        exact = bound > getattr(config, f"max_top_{n}gram_char_share")
        stats[f"top_{n}gram_char_share"] = top_ngram_share(words, n, total_chars) if exact else min(bound, 1.0)
    repeated = "".join(["1" if counts[word] > 1 else "0" for word in words]) if most else ""
    share = float("1" * DUP_NGRAMS[0] in repeated)
    for n in DUP_NGRAMS:
        # A repeated n-gram holds a repeated shorter one: once none repeats, no longer one does.
        share = dup_ngram_share(words, n, total_chars, repeated) if share else 0.0
        stats[f"dup_{n}gram_char_share"] = share
    units, share = legal_unit_lines(text)
    stats["statute_shaped"] = float(units >= STATUTE_MIN_UNIT_LINES and share >= STATUTE_MIN_UNIT_LINE_SHARE)
    return stats


# A statute repeats its formulas by design: every 부칙 says "이 영은 공포한 날부터 시행한다", every amendment
# "…을 …으로 한다", every clause "…에 따른 …". A document whose lines are mostly a statute's units (articles
# 제N조, clauses ①, 부칙 <제N호,date>, amendment items <N>; structure.legal_unit_lines) is held to n-gram
# limits `statute_ngram_factor` times the others' (docs/quality.md, "Statutes", has what real statutes
# lost to the n-gram rules and why no other document is statute-shaped). Repeated lines and paragraphs are
# judged as for every document.
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
