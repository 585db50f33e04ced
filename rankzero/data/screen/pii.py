"""Personal information in Korean text: found by regex, confirmed by validators, replaced by placeholders.

    masker = PiiMasker()
    result = masker.mask("문의kim@naver.com, 010-1234-5678")     # "문의|||EMAIL_ADDRESS|||, |||PHONE_NUMBER|||"
    result.text, result.masked, result.public, result.rejected     # counts per detector / (detector, reason)
    mask_name("/data/연락처_010-2345-6789.jsonl")                 # "/data/연락처_|||PHONE_NUMBER|||.jsonl"

What is masked and why is in docs/data.md. In short: the identifiers Korea's Personal Information
Protection Act names or that reach one person — resident and foreigner registration numbers, phone
numbers, e-mail addresses, card, account, passport and driver's licence numbers, public IP addresses.
Business registration numbers and 15xx/16xx/18xx business lines are published by law: they are counted,
never masked. Numbers that identify no one only by their shape (accounts, passports, licences, bare card
numbers) are masked only next to a word that says what they are.

How it stays fast (docs/data.md has the figures): one regex finds the *clusters* — runs of digits and
separators with 7 or more characters, which every number detector needs; most of a Korean page has none.
Each detector's pattern then runs only inside a cluster, and its validator only on a match. E-mails are
found from their '@' outwards, IPv6 from colon pairs, passports only next to a context word. A placeholder
holds no digit, '@' or ':', so masking a masked text changes nothing.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from rankzero.data.native.constants import AT_SIGN, AT_SIGNS, COLONS, PASSPORT
from rankzero.data.screen.pii_checks import (FOREIGNER_DIGITS, business_number_ok, card_issuer, ipv6_candidates,
                                             luhn_ok, number_clusters, public_ip, registration_check_ok,
                                             registration_date_ok)
from rankzero.data.screen.pii_forms import address_view, numbers_view

# PiiMasker.mask's gate without marks spells these out (a loop there costs more than the test it saves)
assert AT_SIGNS == "@\uff20\ufe6b", "constants.AT_SIGNS changed: update the e-mail gate in PiiMasker.mask with it"

PLACEHOLDERS = {
    "email": "|||EMAIL_ADDRESS|||",
    "phone": "|||PHONE_NUMBER|||",
    "resident_registration": "|||RESIDENT_REGISTRATION_NUMBER|||",
    "foreigner_registration": "|||FOREIGNER_REGISTRATION_NUMBER|||",
    "card": "|||CARD_NUMBER|||",
    "account": "|||ACCOUNT_NUMBER|||",
    "passport": "|||PASSPORT_NUMBER|||",
    "driver_license": "|||DRIVER_LICENSE_NUMBER|||",
    "ip_address": "|||IP_ADDRESS|||",
}
PUBLIC = ("business_registration", "business_phone")  # counted, left in the text
PLACEHOLDER_TOKENS = tuple(PLACEHOLDERS.values())  # special tokens of rankzero-trained tokenizers

# A page this dense with personal data is a dump (a leaked member list, a contact directory): masking leaves a page
# of placeholders, so it is dropped whole. News pages with a reporter's e-mail per article stay far below both bounds.
DUMP_MIN_SPANS = 10
DUMP_MAX_CHARS_PER_SPAN = 1000

CONTEXT_BEFORE, CONTEXT_AFTER = 40, 20  # characters around a number searched for its context word
CONTEXT = {
    "registration": re.compile(r"주민|생년월일|외국인\s?등록|등록번호"),
    "card": re.compile(r"카드|(?i:card)|신용|결제"),
    "account": re.compile(r"계좌|입금|예금주|송금|이체|은행|뱅크|농협|신협|수협|새마을금고|우체국|(?:KB|NH|IBK|SC)\s|(?i:account)"),
    "passport": re.compile(r"여권|(?i:passport)"),
    "driver_license": re.compile(r"운전\s?면허|면허\s?번호|(?i:driver)"),
    "business": re.compile(r"사업자"),
    "version": re.compile(r"(?i:ver(?:sion)?\.?\s*v?|버전\s*)$"),
}

_NOT_BEFORE, _NOT_AFTER = r"(?<![\d\-])", r"(?![\d\-])"
_AREA = r"(?:1[016789]|2|3[1-3]|4[1-4]|5[1-5]|6[1-4]|70|50[2-8]|80)"  # mobile, Seoul, provinces, VoIP, safe, free
_PHONE = re.compile(
    r"(?<![\d\-+])(?:\+\s?82[\s\-.]?(?:\(0\)\s?)?0?" + _AREA + r"|\(0" + _AREA + r"\)|0" + _AREA + r")"
    r"(?:[\-.]|\s|\)\s?)?\d{3,4}[\-.\s]?\d{4}" + _NOT_AFTER)
_BUSINESS_PHONE = re.compile(_NOT_BEFORE + r"1[568]\d\d[\-.\s]\d{4}(?![\d\-]|\s?년)")
_REGISTRATION = re.compile(_NOT_BEFORE + r"(\d{6})-(\d{7})" + _NOT_AFTER)  # pii_forms drops spaces beside a dash
# A space, unlike a dash, is what stands between any two numbers: judged as the bare form.
_REGISTRATION_BARE = re.compile(_NOT_BEFORE + r"\d{6}\s?\d{7}" + _NOT_AFTER)
_CARD = re.compile(_NOT_BEFORE + r"(?:\d{4}(?:-\d{4}){3}|\d{4}(?:\s\d{4}){3}|3[47]\d\d(?:-\d{6}-|\s\d{6}\s)\d{5})"
                   + _NOT_AFTER)
_CARD_BARE = re.compile(_NOT_BEFORE + r"\d{15,16}" + _NOT_AFTER)
# Groups apart by spaces are one account only where no digit group stands beside them (ISBN 978 89 6626 123 4 is none).
_ACCOUNT = re.compile(_NOT_BEFORE + r"(?:\d{2,6}-\d{2,6}(?:-\d{1,7}){0,2}"
                      r"|(?<!\d\s)\d{2,6}\s\d{2,6}(?:\s\d{1,7}){0,2}(?!\s\d)|\d{10,14})" + _NOT_AFTER)
_DRIVER = re.compile(_NOT_BEFORE + r"(?:\d{2}-)?\d{2}-\d{6}-\d{2}" + _NOT_AFTER)
_BUSINESS_NUMBER = re.compile(_NOT_BEFORE + r"\d{3}-\d{2}-\d{5}" + _NOT_AFTER)
_IPV4 = re.compile(r"(?<![A-Za-z\d.\-])(?:\d{1,3}\.){3}\d{1,3}(?!\d|\.\d)")
_PASSPORT = re.compile(r"(?<![A-Za-z0-9])[MSRODG](?:\d{8}|\d{3}[A-Z]\d{4})(?![A-Za-z0-9])")
_EMAIL_USER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._%+\-]{0,63}$")
_EMAIL_DOMAIN = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+([A-Za-z]{2,24})(?![A-Za-z0-9\-])")
# icon@2x.png is a file; kim@naver.com.jsonl (a file named after an address) holds the address kim@naver.com.
_FILE_SUFFIXES = frozenset({"png", "jpg", "jpeg", "gif", "svg", "webp", "bmp", "ico", "jsonl", "ndjson", "json", "txt",
                            "csv", "parquet", "arrow", "gz", "zst", "bz2", "xz"})
_EMAIL_BEFORE, _EMAIL_AFTER = 96, 320  # characters around an at sign an address is looked for in
_DIGIT = re.compile(r"\d")
_SAMPLE_EMAIL = re.compile(r"[A-Za-z0-9._%+\-]+(?=@)")


def digits_of(match: str) -> str:
    """A match's digits, 0-9 (the detectors run on pii_forms.numbers_view's text)."""
    return "".join(_DIGIT.findall(match))


def _near(text: str, start: int, end: int, context: str) -> bool:
    return CONTEXT[context].search(text, max(0, start - CONTEXT_BEFORE), end + CONTEXT_AFTER) is not None


# A check takes (text, match) and returns (detector, None) to mask or count it, or (detector, reason) to
# reject it; the detector can differ from the pattern's (resident or foreigner numbers share one pattern).
Check = Callable[[str, re.Match], tuple[str, str | None]]


def _registration(text, match):
    digits = digits_of(match.group())
    name = "foreigner_registration" if digits[6] in FOREIGNER_DIGITS else "resident_registration"
    # The check digit does not decide: numbers issued since October 2020 end in random digits.
    return name, None if registration_date_ok(digits) else "bad_date"


def _registration_bare(text, match):
    digits = digits_of(match.group())
    name = "foreigner_registration" if digits[6] in FOREIGNER_DIGITS else "resident_registration"
    if not registration_date_ok(digits):
        return name, "bad_date"
    # Thirteen bare digits with a date are common (order and tracking numbers): only the old check digit
    # or a word that says "registration number" makes one personal.
    if registration_check_ok(digits) or _near(text, match.start(), match.end(), "registration"):
        return name, None
    return name, "bad_check_digit"


def _card(text, match, needs_context=False):
    digits = digits_of(match.group())
    if needs_context and not _near(text, match.start(), match.end(), "card"):
        return "card", "no_context"
    if not luhn_ok(digits):
        return "card", "bad_check_digit"
    return "card", None if card_issuer(digits) else "unknown_issuer"


def _with_context(name: str, context: str) -> Check:
    def check(text, match):
        return name, None if _near(text, match.start(), match.end(), context) else "no_context"
    return check


def _account(text, match):
    number = digits_of(match.group())
    if not 10 <= len(number) <= 14:
        return "account", ""
    if not _near(text, match.start(), match.end(), "account"):
        return "account", "no_context"
    # A business registration number next to a bank's name is still the business's (public) number.
    if len(number) == 10 and business_number_ok(number) and _near(text, match.start(), match.end(), "business"):
        return "account", "business_registration"
    return "account", None


def _business_number(text, match):
    return "business_registration", None if business_number_ok(digits_of(match.group())) else "bad_check_digit"


def _business_phone(text, match):
    first, second = int(match.group()[:4]), int(match.group()[5:])
    return "business_phone", "year_range" if first < second <= 2100 else None


def _ipv4(text, match):
    value = match.group()
    if not public_ip(value):
        return "ip_address", "not_public"
    # 1.2.3.4 or a line opening "12.2.1.1.": a section number, not a host.
    if all(len(octet) == 1 for octet in value.split(".")) or match.start() == 0 or text[match.start() - 1] == "\n":
        return "ip_address", "section_number"
    if CONTEXT["version"].search(text, max(0, match.start() - 12), match.start()):
        return "ip_address", "version"
    return "ip_address", None


def _ipv6(text, match):
    value, start, end = match.group(), match.start(), match.end()
    if ("::" not in value and value.count(":") != 7) or len(value) > 39 \
            or (start and (text[start - 1].isascii() and (text[start - 1].isalnum() or text[start - 1] == "."))) \
            or (end < len(text) and text[end].isascii() and text[end].isalnum()):
        return "ip_address", ""  # a time (12:30:45), a MAC address, C++'s std::vector: no candidate
    return "ip_address", None if public_ip(value) else "not_public"


# In priority order: where two accepted spans overlap, the earlier detector here wins.
_NUMBER_DETECTORS: tuple[tuple[re.Pattern, Check], ...] = (
    (_REGISTRATION, _registration),
    (_CARD, _card),
    (_PHONE, lambda text, match: ("phone", None)),  # _PHONE's area codes and lengths say it all
    (_REGISTRATION_BARE, _registration_bare),
    (_CARD_BARE, lambda text, match: _card(text, match, needs_context=True)),
    (_DRIVER, _with_context("driver_license", "driver_license")),
    (_ACCOUNT, _account),
    (_BUSINESS_NUMBER, _business_number),
    (_BUSINESS_PHONE, _business_phone),
    (_IPV4, _ipv4),
)
# A cluster of at most 8 digits (a date, a price: most of them) can hold only these two (a 15xx line has 8 digits,
# an IPv4 address 4 or more); every other pattern needs 9 (a Seoul phone number) or more, or is no candidate below
# 10 (_account). tests/data/screen/test_pii_scans.py checks the answers agree.
_FEW_DIGITS = 8
_FEW_DIGIT_DETECTORS = tuple((pattern, check) for pattern, check in _NUMBER_DETECTORS
                             if pattern in (_BUSINESS_PHONE, _IPV4))
_PRIORITY = {name: rank for rank, name in enumerate((
    "resident_registration", "foreigner_registration", "card", "phone", "driver_license", "account",
    "business_registration", "business_phone", "ip_address", "passport", "email"))}


@dataclass
class MaskResult:
    text: str
    masked: Counter = field(default_factory=Counter)  # detector -> spans replaced
    public: Counter = field(default_factory=Counter)  # detector -> spans counted and kept
    rejected: Counter = field(default_factory=Counter)  # (detector, reason) -> candidates left alone
    samples: list = field(default_factory=list)  # (detector, context) with digits and e-mail users blanked

    @property
    def spans(self) -> int:
        return sum(self.masked.values())


class PiiMasker:
    """Finds and masks personal information; stateless, safe to share between threads."""

    def __init__(self, samples_per_document: int = 1):
        self.samples_per_document = samples_per_document

    def find(self, text: str, numbers: bool | tuple[int, int] = True,
             marks: int | None = None) -> tuple[list[tuple], Counter]:
        """Accepted spans (start, end, detector, masked?), without overlaps, in text order; rejected counts.
        `numbers`: False where the caller knows the text has no number cluster, (start, end) where all lie there.
        `marks`: the text's constants.AT_SIGN, COLONS and PASSPORT bits where the caller has them from scan.py's
        pass, so the text is not searched for them again (its COLONS, a run of hex digits and colons holding "::"
        or 7 colons, is narrower than the test below and as necessary for an IPv6 candidate)."""
        start, end = numbers if isinstance(numbers, tuple) else (0, len(text) if numbers else 0)
        clusters = number_clusters(text, start, end)  # no lookbehind or ahead: a span finds the same ones
        if marks is None:
            # An IPv6 candidate holds "::" or 7 colons (_ipv6); most texts with a colon have neither.
            ipv6 = ":" in text and ("::" in text or text.count(":") >= 7)
            passport = "여권" in text or "assport" in text
            email = "@" in text or "\uff20" in text or "\ufe6b" in text  # constants.AT_SIGNS, without a loop
        else:
            ipv6, passport, email = marks & COLONS, marks & PASSPORT, marks & AT_SIGN
        if not (clusters or ipv6 or passport or email):
            return [], Counter()  # most documents: nothing to look at
        found: list[tuple[int, int, str, bool]] = []
        rejections: list[tuple[int, int, str, str]] = []

        def judge(match: re.Match, check: Check, text: str = text) -> None:
            name, reason = check(text, match)
            if reason is None:
                found.append((match.start(), match.end(), name, name not in PUBLIC))
            elif reason:  # "": not a candidate of this detector at all
                rejections.append((match.start(), match.end(), name, reason))

        view = numbers_view(text, clusters, _FEW_DIGITS + 1) if clusters else None
        for start, end, digits in view.clusters if view else ():
            # One character past the cluster lets a pattern's lookahead see what ends it.
            for pattern, check in _NUMBER_DETECTORS if digits > _FEW_DIGITS else _FEW_DIGIT_DETECTORS:
                for match in pattern.finditer(view.text, start, end + 1):
                    judge(match, check, view.text)
        if view and view.dropped:  # the spans in the text, with the characters read as nothing inside them
            found = [(*view.span(start, end), *rest) for start, end, *rest in found]
            rejections = [(*view.span(start, end), *rest) for start, end, *rest in rejections]
        if ipv6:
            for match in ipv6_candidates(text):
                judge(match, _ipv6)
        if passport:
            for match in _PASSPORT.finditer(text):
                judge(match, _with_context("passport", "passport"))
        if email:
            self._emails(text, found, rejections)
        spans = _without_overlaps(found)
        # A candidate another detector accepted (a phone number is also an account-shaped number) is no
        # rejection.
        rejected = Counter((name, reason) for start, end, name, reason in rejections
                           if not _overlaps(spans, start, end))
        return spans, rejected

    @staticmethod
    def _emails(text: str, found: list, rejections: list) -> None:
        for sign in AT_SIGNS:
            at = text.find(sign)
            while at >= 0:
                # Around the sign only (a user part is at most 64 characters, a domain at most 255; the rest is
                # room for invisible characters): the text read as an ASCII writer types an address
                # (ｋｉｍ＠ｎａｖｅｒ．ｃｏｍ, kim@na\u200bver.com) costs a search of these few characters, not the page.
                first = max(0, at - _EMAIL_BEFORE)
                view = address_view(text[first:at + _EMAIL_AFTER])
                sign_at = view.position(at - first)
                user = _EMAIL_USER.search(view.text, max(0, sign_at - 64), sign_at)
                domain = _EMAIL_DOMAIN.match(view.text, sign_at + 1)
                if user and domain:
                    labels = domain.group().split(".")
                    while len(labels) > 2 and labels[-1].lower() in _FILE_SUFFIXES:
                        labels.pop()
                    start, end = view.span(user.start(), sign_at + 1 + len(".".join(labels)))
                    span = (first + start, first + end, "email")
                    if labels[-1].lower() in _FILE_SUFFIXES or not labels[-1].isalpha():
                        rejections.append((*span, "file_name"))
                    else:
                        found.append((*span, True))
                at = text.find(sign, at + 1)

    def mask(self, text: str, numbers: bool | tuple[int, int] = True) -> MaskResult:
        return self.apply(text, *self.find(text, numbers))

    def apply(self, text: str, spans: list[tuple], rejected: Counter) -> MaskResult:
        """The text with `find`'s spans masked, and what was found."""
        result = MaskResult(text, rejected=rejected)
        if not spans:
            return result
        pieces, last = [], 0
        for start, end, name, masked in spans:
            if masked:
                pieces += (text[last:start], PLACEHOLDERS[name])
                last = end
                result.masked[name] += 1
            else:
                result.public[name] += 1
        result.text = "".join(pieces) + text[last:] if pieces else text
        if result.masked and self.samples_per_document:
            result.samples = _samples(result.text, self.samples_per_document)
        return result


