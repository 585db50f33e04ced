"""Validators behind the personal-information detectors (pii.py): dates, check digits, issuers, IP scope; and
the number clusters every number detector looks in.

    registration_date_ok("9001011234568")   # a real birth date for the century its 7th digit names
    registration_check_ok("9001011234568")  # the pre-October-2020 check digit (never decisive alone)
    luhn_ok("4111111111111111"), card_issuer("4111111111111111")      # True, "visa"
    business_number_ok("1018152478")        # a business registration number's check digit
    public_ip("8.8.4.4")                    # globally routable (not private, loopback, documentation)
    number_clusters(text)                   # runs of 7+ digits and separators (re.Match), in text order
    ipv6_candidates(text)                   # runs of hex digits and colons holding two colons (re.Match)

Written here rather than taken from python-stdnum: its `kr.rrn.validate` rejects every resident number
issued since October 2020 (their last six digits are random, so the check digit fails one time in ten
out of eleven) and raises per call, where the detectors need separate yes/no answers for the date and the
check digit on hot paths. tests/data/screen/test_pii.py cross-checks these against python-stdnum where both apply.
"""

from __future__ import annotations

import datetime
import functools
import ipaddress
import re
import sys
from collections.abc import Iterator

from rankzero.data.native.constants import HEX_OR_COLON
from rankzero.data.screen.pii_forms import character_class, cluster_separators

# The 7th digit of a resident (1-4, 9, 0) or foreigner (5-8) registration number: century and sex.
CENTURY = {"9": 1800, "0": 1800, "1": 1900, "2": 1900, "5": 1900, "6": 1900,
           "3": 2000, "4": 2000, "7": 2000, "8": 2000}
FOREIGNER_DIGITS = frozenset("5678")
_REGISTRATION_WEIGHTS = (2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5)
_BUSINESS_WEIGHTS = (1, 3, 7, 1, 3, 7, 1, 3, 5)


def registration_date_ok(digits: str) -> bool:
    """The first six of 13 digits are YYMMDD of a real calendar day in the century the 7th digit names."""
    try:
        datetime.date(CENTURY[digits[6]] + int(digits[:2]), int(digits[2:4]), int(digits[4:6]))
    except ValueError:
        return False
    return True


def registration_check_ok(digits: str) -> bool:
    """The check digit of numbers issued before October 2020 (weights 2-9,2-5, mod 11)."""
    total = sum(weight * int(digit) for weight, digit in zip(_REGISTRATION_WEIGHTS, digits))
    return (11 - total % 11) % 10 == int(digits[12])


def luhn_ok(digits: str) -> bool:
    total = 0
    for position, digit in enumerate(reversed(digits)):
        value = int(digit)
        if position % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def card_issuer(digits: str) -> str | None:
    """The card network whose prefix and length the number has (None: no network issues it)."""
    length, two, four = len(digits), int(digits[:2]), int(digits[:4])
    if digits[0] == "4" and length in (13, 16, 19):
        return "visa"
    if length == 16 and (51 <= two <= 55 or 2221 <= four <= 2720):
        return "mastercard"
    if length == 15 and two in (34, 37):
        return "amex"
    if 16 <= length <= 19 and 3528 <= four <= 3589:
        return "jcb"
    if 16 <= length <= 19 and two == 62:
        return "unionpay"
    if 16 <= length <= 19 and (four == 6011 or two == 65 or 644 <= int(digits[:3]) <= 649):
        return "discover"
    if length in (14, 16) and (two in (36, 38) or 300 <= int(digits[:3]) <= 305):
        return "diners"
    # Korean domestic-only cards (BC's and the banks' local brands) carry 9-prefixed BINs.
    if length == 16 and digits[0] == "9":
        return "domestic"
    return None


