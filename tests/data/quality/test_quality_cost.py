"""What issue 20's cost work must not change: bench/quality_cost.py's agreement counts both directions and
marks moved kept rates; the cheaper rules count exactly what the passes they replaced counted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import quality_cost  # noqa: E402


def test_agreement_counts_each_direction_and_marks_moved_rates(capsys):
    records = [{"text": str(index), "group": "review" if index < 4 else "spam"} for index in range(6)]
    sets = {"corpus": records}
    here = {"corpus": {"verdicts": [None, "kiwi_no_final_endings", None, None, "menu", None], "cpu_s": 1.0}}
    there = {"corpus": {"verdicts": [None, None, "dup_lines", None, "menu", "menu"], "cpu_s": 1.0}}
    quality_cost.report_agreement(sets, here, there, Path("../base"))
    output = capsys.readouterr().out
    # Documents 1 (kept there, dropped here), 2 and 5 (dropped there, kept here) differ: 3 of 6 agree.
    assert "| corpus | 6 | 50.00% | 1 | 2 | 50.00% |" in output
    assert "| corpus | review | 4 | 75.0% | 75.0% |" in output  # one each way: the rate did not move
    assert "| corpus | spam | 2 | 0.0% | 50.0% ⚠ |" in output


def test_corpora_groups_by_genre_or_file(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "petition.jsonl").write_text('{"text": "청원"}\n{"text": "법", "genre": "statute"}\n',
                                                      encoding="utf-8")
    sample = tmp_path / "sample.jsonl"
    sample.write_text('{"text": "메뉴", "label": "junk", "kind": "menu"}\n', encoding="utf-8")
    sets = quality_cost.corpora(sample, None, [tmp_path / "real"], None)
    assert [record["group"] for record in sets["labelled sample"]] == ["junk/menu"]
    assert [record["group"] for record in sets["real"]] == ["petition", "statute"]


# --- the cheaper rules count what the regular expressions and loops they replace counted -----------------

MIXED = ("가격은 1,234원 ★ 이모지 😀 와 ㅋㅋ_ 밑줄, Ⅻ ① ٣ 숫자\u00a0공백\t탭\n\u3000全角 English words "
         "https://example.com/a?b=c 끝.\ud800")


def test_class_counts_equal_the_regular_expressions():
    import re

    from rankzero.data.quality import characters

    patterns = {characters.SPACE: r"\s", characters.WORD: r"\w", characters.DIGIT: r"\d",
                characters.HANGUL: r"[\uac00-\ud7a3\u3131-\u318e]", characters.SYMBOL: characters._SYMBOL.pattern}
    for text in (MIXED, MIXED.replace("😀", "").replace("\ud800", ""), "", "한국어 문장입니다."):
        counts = characters.class_counts(text)
        for flag, pattern in patterns.items():
            assert characters.class_total(counts, flag) == len(re.findall(pattern, text)), (flag, text[:20])
        assert sum(n for mask, n in counts.items() if not mask & (characters.WORD | characters.SPACE)) == len(
            re.findall(r"[^\w\s]", text))


def _dup_ngram_share_by_walk(words: list[str], n: int, total_chars: int) -> float:
    """The walk the short cut replaced, position by position (Gopher's non-overlapping count)."""
    grams = list(zip(*(words[start:] for start in range(n))))
    seen, repeated, start = set(), 0, 0
    while start <= len(words) - n:
        if grams[start] in seen:
            repeated += sum(map(len, grams[start]))
            start += n
        else:
            seen.add(grams[start])
            start += 1
    return repeated / total_chars


def test_repetition_short_cuts_give_the_walks_values():
    import random

    from rankzero.data.quality import QualityConfig, repetition

    config = QualityConfig()
    rng = random.Random(0)
    vocabulary = ["이 법은", "공포한", "날부터", "시행한다.", "제1조", "종전의", "규정에", "따른다.", "다만,", "그"]
    for length in (0, 4, 30, 200, 600):
        for _ in range(5):
            # A few words over and over (statute-like), or mostly distinct words with a few repeats (prose).
            pool = vocabulary[:rng.randint(2, 10)] if rng.random() < 0.5 else [f"단어{i}" for i in range(400)]
            words = " ".join(rng.choice(pool) for _ in range(length)).split()
            total = sum(map(len, words)) or 1
            stats = repetition.statistics(" ".join(words), config)
            for n in repetition.DUP_NGRAMS:
                assert stats[f"dup_{n}gram_char_share"] == pytest.approx(_dup_ngram_share_by_walk(words, n, total))
            for n in repetition.TOP_NGRAMS:
                exact = repetition.top_ngram_share(words, n, total)
                limit = getattr(config, f"max_top_{n}gram_char_share")
                share = stats[f"top_{n}gram_char_share"]
                # Above its limit the share is exact; below it, possibly a bound that stays below the limit.
                assert (share > limit) == (exact > limit)
                assert share == pytest.approx(exact) if exact > limit else exact - 1e-12 <= share <= limit


def test_phrase_pre_check_never_misses_what_the_case_blind_pattern_finds():
    import re

    from rankzero.data.quality import QualityConfig, repetition

    phrases = tuple(QualityConfig().boilerplate_phrases)
    pattern = repetition._phrase_pattern(phrases)
    # Each letter of a phrase replaced by every other code point that re's case-blind match takes for it:
    # the Turkish İ and ı for i, the Kelvin sign for k, the long s for s, capitals.
    every_character = "".join(chr(code) for code in range(0x110000) if not 0xD800 <= code < 0xE000)
    letters = {letter for phrase in phrases for letter in phrase if letter.isalpha()}
    equals = {letter: [other for other in re.findall(re.escape(letter), every_character, re.IGNORECASE)
                       if other != letter] for letter in letters}
    checked = 0
    for phrase in phrases:
        for index, letter in enumerate(phrase):
            for other in equals.get(letter, []):
                text = f"본문입니다.\n{phrase[:index]}{other}{phrase[index + 1:]}\n끝."
                assert pattern.search(text)
                assert repetition.contains_phrase(repetition.fold(text), phrases), text
                checked += 1
    assert checked > 100
    text = "COOKİE POLICY\n본문입니다."
    assert repetition.boilerplate_fraction(text, phrases, repetition.fold(text)) == 0.5
