"""Statutes and legal text: a statute repeats its formulas by design, and is held to looser n-gram
limits than other documents only while its lines are a statute's units (docs/quality.md, "Statutes")."""

from __future__ import annotations

import dataclasses

import pytest

from rankzero.data.quality import QualityFilter
from rankzero.data.quality.structure import is_structure_line, legal_unit_lines, without_table_rows

# Written for this test in the shape of a decree's 부칙: every entry says when it takes effect, with the
# same words (the real ones repeat "이 영은 공포한 날부터 시행한다" dozens of times in one law).
ADDENDA = "\n\n".join(
    f"부칙 <제{number}호,{year}.{month}.{day}>\n\n제1조(시행일) 이 영은 공포한 날부터 시행한다. 다만, 제{article}조의 "
    f"개정규정은 {year}년 {month}월 {day}일부터 시행한다.\n\n제2조(경과조치) 이 영 시행 당시 종전의 규정에 따라 "
    f"신청한 자는 이 영에 따라 신청한 것으로 본다."
    for number, year, month, day, article in [(21034, 2009, 3, 2, 4), (22476, 2010, 11, 2, 7), (23518, 2012, 1, 6, 9),
                                              (25011, 2013, 12, 30, 12), (27002, 2016, 3, 8, 3),
                                              (28730, 2018, 3, 20, 15), (30512, 2020, 3, 3, 6)])
ARTICLES = ("## 제1장 총칙\n\n##### 제1조 (목적)\n\n이 영은 마을 도서관의 설치와 운영에 필요한 사항을 정함을 목적으로 한다.\n\n"
            "##### 제2조 (운영위원회)\n\n**①** 도서관에 운영위원회를 둔다.\n\n**②** 위원회는 위원장 1명을 포함한 7명 "
            "이내의 위원으로 구성한다.\n\n  1\\. 도서관의 운영 계획\n  2\\. 자료의 수집과 폐기\n")
BOX_TABLE = ("┌──────┬──────┐\n│위반행위    │과태료      │\n├──────┼──────┤\n│1차 위반    │50만원      │\n"
             "│2차 위반    │100만원     │\n└──────┴──────┘")


@pytest.fixture(scope="module")
def quality():
    return QualityFilter()


def test_statute_addenda_are_kept_only_as_statutes(quality):
    """The 부칙 repeat their formulas past the n-gram limits of other documents: kept as a statute; dropped
    with statute_ngram_factor 1 (the filter before); and the same words without a statute's line openings
    (no 제N조, no 부칙 <…>) are still dropped as repetition."""
    document = ARTICLES + "\n" + ADDENDA
    assert legal_unit_lines(document)[1] >= 0.3
    assert quality.judge(document) is None
    strict = quality.with_config(dataclasses.replace(quality.config, statute_ngram_factor=1.0))
    assert strict.judge(document) == "dup_ngram_repetition"
    prose = " ".join(line.split(") ", 1)[-1] for line in ADDENDA.split("\n") if line and not line.startswith("부칙"))
    assert legal_unit_lines(prose) == (0, 0.0)
    assert quality.judge(prose) in ("dup_ngram_repetition", "top_ngram_repetition")


def test_a_statute_repeated_line_for_line_is_still_dropped(quality):
    """The looser limits are for n-grams only: the same article copied over and over is repeated lines."""
    article = "제3조(시행일) 이 영은 공포한 날부터 시행한다."
    assert quality.judge("\n".join([article] * 6 + ["제4조(경과조치) 종전의 규정에 따른다."])) == "dup_lines"


@pytest.mark.parametrize("line, unit", [
    ("##### 제4조 (간호사 면허)", True), ("제1조의2(수련전문과목 육성의 우선적 지원) 법 제3조에서", True),
    ("**②** 위원회는 7명 이내로 구성한다.", True), ("부칙 <제542호,1960.2.1>", True), ("<20> 농업 일부를", True),
    ("제2조제4호 중 \"보건\"을 \"복지\"로 한다.", False), ("제주도에 다녀왔다.", False), ("조건이 있다.", False),
])
def test_legal_unit_lines(line, unit):
    assert legal_unit_lines(line)[0] == unit


def test_box_drawn_table_rows_are_table_rows():
    """A statute's 별표 drawn with box characters is a table: not prose, and not counted in the shares."""
    text = "다음 표와 같이 과태료를 부과한다.\n" + BOX_TABLE
    assert without_table_rows(text) == "다음 표와 같이 과태료를 부과한다."
    assert all(is_structure_line(line) for line in BOX_TABLE.split("\n"))
