"""The forms a Korean document writes a number or an e-mail address in, read as the ASCII one the detectors match
(pii.py): a number is the same number whatever dash, space or invisible character stands between its digit groups.

    separators = cluster_separators()          # the code points a number cluster may hold between its digits
    view = numbers_view(text, clusters, 9)     # dashes as '-', other digits as 0-9, invisible characters dropped
    view.text, view.clusters                   # what the number patterns read; (start, end, digits) per cluster
    view.span(start, end)                      # a span of view.text as the span of `text` it was read from
    view = address_view(text)                  # full-width forms as ASCII, invisible characters dropped (e-mails)

The separators come from the Unicode database, not from a list of the ones seen so far: a word processor turns '-'
into an en dash, a web page's &nbsp; is U+00A0, a PDF's copy leaves soft hyphens and zero-width spaces, a Korean
IME types the vowel ㅡ for a dash, and the next document brings a dash no list had. So a dash is any Pd code point,
a minus sign (U+2212; U+FE63 and U+FF0D are Pd) or ㅡ, and reads as '-'; a space is whatever str.isspace says
(Zs, line and paragraph separators, tabs and line breaks), which the patterns' `\\s` matches as it is; an invisible
character is a format character (Cf: zero-width spaces and joiners, soft hyphens, direction marks, the BOM), which
reads as nothing, as do the spaces and line breaks beside a dash ("010-2345-\\n6789", a wrapped line) and the
carriage return of a CRLF. A number so read is the one an ASCII writer would have typed, so the look-alike rules
(dates, prices, ISBNs) judge it alike.
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata

import numpy as np

from rankzero.data.native.table_cache import cached

MINUS_SIGNS = "\u2212\ufe63\uff0d"  # U+2212 is Sm, not Pd; the other two are Pd and listed for the reader
HANGUL_DASH = "\u3161"  # ㅡ, the vowel a Korean keyboard types where a dash key is far
_SPACED_DASH = re.compile(r"\s-|-\s")
NUMBER_PUNCTUATION = ".()+\uff0e\uff08\uff09\uff0b"  # what else a number cluster holds: +82 (02) 010.2345, full-width


@functools.cache
def separator_codes() -> dict[str, np.ndarray]:
    """{"dash", "space", "invisible"}: the code points of each class (module docstring), from this Python's Unicode
    database; built once per installation (a pass over all 1.1M code points, 0.12 s) and read from disk after."""
    return cached("pii_separators", _build_separator_codes, [__file__])


def _build_separator_codes() -> dict[str, np.ndarray]:
    classes: dict[str, list[int]] = {"dash": [], "space": [], "invisible": []}
    for code in range(0x110000):
        char = chr(code)
        category = unicodedata.category(char)
        if category == "Pd" or char in MINUS_SIGNS or char == HANGUL_DASH:
            classes["dash"].append(code)
        elif char.isspace():
            classes["space"].append(code)
        elif category == "Cf":
            classes["invisible"].append(code)
    return {name: np.array(codes, dtype=np.uint32) for name, codes in classes.items()}


@functools.cache
def cluster_separators() -> frozenset[str]:
    """Every character a number cluster holds between its digits (pii_checks.number_clusters)."""
    return frozenset(NUMBER_PUNCTUATION).union(*(map(chr, codes.tolist()) for codes in separator_codes().values()))


def character_class(chars) -> str:
    """`chars` as the inside of a regex character class, in ranges of consecutive code points."""
    present = set(map(ord, chars))
    starts = sorted(code for code in present if code - 1 not in present)
    ends = sorted(code for code in present if code + 1 not in present)
    return "".join(re.escape(chr(start)) + (f"-{re.escape(chr(end))}" if end > start else "")
                   for start, end in zip(starts, ends))


@functools.cache
def _patterns() -> tuple[re.Pattern, re.Pattern, re.Pattern, dict[int, str]]:
    """(what a cluster drops: invisible characters, and the spaces beside a dash once dashes are '-'; invisible
    characters; what an address reads otherwise; the address twins: full-width and small forms as ASCII)."""
    invisible = character_class(map(chr, separator_codes()["invisible"].tolist()))
    dropped = re.compile(rf"[{invisible}]+|(?<=-)[\s{invisible}]+|[\s{invisible}]+(?=-)|\r(?=\n)")
    address_twins = {code: unicodedata.normalize("NFKC", chr(code)) for code in range(0xFF01, 0xFF5F)}
    address_twins.update({0xFE6B: "@", 0xFE52: "."})
    address = re.compile(f"[{character_class(map(chr, address_twins))}{invisible}]")
    return dropped, re.compile(f"[{invisible}]+"), address, address_twins


@functools.cache
def _twin(char: str) -> str:
    """A cluster character as the detectors read it: one code point for one."""
    if char.isdecimal():
        return str(unicodedata.decimal(char))
    if char in MINUS_SIGNS or char == HANGUL_DASH or unicodedata.category(char) == "Pd":
        return "-"
    twin = unicodedata.normalize("NFKC", char)
    return twin if len(twin) == 1 and twin in NUMBER_PUNCTUATION else char  # spaces stay: the patterns read `\s`


class View:
    """`text` with characters replaced one for one and the spans `dropped` ([start, end) of the text, sorted, apart)
    left out; a span found in the view maps back to the text's."""

    def __init__(self, translated: str, dropped: list[tuple[int, int]]):
        self.dropped = dropped
        if not dropped:  # almost every text
            self.text = translated
            return
        self.text = "".join(translated[last:start] for last, start in
                            zip([0] + [end for _, end in dropped], [start for start, _ in dropped] + [len(translated)]))
        self._starts, self._shifts, shift = [], [], 0  # where each dropped span sits in the view, and all dropped to it
        for start, end in dropped:
            self._starts.append(start - shift)
            shift += end - start
            self._shifts.append(shift)

    def _origin(self, at: int) -> int:
        """The text's index of the view's character at `at`."""
        index = bisect.bisect_right(self._starts, at)
        return at + (self._shifts[index - 1] if index else 0)

    def span(self, start: int, end: int) -> tuple[int, int]:
        if not self.dropped:
            return start, end
        return self._origin(start), self._origin(end - 1) + 1

    def position(self, at: int) -> int:
        """A text index outside the dropped spans, in the view."""
        return at - sum(end - start for start, end in self.dropped if end <= at) if self.dropped else at