def business_number_ok(digits: str) -> bool:
    """A business registration number (사업자등록번호, XXX-XX-XXXXX): the National Tax Service's check digit,
    and python-stdnum's structural rules (office code from 101, no all-zero groups)."""
    if digits[:3] < "101" or digits[3:5] == "00" or digits[5:9] == "0000":
        return False
    total = sum(weight * int(digit) for weight, digit in zip(_BUSINESS_WEIGHTS, digits))
    total += int(digits[8]) * 5 // 10
    return (10 - total % 10) % 10 == int(digits[9])


def public_ip(text: str) -> bool:
    """A valid address that is globally routable: private, loopback, link-local and documentation ranges
    name no one."""
    try:
        return ipaddress.ip_address(text).is_global
    except ValueError:
        return False


# Runs of digits and separators at least 7 characters long: where every number detector looks (a number written with
# any dash, space or invisible character between its groups, or in full-width forms, ０１０－１２３４－５６７８, read as
# its ASCII twin: pii_forms.py). The scan is most of the masker's time; with --decontaminate, scan.py's compiled
# pass already says which texts hold none and where the others' lie (`numbers`).
_CLUSTER_SHAPE = r"[{d}+(\uff0b\uff08][{d}{separators}]{{5,}}[{d}]"
_ASTRAL = "\U00010000-\U0010ffff"


@functools.cache
def cluster_pattern() -> re.Pattern:
    """The definition of a number cluster, with `\\d`."""
    return re.compile(_CLUSTER_SHAPE.format(d=r"\d", separators=character_class(cluster_separators())))


def _bmp_decimals() -> str:
    """What `\\d` matches below U+10000 (str.isdecimal), as ranges for a character class."""
    return character_class(chr(code) for code in range(0x10000) if chr(code).isdecimal())


# cluster_pattern with `\d` spelled out as the BMP's digits (re tests a character against a bitmap, not the Unicode
# database: half the scan's time, the masker's largest part) and all of the astral planes as one range. A match
# holding an astral code point (an emoji by a number, a mathematical digit) sends its text back to cluster_pattern,
# so the clusters found are its: a match without one is a cluster_pattern match, and every cluster_pattern match is
# inside a quick match (tests/data/screen/test_pii_scans.py checks the matches are the same). Built at the first scan (~10 ms),
# not at import: every prepare process imports this module, `--pii off` ones included.
@functools.cache
def quick_cluster() -> re.Pattern:
    return re.compile(_CLUSTER_SHAPE.format(d=_bmp_decimals() + _ASTRAL, separators=character_class(
        separator for separator in cluster_separators() if separator <= "\uffff")))


def number_clusters(text: str, start: int = 0, end: int = sys.maxsize) -> list[re.Match]:
    """cluster_pattern().finditer(text, start, end), as a list."""
    found = list(quick_cluster().finditer(text, start, end))
    if any(max(match.group()) > "\uffff" for match in found):
        return list(cluster_pattern().finditer(text, start, end))
    return found


# An IPv6 candidate: a run of hex digits and colons holding two colons (the boundaries and the '::' / 8-group shape
# are checked on the few candidates: pii._ipv6). _IPV6 can match from any position, so re tries it at every one (~14
# ns a character of Korean text, a quarter of the masker's time on texts with 7 colons); _COLON_PAIR starts with
# a literal, which re finds in C, and every run _IPV6 matches holds one.
_IPV6 = re.compile(r"[0-9A-Fa-f:]*:[0-9A-Fa-f]*:[0-9A-Fa-f:]*")
_COLON_PAIR = re.compile(r":[0-9A-Fa-f]*:")
_HEX_OR_COLON = frozenset(HEX_OR_COLON)


def ipv6_candidates(text: str) -> Iterator[re.Match]:
    """_IPV6.finditer(text), the same matches: each is a whole run of [0-9A-Fa-f:], found from its first colon
    pair back to the run's start (tests/data/screen/test_pii_scans.py checks the two agree)."""
    end = 0
    for pair in _COLON_PAIR.finditer(text):
        if pair.start() < end:  # in the run matched last
            continue
        start = pair.start()
        while start > end and text[start - 1] in _HEX_OR_COLON:
            start -= 1
        match = _IPV6.match(text, start)
        end = match.end()
        yield match
