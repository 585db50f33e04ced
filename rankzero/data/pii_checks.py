"""Validators behind the personal-information detectors (pii.py): dates, check digits, issuers, IP scope.

    registration_date_ok("9001011234568")   # a real birth date for the century its 7th digit names
    registration_check_ok("9001011234568")  # the pre-October-2020 check digit (never decisive alone)
    luhn_ok("4111111111111111"), card_issuer("4111111111111111")      # True, "visa"
    business_number_ok("1018152478")        # a business registration number's check digit
    public_ip("8.8.4.4")                    # globally routable (not private, loopback, documentation)

Written here rather than taken from python-stdnum: its `kr.rrn.validate` rejects every resident number
issued since October 2020 (their last six digits are random, so the check digit fails one time in ten
out of eleven) and raises per call, where the detectors need separate yes/no answers for the date and the
check digit on hot paths. tests/test_pii.py cross-checks these against python-stdnum where both apply.
"""

from __future__ import annotations

import datetime
import ipaddress

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