class NumbersView(View):
    clusters: list[tuple[int, int, int]]  # (start, end, digits) of each cluster, in the view


def numbers_view(text: str, clusters: list[re.Match], least_digits: int) -> NumbersView:
    """The text the number patterns read: every cluster character as its _twin (the whole text translated, so
    context words and lookarounds read the same), and in clusters of at least `least_digits` digits (the only ones
    whose patterns could span a dropped character) invisible characters and the spaces beside a dash left out."""
    groups = [cluster.group() for cluster in clusters]
    twins = {ord(char): _twin(char) for group in groups if not group.isascii() for char in group if not char.isascii()}
    translated = text.translate(twins) if twins else text
    digits = [sum(map(str.isdecimal, group)) for group in groups]  # what `\d` matches: half the time of findall
    # An ASCII cluster drops only spaces beside a dash or a CRLF's CR: most (010-2345-6789, 2024. 3. 15.) need no
    # search.
    searched = [cluster for cluster, group, count in zip(clusters, groups, digits) if count >= least_digits
                and (not group.isascii() or "\r" in group or _SPACED_DASH.search(group))]
    dropped = [match.span() for cluster in searched
               for match in _patterns()[0].finditer(translated, cluster.start(), cluster.end())]
    view = NumbersView(translated, dropped)
    view.clusters = [(view.position(cluster.start()), view.position(cluster.end()), count) if dropped
                     else (cluster.start(), cluster.end(), count) for cluster, count in zip(clusters, digits)]
    return view


def address_view(text: str) -> View:
    """The text the e-mail patterns read: full-width and small forms of ASCII as ASCII (＠, ．, ｋｉｍ), invisible
    characters left out. The text itself where it holds neither (almost every text: one search)."""
    _, invisible, address, address_twins = _patterns()
    if not address.search(text):
        return View(text, [])
    translated = text.translate(address_twins)
    return View(translated, [match.span() for match in invisible.finditer(translated)])