def is_dump(spans: int, characters: int) -> bool:
    """The dump rule: at least DUMP_MIN_SPANS masked spans and fewer than DUMP_MAX_CHARS_PER_SPAN characters
    of text for each."""
    return spans >= DUMP_MIN_SPANS and characters < spans * DUMP_MAX_CHARS_PER_SPAN


def _without_overlaps(found: list) -> list:
    """Keep the better of overlapping spans (earlier in _PRIORITY, then longer); return them in text order."""
    kept: list = []  # sorted by start, never overlapping
    for span in sorted(found, key=lambda s: (_PRIORITY[s[2]], s[0] - s[1], s[0])):
        at = bisect.bisect_left(kept, span)
        if (at == 0 or kept[at - 1][1] <= span[0]) and (at == len(kept) or span[1] <= kept[at][0]):
            kept.insert(at, span)
    return kept


def _overlaps(spans: list, start: int, end: int) -> bool:
    at = bisect.bisect_left(spans, (end,))
    return at > 0 and spans[at - 1][1] > start


def blank(text: str) -> str:
    """What a written sample may show: every digit '#', every e-mail's user part '***'."""
    return _DIGIT.sub("#", _SAMPLE_EMAIL.sub("***", text))


def _samples(masked_text: str, limit: int, width: int = 40) -> list[tuple[str, str]]:
    out = []
    for name, placeholder in PLACEHOLDERS.items():
        at = masked_text.find(placeholder)
        if at >= 0 and len(out) < limit:
            context = masked_text[max(0, at - width): at + len(placeholder) + width]
            out.append((name, blank(context.replace("\n", " "))))
    return out


