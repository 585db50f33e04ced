"""Personal-information masking (rankzero/data/screen/pii.py, pii_checks.py): validators against python-stdnum,
every detector on made-up numbers, look-alikes left alone, idempotence, the dump rule, blanked samples."""

import random

import pytest
from stdnum import luhn as stdnum_luhn
from stdnum.kr import brn as stdnum_brn
from stdnum.kr import rrn as stdnum_rrn

from rankzero.data.screen.pii import DUMP_MIN_SPANS, PLACEHOLDERS, PiiMasker, blank, is_dump
from rankzero.data.screen.pii_checks import (business_number_ok, card_issuer, luhn_ok, public_ip, registration_check_ok,
                                             registration_date_ok)
from rankzero.data.screen.pii_counts import PiiCounts

MASKER = PiiMasker()


def with_check_digit(twelve: str) -> str:
    return twelve + stdnum_rrn.calc_check_digit(twelve)


def luhn_complete(prefix: str) -> str:
    return prefix + stdnum_luhn.calc_check_digit(prefix)


def masked_kinds(text: str) -> dict:
    return dict(MASKER.mask(text).masked)


# --- validators ---------------------------------------------------------------------------------------


def test_registration_check_digit_agrees_with_stdnum():
    rng = random.Random(0)
    for _ in range(2000):
        digits = "".join(rng.choice("0123456789") for _ in range(13))
        assert registration_check_ok(digits) == (stdnum_rrn.calc_check_digit(digits[:12]) == digits[12])


def test_registration_date_agrees_with_stdnum_and_follows_the_century_digit():
    rng = random.Random(1)
    for _ in range(2000):
        digits = f"{rng.randrange(100):02d}{rng.randrange(14):02d}{rng.randrange(33):02d}{rng.randrange(10)}000000"
        try:
            stdnum_rrn.get_birth_date(digits)
            expected = True
        except Exception:
            expected = False
        assert registration_date_ok(digits) == expected, digits
    assert registration_date_ok("0002293000000")  # 2000 was a leap year (century digit 3: 2000s)
    assert not registration_date_ok("0002291000000")  # 1900 was not
    assert not registration_date_ok("9913011000000") and not registration_date_ok("9904311000000")


def test_luhn_agrees_with_stdnum():
    rng = random.Random(2)
    for _ in range(2000):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.choice((15, 16))))
        assert luhn_ok(digits) == stdnum_luhn.is_valid(digits)


def test_card_issuer_prefixes():
    assert card_issuer("4111111111111111") == "visa"
    assert card_issuer("5500000000000004") == "mastercard" and card_issuer("2221000000000009") == "mastercard"
    assert card_issuer("378282246310005") == "amex"
    assert card_issuer("3530111333300000") == "jcb" and card_issuer("6200000000000005") == "unionpay"
    assert card_issuer("9410123412341234") == "domestic"
    assert card_issuer("1234567812345670") is None and card_issuer("7000000000000000") is None


def test_business_number_accepts_a_subset_of_stdnums_valid_numbers():
    assert business_number_ok("1248100998")  # a real, published one
    rng = random.Random(3)
    accepted = 0
    for _ in range(3000):
        digits = "".join(rng.choice("0123456789") for _ in range(10))
        if business_number_ok(digits):
            accepted += 1
            assert stdnum_brn.is_valid(digits), digits
    assert 200 < accepted < 400  # one check digit in ten


def test_public_ip():
    assert public_ip("8.8.4.4") and public_ip("2001:4860:4860::8888")
    for private in ("10.0.0.1", "192.168.0.1", "172.16.5.4", "127.0.0.1", "192.0.2.10", "::1", "fe80::1", "256.1.1.1"):
        assert not public_ip(private), private


