"""Mojibake: text whose UTF-8 bytes were decoded as Latin-1 or cp1252 ("ì•ˆë…•" for "안녕").

    text, reason = repair(text, config.repair_mojibake)   # "mojibake" when it stays broken or repair is off

Common in crawls, and a language model trained on it learns to write it. ftfy, the well-kept library
for exactly this, undoes it; we only ask it for its encoding fixes (no quote uncurling, no Unicode
normalisation: repair must not change clean text) and only on documents that could be mojibake at all
— the first two bytes of any non-ASCII UTF-8 character read as Latin-1 land in U+0080-U+00FF, which
one regular-expression search finds in C. Text that ftfy cannot repair and that still reads as
mojibake (EUC-KR read as Latin-1, say: "¾È³ç"), or that comes out of the repair with U+FFFD in
place of lost characters, is dropped under its own reason.
"""

from __future__ import annotations

import functools
import re

# Any UTF-8 sequence of two or more bytes, read as Latin-1 or cp1252, starts with a character here.
_LATIN1_RANGE = re.compile("[\u0080-\u00ff]")
# Characters that Latin-1 or cp1252 decode a single byte to.
_SINGLE_BYTE_ONLY = re.compile("[\u0000-\u00ff\u0152\u0153\u0160\u0161\u0178\u017d\u017e\u0192\u02c6\u02dc"
                               "\u2013\u2014\u2018-\u201a\u201c-\u201e\u2020-\u2022\u2026\u2030\u2039\u203a"
                               "\u20ac\u2122]*")


@functools.cache
def _fixer_config():
    """ftfy's encoding fixes only: mojibake, C1 controls, lossy sequences. Nothing that restyles text."""
    from ftfy import TextFixerConfig

    return TextFixerConfig(unescape_html=False, remove_terminal_escapes=False, fix_latin_ligatures=False,
                           fix_character_width=False, uncurl_quotes=False, fix_line_breaks=False,
                           fix_surrogates=False, remove_control_chars=False, normalization=None, explain=False)


def require_ftfy() -> None:
    try:
        import ftfy  # noqa: F401
    except ImportError:
        raise ImportError("the Korean quality filter repairs mojibake with ftfy: pip install 'ftfy>=6.1' "
                          "(a dependency in pyproject.toml)") from None


def looks_broken(text: str) -> bool:
    """ftfy's own mojibake heuristic, behind the cheap range check (most documents stop there)."""
    if not _LATIN1_RANGE.search(text):
        return False
    from ftfy.badness import is_bad

    return is_bad(text)


def repair(text: str, repair_mojibake: bool) -> tuple[str, str | None]:
    """(text, None) for clean or repaired text; (text, "mojibake") when it is broken and stays so."""
    if not looks_broken(text):
        return text, None
    if not repair_mojibake:
        return text, "mojibake"
    from ftfy import fix_and_explain, fix_text

    # A document that is mojibake throughout (every character a single cp1252/Latin-1 byte) is decoded
    # as one piece: ftfy fixes line by line, and a two-syllable line ("ë¶€ ì¹™" = "부 칙") alone is too
    # short for its heuristics. Mixed documents need the line-by-line pass.
    if _SINGLE_BYTE_ONLY.fullmatch(text):
        fixed = fix_and_explain(text, _fixer_config())[0]
    else:
        fixed = fix_text(text, _fixer_config())
    # Repaired text holding U+FFFD lost characters on the way (cp1252 leaves five bytes undefined, and
    # a decoder replaced them before we got the text): damaged either way.
    if looks_broken(fixed) or "\ufffd" in fixed:
        return text, "mojibake"
    return fixed, None


def repaired_segments(segments: list[tuple[str, bool]], repaired_text: str) -> list[tuple[str, bool]]:
    """The (text, mask) segments of a document whose joined text `repair` changed: a single segment
    becomes the repaired text; several (chat and instruction records) are repaired one by one."""
    if len(segments) == 1:
        return [(repaired_text, segments[0][1])]
    return [(repair(text, True)[0], mask) for text, mask in segments]
