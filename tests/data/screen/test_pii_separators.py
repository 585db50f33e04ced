"""Personal data written with other separators (issue 47, rankzero/data/screen/pii_forms.py): every Unicode dash, space and
invisible format character between a number's digit groups, full-width and invisible characters in e-mail
addresses; the look-alikes written the same ways stay; file names are masked with the same masker."""

import re
import unicodedata

import pytest
from test_pii import LOOK_ALIKES

from rankzero.data.screen.pii import PLACEHOLDERS, PiiMasker, mask_name
from rankzero.data.screen.pii_forms import HANGUL_DASH, MINUS_SIGNS, cluster_separators, separator_codes

MASKER = PiiMasker()
# Each personal number as an ASCII writer types it, with a word that makes it personal where its kind needs one.
NUMBERS = {
    "phone": ("전화 ", "010-2345-6789"),
    "resident_registration": ("주민등록번호 ", "900101-1234568"),
    "foreigner_registration": ("외국인등록번호 ", "900101-5234561"),
    "card": ("결제 카드 ", "4111-1111-1111-1111"),
    "account": ("입금계좌 국민은행 ", "123456-12-345678"),
}
# The separator classes of the issue, one member each (every member of each is checked below; the full-width '－'
# and the ideographic space were read before: tests/data/screen/test_pii.py).
SEPARATORS = {
    "no-break space": "\u00a0", "narrow no-break space": "\u202f", "en dash": "\u2013", "em dash": "\u2014",
    "hyphen": "\u2010", "non-breaking hyphen": "\u2011", "figure dash": "\u2012", "horizontal bar": "\u2015",
    "minus sign": "\u2212", "small hyphen-minus": "\ufe63", "Hangul ㅡ": "\u3161", "line break": "\n", "CRLF": "\r\n",
    "line separator": "\u2028", "dash and a line break": "-\n", "spaced dash": " - ",
}
INVISIBLE = {"zero-width space": "\u200b", "soft hyphen": "\u00ad", "word joiner": "\u2060", "BOM": "\ufeff",
             "zero-width joiner": "\u200d", "left-to-right mark": "\u200e"}


def written_with(number: str, separator: str) -> str:
    return number.replace("-", separator)


def assert_masked(text: str, kind: str, number: str) -> None:
    result = MASKER.mask(text)
    digits = re.sub(r"\D", "", number)
    assert PLACEHOLDERS[kind] in result.text and result.masked == {kind: 1}, (text, result.text)
    assert digits not in re.sub(r"\D", "", result.text), result.text


@pytest.mark.parametrize("separator", SEPARATORS.values(), ids=SEPARATORS.keys())
@pytest.mark.parametrize("kind", NUMBERS)
def test_numbers_behind_other_separators_are_masked(kind, separator):
    context, number = NUMBERS[kind]
    assert_masked(f"{context}{written_with(number, separator)} 입니다.", kind, number)


@pytest.mark.parametrize("invisible", INVISIBLE.values(), ids=INVISIBLE.keys())
@pytest.mark.parametrize("kind", NUMBERS)
def test_numbers_with_an_invisible_character_inside_are_masked(kind, invisible):
    context, number = NUMBERS[kind]
    for at in (2, number.index("-"), number.index("-") + 1, len(number) - 2):  # in a group, before a dash, after it
        assert_masked(f"{context}{number[:at]}{invisible}{number[at:]} 입니다.", kind, number)
    assert_masked(f"{context}{written_with(number, invisible)} 입니다.", kind, number)