# --- detectors ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "문의kim@naver.com", "KIM.Lee@Daum.NET입니다", "메일: hong_gil-dong+news@korea.ac.kr로 보내", "<Park@GMAIL.COM>"])
def test_email_case_blind_and_glued_to_hangul(text):
    result = MASKER.mask(text)
    assert result.masked == {"email": 1}
    assert "@" not in result.text and "|||EMAIL_ADDRESS|||" in result.text
    hangul = lambda s: "".join(c for c in s if "가" <= c <= "힣")  # noqa: E731
    assert hangul(result.text) == hangul(text)  # the Hangul glued to it stays


@pytest.mark.parametrize("number", [
    "010-1234-5678", "010 1234 5678", "010.1234.5678", "01012345678", "011-123-4567", "(010)1234-5678",
    "02-123-4567", "02)1234-5678", "(02) 123-4567", "0212345678", "031-123-4567", "064-712-3456",
    "070-1234-5678", "0505-123-4567", "080-123-4567", "+82 10 1234 5678", "+82-10-1234-5678", "+821012345678",
    "+82 (0)2-123-4567", "+82-2-1234-5678", "+82 31 123 4567"])
def test_phone_numbers(number):
    assert masked_kinds(f"연락처{number}로 연락 주세요") == {"phone": 1}


def test_registration_numbers_need_a_real_date_not_a_check_digit():
    valid = with_check_digit("900101123456")
    post_2020 = "210315-4" + ("123456" if not registration_check_ok("2103154123456") else "123457")
    assert not registration_check_ok(post_2020.replace("-", ""))  # random digits: the old check digit fails
    for text in (f"{valid[:6]}-{valid[6:]}", post_2020, "900101 - 2345678", "000229-3123456"):
        assert masked_kinds(f"본인 {text} 확인") == {"resident_registration": 1}, text
    assert masked_kinds("번호 850707-5123456") == {"foreigner_registration": 1}
    result = MASKER.mask("번호 990231-1234567, 901301-2345678")  # no 31 February, no 13th month
    assert result.masked == {} and result.rejected == {("resident_registration", "bad_date"): 2}


def test_bare_registration_numbers_need_the_check_digit_or_a_context_word():
    valid = with_check_digit("880808234567")
    invalid = valid[:12] + str((int(valid[12]) + 1) % 10)
    assert masked_kinds(f"번호 {valid}") == {"resident_registration": 1}
    assert masked_kinds(f"생년월일 {invalid}") == {"resident_registration": 1}
    result = MASKER.mask(f"송장번호 {invalid} 배송 중")
    assert result.masked == {} and result.rejected[("resident_registration", "bad_check_digit")] == 1


def test_cards_grouped_or_with_context_luhn_and_issuer():
    visa, amex = luhn_complete("411111111111111"), luhn_complete("37828224631000")
    grouped = "-".join(visa[i:i + 4] for i in range(0, 16, 4))
    assert masked_kinds(f"번호 {grouped} 입니다") == {"card": 1}
    assert masked_kinds(f"번호 {' '.join(visa[i:i + 4] for i in range(0, 16, 4))}") == {"card": 1}
    assert masked_kinds(f"번호 {amex[:4]}-{amex[4:10]}-{amex[10:]}") == {"card": 1}
    assert masked_kinds(f"신용카드 {visa}") == {"card": 1}
    no_context = MASKER.mask(f"번호 {visa} 조회")
    assert no_context.masked == {} and no_context.rejected == {("card", "no_context"): 1}
    bad_luhn = grouped[:-1] + str((int(grouped[-1]) + 1) % 10)
    assert MASKER.mask(f"번호 {bad_luhn}").rejected == {("card", "bad_check_digit"): 1}
    no_issuer = luhn_complete("123456781234567")
    no_issuer = "-".join(no_issuer[i:i + 4] for i in range(0, 16, 4))
    assert MASKER.mask(f"번호 {no_issuer}").rejected == {("card", "unknown_issuer"): 1}


