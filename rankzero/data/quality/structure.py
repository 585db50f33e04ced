"""Which lines of a document are structure: list items, numbered articles and clauses, headings,
dialogue turns, table rows.

    marked = structure_lines(text)   # one bool per line of text.split("\\n")
    body = without_table_rows(text)  # what the character shares are measured on

A marked line is not held against a document when it has no final ending: "1. 대한민국 국민이 아닌
사람" is a list item, not a broken sentence, and "사용자: 내일 날씨 알려 줘" is a turn. The Korean
statistics (korean.py) count such lines as structure unless they close with a final ending, in
which case they are prose like any other sentence ("① 위원은 … 위촉한다.").
"""

from __future__ import annotations

import re

# At the start of a line, after indentation and Markdown bold, one of:
_MARKER = re.compile(
    r"[ \t]*(?:\*\*)?(?:"
    r"[-–—*•∙◦▪▫■□●○◆◇▶▷►▸※☞➢✓✔→>#ㅇ]+[ \t]"                # bullets, Markdown headings, the "ㅇ" of notices
    r"|\(?\d{1,3}(?:의\d{1,3})?\\?[.)]"                       # 1.  1)  (1)  1의2.  1\. (Markdown's escape)
    r"|\(?[가나다라마바사아자차카타파하]\\?[.)]"                  # 가.  (나): the Korean alphabetic numbering
    r"|\([a-zA-Z]\)|[IVXivx]{1,4}\."                             # (a)  IV.
    r"|[\u2460-\u24ff\u3260-\u327f\u2776-\u2793]"                # ① ⑴ ⒜ ㉠ ㉮ ❶ …
    r"|제\s?\d+\s?[편장절관조항호목](?:의\s?\d+)?"                 # 제1장  제7조  제7조의2
    r"|\[[^\]\n]{1,40}\]"                                         # [별표 1]  [시행일 …]
    r"|[^\s:：]{1,12}(?:[ \t][^\s:：]{1,12})?[ \t]?[:：][ \t]"   # a speaker or field label: "사용자: "  "일시: "
    r")")
# The units of a statute that open a line: an article "제4조 (간호사 면허)" / "제1조의2(…)" (also as a Markdown
# heading), a "부칙 <제542호,1960.2.1>", a clause ① … ⑳ (also in Markdown bold), an amendment item "<20>".
_LEGAL_UNIT = re.compile(r"^[ \t]*(?:#+ |\*\*)?(?:제[ \t]?\d+[ \t]?조(?:의[ \t]?\d+)?[ \t]?(?:[(（ \t]|$)"
                         r"|부칙[ \t]*(?:[(<]|$)|[\u2460-\u2473]|<\d+>)", re.MULTILINE)
_NON_EMPTY_LINE = re.compile(r"^[ \t]*\S", re.MULTILINE)
# Table rows: two or more cell separators (| or the box-drawing │ ├ ┼ ┤ of statutes' tables), or a tab
# inside the line.
_TABLE_ROW = re.compile(r"\|.*\||\S\t|[│┃├┤┌┐└┘┼].*[│┃├┤┌┐└┘┼]")
_TABLE_HINT = re.compile(r"[|\t│┃]")


def is_structure_line(line: str) -> bool:
    return bool(_MARKER.match(line) or _TABLE_ROW.search(line))


def without_table_rows(text: str) -> str:
    """The text without its table rows, or all of it when it is nothing but a table: cells of numbers
    are not what the character shares are meant to judge in a document that also has prose."""
    if not _TABLE_HINT.search(text):
        return text
    rest = [line for line in text.split("\n") if not _TABLE_ROW.search(line)]
    return "\n".join(rest) if any(line.strip() for line in rest) else text


def legal_unit_lines(text: str) -> tuple[int, float]:
    """(lines that open a statute's unit — article, clause, 부칙, amendment item —, their share of the
    non-empty lines): statutes repeat their formulas by design (repetition.py)."""
    units = len(_LEGAL_UNIT.findall(text))
    return units, units / len(_NON_EMPTY_LINE.findall(text)) if units else 0.0


def structure_lines(text: str) -> list[bool]:
    return [is_structure_line(line) for line in text.split("\n")]