def test_every_dash_space_and_invisible_character_of_the_unicode_database():
    """The classes are Unicode's, not a list: every Pd code point, minus sign and ㅡ between a phone number's groups,
    every whitespace character, every format character inside one (astral ones included)."""
    codes = {name: list(map(chr, values.tolist())) for name, values in separator_codes().items()}
    assert set(codes["dash"]) >= {chr(code) for code in range(0x110000) if unicodedata.category(chr(code)) == "Pd"}
    assert set(MINUS_SIGNS + HANGUL_DASH) <= set(codes["dash"]) and "\U000e0020" in codes["invisible"]
    assert set(codes["space"]) == {chr(code) for code in range(0x110000) if chr(code).isspace()}
    for dash in codes["dash"]:
        assert_masked(f"전화 010{dash}2345{dash}6789", "phone", "010-2345-6789")
    for space in codes["space"]:
        assert_masked(f"전화 010{space}2345{space}6789", "phone", "010-2345-6789")
    for invisible in codes["invisible"]:
        assert_masked(f"전화 010-23{invisible}45-6789", "phone", "010-2345-6789")
    assert all(char in cluster_separators() for chars in codes.values() for char in chars)


ADDRESSES = ["kim.minsu＠naver.com", "kim.minsu@naver．com", "ｋｉｍ．ｍｉｎｓｕ＠ｎａｖｅｒ．ｃｏｍ", "kim.minsu﹫naver.com",
             "kim.min\u200bsu@naver.com", "kim.minsu\u200b@naver.com", "kim.minsu@\u200bnaver.com",
             "kim.minsu@na\u00adver.com", "kim.minsu@naver.co\u200dm"]


@pytest.mark.parametrize("address", ADDRESSES)
def test_emails_in_full_width_forms_or_with_invisible_characters(address):
    text = f"문의{address}로 보내 주세요."
    result = MASKER.mask(text)
    assert result.text == f"문의{PLACEHOLDERS['email']}로 보내 주세요." and result.masked == {"email": 1}


SEPARATED_LOOK_ALIKES = [look.replace("-", dash) for look in LOOK_ALIKES if "-" in look for dash in "\u2013\u2212ㅡ"]
SEPARATED_LOOK_ALIKES += [look.replace(" ", "\u00a0") for look in LOOK_ALIKES if " " in look]
SEPARATED_LOOK_ALIKES += ["2024\u200b-03-15", "2024-\n03-15", "1990 – 2020년",
                          "ISBN 978\u201389\u20136626\u2013123\u20134", "주문번호 2024\u00a00315\u00a01234\u00a05678",
                          "12:30:45\u00a0~\u00a013:00:00", "icon＠2x.png",
                          # Groups apart by spaces with more groups beside them: no account, even by a bank's name.
                          "국민은행 ISBN 978 89 6626 123 4", "은행 송금 12 123456 12 345678 9"]


@pytest.mark.parametrize("text", SEPARATED_LOOK_ALIKES)
def test_look_alikes_written_with_other_separators_stay(text):
    document = f"다음은 예시이다: {text} 이상."
    result = MASKER.mask(document)
    assert result.text == document and result.masked == {}


def test_a_span_with_a_dropped_character_covers_it_and_nothing_else():
    """The characters read as nothing inside a number go with it; the text around it is the text's."""
    text = "가\u200b 010-23\u200b45-\n6789\u200b 나"
    assert MASKER.mask(text).text == f"가\u200b {PLACEHOLDERS['phone']}\u200b 나"


@pytest.mark.parametrize(("name", "expected"), [
    ("/data/연락처_010-2345-6789.jsonl", "/data/연락처_|||PHONE_NUMBER|||.jsonl"),
    ("/data/주민_900101–1234568/part.jsonl", "/data/주민_|||RESIDENT_REGISTRATION_NUMBER|||/part.jsonl"),
    ("/data/kim＠naver.com/a.jsonl", "/data/|||EMAIL_ADDRESS|||/a.jsonl"),
    ("상담_kim.minsu@naver.com.jsonl.gz", "상담_|||EMAIL_ADDRESS|||.jsonl.gz"), ("icon@2x.png", "icon@2x.png"),
    ("/data/2024-03-15/ko.jsonl", "/data/2024-03-15/ko.jsonl"), ("ko_wiki.jsonl:2", "ko_wiki.jsonl:2")])
def test_file_names_are_masked_with_the_same_masker(name, expected):
    assert mask_name(name) == expected