@pytest.mark.parametrize("kind,with_context,without_context", [
    ("account", "입금계좌: 국민은행 123456-01-234567 (예금주 홍길동)", "제품 코드 123456-01-234567 참조"),
    ("account", "카카오뱅크 3333012345678로 송금", "품번 3333012345678 참조"),
    ("passport", "여권번호 M12345678 제출", "모델명 M12345678 출시"),
    ("passport", "passport no. M123A4567", "part M123A4567"),
    ("driver_license", "운전면허번호 11-17-123456-12", "문서번호 11-17-123456-12"),
])
def test_context_only_detectors(kind, with_context, without_context):
    assert masked_kinds(with_context) == {kind: 1}
    result = MASKER.mask(without_context)
    assert result.text == without_context
    if kind != "passport":  # a passport's letter-digit shape is only looked for near its word
        assert (kind, "no_context") in result.rejected


def test_full_width_digits_are_read_as_digits():
    # \\d matches them, so the registration patterns find these numbers; the validators must read them too (a
    # full-width resident number stopped the build with a KeyError).
    assert masked_kinds("본인 ９００１０１-１２３４５６７ 확인") == {"resident_registration": 1}
    assert masked_kinds("번호 ８５０７０７-５１２３４５６") == {"foreigner_registration": 1}
    assert MASKER.mask("번호 ９９０２３１-１２３４５６７").rejected == {("resident_registration", "bad_date"): 1}


@pytest.mark.parametrize("text, kind", [
    ("연락처 ０１０-１２３４-５６７８ 로", "phone"),  # the patterns spell area codes in ASCII: these were missed
    ("연락처 ０１０－１２３４－５６７８ 로", "phone"),  # full-width separators too
    ("전화（０２）１２３４－５６７８", "phone"),
    ("문의 ０１０１２３４５６７８", "phone"),
    ("카드 ４１１１-１１１１-１１１１-１１１１ 승인", "card"),
    ("접속 IP ２０３.２５２.１３.５ 차단", "ip_address"),
    ("전화 ٠١٠-١٢٣٤-٥٦٧٨ (Arabic-Indic digits)", "phone"),
])
def test_full_width_and_other_scripts_digits_are_masked_like_ascii_ones(text, kind):
    result = MASKER.mask(text)
    assert result.masked == {kind: 1} and PLACEHOLDERS[kind] in result.text
    assert not any(char.isdecimal() for char in result.text)


@pytest.mark.parametrize("text", ["２０２６－１１－２６ 개정", "고객센터 １５８８－１２３４", "가격 １２３,４５６원",
                                  "ISBN ９７８-８９-３６４-３４２８-９"])
def test_full_width_look_alikes_stay(text):
    assert MASKER.mask(text).text == text


def test_ip_addresses_public_only():
    result = MASKER.mask("접속 IP 203.252.13.5 와 2001:4860:4860::8888, 내부 192.168.0.1, ::1")
    assert result.masked == {"ip_address": 2}
    assert "192.168.0.1" in result.text and "::1" in result.text
    assert MASKER.mask("서버 2001:4860:4860:0:0:0:0:8888 접속").masked == {"ip_address": 1}  # 7 colons, no "::"


LOOK_ALIKES = [
    "2024-03-15", "2024.03.15.", "2024년 3월 15일 10:30:45", "1,234,000원", "12,000,000원", "₩ 3500000",
    "ISBN 978-89-6626-123-4", "ISBN 9788966261234", "1990-2020년", "(1861-1904)", "1592-1598년",
    "법률 제12345호", "의안번호 2101234", "2020헌마1234", "대법원 2019다123456 판결", "v2.7.18.4", "버전 3.10.12.1",
    "Python 3.12.1", "37.5665° N, 126.9780° E", "좌표 (37.5665, 126.9780)", "주문번호 2024031512345678",
    "주문번호 20240315-0012345", "송장 6012-3456-7890", "고객센터 1588-1234", "대표번호 1644-0000",
    "사업자등록번호 124-81-00998", "ISSN 1234-5678", "\n12.2.1.1. 메일링 리스트", "그림 3.2.1.4", "icon@2x.png",
    "@username", "sha 3f786850e387550fdab836ed7e6dc881de23001b", "12:30:45", "00:1A:2B:3C:4D:5E", "std::vector",
]


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_look_alikes_are_left_alone(text):
    document = f"다음은 예시이다: {text} 이상."
    result = MASKER.mask(document)
    assert result.text == document and result.masked == {}