_NAME_MASKER = PiiMasker(samples_per_document=0)


def mask_name(name: str) -> str:
    """A source's spec or a file's path as the manifest, the sample files and the logs write it: masked like a
    document's text (a file named after its subject's phone number holds that number as much as its lines do),
    whatever --pii says (a name is no training text, and a manifest travels further than the data)."""
    return _NAME_MASKER.mask(name).text


class NameMasker:
    """mask_name of each name given, the same for the same name, numbered where names differ only in what was masked
    ("a_|||PHONE_NUMBER|||.jsonl", then "a_|||PHONE_NUMBER|||.jsonl #2"): the names key the manifest's entries."""

    def __init__(self):
        self._names: dict[str, str] = {}
        self._seen: Counter = Counter()

    def __call__(self, name: str) -> str:
        if name not in self._names:
            masked = mask_name(name)
            self._seen[masked] += 1
            self._names[name] = masked if self._seen[masked] == 1 else f"{masked} #{self._seen[masked]}"
        return self._names[name]


def masked_paths(value):
    """A copy of JSON-like `value` with every "path" and "hub" string mask_name'd: the fingerprint's inputs as the
    manifest records them (the fingerprint hashes them as they are, so which inputs make which dataset is unchanged)."""
    if isinstance(value, dict):
        return {key: mask_name(item) if key in ("path", "hub") and isinstance(item, str) else masked_paths(item)
                for key, item in value.items()}
    if isinstance(value, list):
        return [masked_paths(item) for item in value]
    return value
