"""Word shape, every document: machine text (encoded blobs, minified dumps, runs) in any language.

Two measures, both with thresholds that Korean, English prose and source code pass:
- encoded share: characters in base64, hex (runs and dumps), uuencoded and %-escaped runs, per
  non-space character. These are bytes written as text; no language model should learn them.
- word length (Gopher's mean-word-length bound, and the share of characters in very long words):
  whitespace words, so it needs no tokenizer. Minified code, space-less dumps and character runs
  ("ㅋㅋㅋ…" x 500) have few, long words. URLs are left out (the link-line check judges them), and so
  are scripts written without spaces (Chinese, Japanese), whose "words" are whole sentences.
"""

from __future__ import annotations

import re

from rankzero.data.quality.characters import URL, may_hold_url, non_space_count

# Runs of the base64 alphabet (hex is a subset); whether a run is encoded is decided by its mix.
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{24,}={0,2}")
_PERCENT_RUN = re.compile(r"(?:%[0-9A-Fa-f]{2}){6,}")
# uuencode: a length character ("M" = 45 bytes) and 60 characters of the 0x20-0x60 alphabet per line.
_UUENCODED_LINE = re.compile(r"^M[\x20-\x60]{60}$", re.MULTILINE)
# A hex dump line: an optional offset, then eight or more hex groups ("7f45 4c46 …", "0x7f, 0x45, …"),
# then anything (the ASCII column). Only lines with a hex letter count: a row of years is all digits.
_HEX_DUMP_LINE = re.compile(r"^[ \t]*(?:[0-9A-Fa-f]{4,8}:?[ \t]+)?(?:(?:0x)?[0-9A-Fa-f]{2,8},?[ \t]+){7,}.*$",
                            re.MULTILINE)
_HEX_LETTER = re.compile(r"[a-fA-F]")
_DIGIT = re.compile(r"[0-9]")
_DIGIT_OR_UPPER = re.compile(r"[0-9A-Z+/]")
# Characters of scripts written without spaces: kana and CJK ideographs (Hanja inside Korean is rare
# enough not to matter either way).
_SPACELESS_SCRIPT = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


def _encoded_run(match: re.Match) -> str:
    """"" for a run that reads as encoded bytes, else the run itself.

    Random base64 is ~81% letters, ~15% digits and ~56% digits, capitals, "+" and "/"; hex is ~62%
    digits and ~38% a-f. Words, identifiers and paths ("org/apache/commons/lang3/StringUtils") are
    mostly lower case; long decimals ("2.718281828459045235360287F") are nearly all digits. Both stay.
    """
    run = match.group()
    length = len(run)
    digits = len(_DIGIT.findall(run))
    letters = length - digits - run.count("+") - run.count("/") - run.count("=")
    mixed = len(_DIGIT_OR_UPPER.findall(run))
    return "" if digits >= 0.05 * length and letters >= 0.2 * length and mixed >= 0.3 * length else run


def _hex_dump_line(match: re.Match) -> str:
    return "" if _HEX_LETTER.search(match.group()) else match.group()


def encoded_char_share(text: str) -> float:
    """Non-space characters the encoded-data patterns remove, per non-space character (URLs excepted)."""
    if may_hold_url(text):
        text = URL.sub(" ", text)
    original = text
    text = _HEX_DUMP_LINE.sub(_hex_dump_line, text)
    if "M" in text:
        text = _UUENCODED_LINE.sub("", text)
    if "%" in text:
        text = _PERCENT_RUN.sub("", text)
    text = _BASE64_RUN.sub(_encoded_run, text)
    if text is original:  # re's sub gives back the very string when it matched nothing: most documents
        return 0.0
    before = non_space_count(original)
    return (before - non_space_count(text)) / before if before else 0.0


def statistics(text: str, config) -> dict[str, float]:
    words = _SPACELESS_SCRIPT.sub(" ", URL.sub(" ", text) if may_hold_url(text) else text).split()
    lengths = list(map(len, words))
    total = sum(lengths)
    long_chars = sum(length for length in lengths if length >= config.long_word_chars)
    return {
        "encoded_char_share": encoded_char_share(text),
        "mean_word_chars": total / len(words) if words else 0.0,
        "long_word_char_share": long_chars / total if total else 0.0,
    }


def reason(stats: dict, config) -> str | None:
    if stats["encoded_char_share"] > config.max_encoded_char_share:
        return "encoded_data"
    if (stats["mean_word_chars"] > config.max_mean_word_chars
            or stats["long_word_char_share"] > config.max_long_word_char_share):
        return "long_words"
    return None