def test_public_numbers_are_counted_not_masked():
    result = MASKER.mask("사업자등록번호 124-81-00998, 고객센터 1588-1234")
    assert result.public == {"business_registration": 1, "business_phone": 1} and result.masked == {}


def test_masking_twice_changes_nothing():
    rrn = with_check_digit("750505123456")
    text = (f"문의 KIM@naver.com, 010-1234-5678, 주민번호 {rrn}, 카드 4111-1111-1111-1111, 입금계좌 국민 "
            "123456-01-234567, 여권 M12345678, 운전면허 11-17-123456-12, IP 203.252.13.5 2001:db9::1")
    once = MASKER.mask(text)
    assert set(once.masked) == set(PLACEHOLDERS) - {"foreigner_registration"}
    twice = MASKER.mask(once.text)
    assert twice.text == once.text and twice.masked == {} and twice.rejected == {}
    for placeholder in PLACEHOLDERS.values():
        assert not any(c.isdigit() or c in "@:" for c in placeholder)


def test_dump_rule():
    assert not is_dump(DUMP_MIN_SPANS - 1, 100)
    assert is_dump(DUMP_MIN_SPANS, 5_000)
    assert not is_dump(DUMP_MIN_SPANS, DUMP_MIN_SPANS * 1000)  # ten reporters' e-mails over a long page
    page = "\n".join(f"회원{i}: 010-{1000 + i}-{2000 + i}" for i in range(30))
    assert is_dump(MASKER.mask(page).spans, len(page))


def test_samples_and_counts_hold_nothing_raw():
    text = "연락처 010-9876-5432 또는 lee.sun@example.co.kr, 2024년 3월"
    result = MASKER.mask(text)
    assert result.samples
    for _, context in result.samples:
        assert not any(c.isdigit() for c in context) and "lee.sun" not in context
    assert blank("mail kim@naver.com 2024") == "mail ***@naver.com ####"
    counts, other = PiiCounts(), PiiCounts()
    counts.add(result, dropped=False)
    other.add(MASKER.mask("\n".join(f"010-{1000 + i}-5678" for i in range(12))), dropped=True)
    counts.merge(other)
    described = counts.describe()
    assert described["spans_masked"] == {"email": 1, "phone": 1}
    assert described["documents_touched"] == {"email": 1, "phone": 1}
    assert described["documents_dropped_as_dumps"] == 1 and described["spans_in_dropped_documents"] == {"phone": 12}
    assert "9876" not in repr(described) + repr(counts.samples)


def test_the_screen_masks_each_segment_and_keeps_its_label_flag():
    from rankzero.data.screen.screening import Screen

    screen = Screen(PiiMasker(), None, None)
    documents = [[("user: 제 번호는 010-1234-5678입니다\n", False), ("assistant: kim@naver.com로 보내 드릴게요", True)],
                 [("평범한 문서", True)]]
    texts = ["".join(text for text, _ in segments) for segments in documents]
    keep, kept, report = screen(documents, texts, count_tokens=None)
    assert keep.tolist() == [True, True]
    assert kept[0] == [("user: 제 번호는 |||PHONE_NUMBER|||입니다\n", False),
                       ("assistant: |||EMAIL_ADDRESS|||로 보내 드릴게요", True)]
    assert kept[1] == documents[1] and report["pii"]["masked"] == {"phone": 1, "email": 1}
