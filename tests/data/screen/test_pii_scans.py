"""The masker's fast paths against their definitions (rankzero/data/screen/pii.py, pii_checks.py): the number clusters' scan
against `\\d`, the IPv6 candidates against the IPv6 pattern, the few-digit clusters' two detectors against all, and
the marks of scan.py's pass against the masker's own search."""

import json
import random
from pathlib import Path

import pytest

from rankzero.data.screen.pii import PiiMasker

REAL = Path("/work/shared/corpora/ko_real_dev")
SHIPPED = Path(__file__).resolve().parents[3] / "data" / "quality_sample.jsonl"

MASKER = PiiMasker()


def test_the_quick_cluster_scan_finds_exactly_the_clusters_of_backslash_d():
    """pii_checks.number_clusters scans with `\\d` spelled out as the BMP's digits and the astral planes as one range, and goes
    back to the `\\d` pattern where a match holds an astral code point: the same clusters either way, for every
    decimal digit of the BMP and random texts of digits, separators, emoji and astral digits."""
    import re

    from rankzero.data.screen.pii_checks import cluster_pattern, number_clusters, quick_cluster

    _CLUSTER, _QUICK_CLUSTER = cluster_pattern(), quick_cluster()

    for code in range(0x10000):
        char = chr(code)
        assert (_QUICK_CLUSTER.fullmatch(char * 7) is not None) == char.isdecimal(), hex(code)
    alphabet = list("0123456789-.() +가 a") + ["０", "٣", "\U0001d7ce", "\U0001d7d9", "😀", "\U00020000", "（", "＋"]
    # Other dashes, spaces and invisible characters, astral ones too (a tag, a shorthand format control).
    alphabet += ["\u2013", "\u3161", "\u2212", "\u00a0", "\n", "\u200b", "\u00ad", "\U000e0020", "\U0001bca0", "\U00010ead"]
    rng = random.Random(11)
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))) for _ in range(20000)]
    quick = 0
    for text in texts:
        start, end = rng.randint(0, 5), rng.randint(len(text) - 5, len(text) + 1)
        expected = [match.span() for match in _CLUSTER.finditer(text, start, end)]
        assert [match.span() for match in number_clusters(text, start, end)] == expected, text
        quick += all(max(match.group()) <= "\uffff" for match in _QUICK_CLUSTER.finditer(text, start, end))
    assert quick > 5000  # most texts were answered by the quick pattern alone
    assert not re.search(r"\\d", _QUICK_CLUSTER.pattern)


def test_ipv6_candidates_are_the_matches_of_the_ipv6_pattern():
    """pii_checks.ipv6_candidates finds _IPV6's matches from colon pairs: the same spans as _IPV6.finditer on random
    texts of hex digits, colons and what ends a run, on the repo's sample documents and on real Korean ones where
    the shared corpus is on the machine."""
    from rankzero.data.screen.pii_checks import _IPV6, ipv6_candidates

    alphabet = list("0aF:::g. 가\n") + ["::", "fe80", "2001:db8"]
    rng = random.Random(5)
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(20000)]
    texts += [json.loads(line)["text"] for path in [*sorted(REAL.glob("*.jsonl")), SHIPPED]
              for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    found = 0
    for text in texts:
        expected = [match.span() for match in _IPV6.finditer(text)]
        assert [match.span() for match in ipv6_candidates(text)] == expected, text
        found += len(expected)
    assert found > 10000  # the random texts hold many runs, the real ones a few (times of day: "12:30:45")


def test_clusters_of_few_digits_skip_only_detectors_that_could_not_match(monkeypatch):
    """A cluster of at most pii._FEW_DIGITS digits runs two detectors, not all: on random clusters of 7-10 digits
    (the cluster separators, with and without each context word) and on short numbers each of the two finds or
    rejects, the spans and rejections equal those of all detectors."""
    from rankzero.data.screen import pii
    from rankzero.data.screen.pii_checks import number_clusters

    rng = random.Random(5)
    words = ["주민", "카드", "계좌", "여권", "운전면허", "사업자", "ver ", "고객센터 ", "", "", ""]
    separators = ["-", ".", " ", "", "－", ") ", "-", "(", "+", "．", "（", "＋", "\u3000"]
    texts = ["고객센터 1588-1234", "1800-1900 사이", "서버 8.8.8.80 접속", "ver 1.2.3.40", "1.2.3.4 항",
             "내부 10.0.0.12", "대표 1644 5678", "２０２.１６６.１.２０"]
    for _ in range(20000):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(7, 10)))
        cuts = sorted(rng.sample(range(1, len(digits)), rng.randint(0, 3)))
        pieces = [digits[a:b] for a, b in zip([0, *cuts], [*cuts, len(digits)])]
        number = "".join(piece + rng.choice(separators) for piece in pieces[:-1]) + pieces[-1]
        before, after = rng.choice(["", "(", "+", "+82 ", "0"]), rng.choice(["", "번", ".", " 끝"])
        texts.append(f"{rng.choice(words)}{before}{number}{after}")
    few, most = [MASKER.find(text) for text in texts], pii._FEW_DIGITS
    monkeypatch.setattr(pii, "_FEW_DIGITS", -1)  # every cluster runs every detector
    assert [MASKER.find(text) for text in texts] == few
    assert sum(1 for spans, rejected in few if spans or rejected) > 2000
    short = [found for text, found in zip(texts, few)
             if all(sum(map(str.isdecimal, cluster.group())) <= most for cluster in number_clusters(text))]
    # Each kind the short path can answer comes up: a 15xx line, a public IPv4 address, and the rejections.
    seen = ({span[2] for spans, _ in short for span in spans}
            | {f"{name}:{reason}" for _, rejected in short for name, reason in rejected})
    assert {"business_phone", "ip_address", "ip_address:not_public", "ip_address:section_number",
            "ip_address:version", "business_phone:year_range"} <= seen, seen


def _index_marks(texts):
    from rankzero.data.screen.decontaminate import ContaminationIndex, Item

    index = ContaminationIndex([Item("bench", "1", ("하나 둘 셋 넷 다섯 여섯 일곱 여덟 아홉",), ())])
    return index.find_with_marks(texts)[1:]


def _marks_alone(texts):
    from rankzero.data.screen.scan import marks_of

    return marks_of(texts)


def _marks_in_numpy(texts):
    from rankzero.data.screen.scan import code_points
    from rankzero.data.screen.reference import marks_reference

    return marks_reference(*code_points(texts))


@pytest.mark.parametrize("marks_and_runs", [_index_marks, _marks_alone, _marks_in_numpy],
                         ids=["decontaminate", "pii_alone", "numpy"])
def test_the_marking_pass_never_hides_a_candidate_and_masking_is_unchanged(marks_and_runs):
    """The marks of the text as read from decontamination's pass, from the same pass alone (what the screen uses
    with --pii mask and no --decontaminate), or from its numpy definition (a process without a C compiler). Random
    texts dense in digits, separators, '@', colons, passport words and look-alikes (full-width digits,
    no-break spaces, ①, Arabic digits, astral digits, a combining mark): where the pass says 'no number cluster',
    the masker's own scan finds none, and where it says there are some, every one lies in the span it gives;
    where it marks nothing at all, masking finds, rejects and changes nothing; masking each text with the pass's
    answer gives exactly what masking it alone gives."""
    import random

    from rankzero.data.native.constants import COLONS, NUMBERS
    from rankzero.data.screen.pii_checks import cluster_pattern

    _CLUSTER = cluster_pattern()
    alphabet = (list("0123456789-.() +가나다 abc@:\n") + ["０", "１", "９", "\u00a0", "①", "٣", "\U0001d7ce", "－", "．"]
                + ["\u2013", "\u3161", "\u2212", "\u200b", "\u2028", "\t", "\r", "\U000e0020", "﹫", "kim＠naver．com"]
                + ["::", "여권", "여", "권", "assport", "Passport", "ass", "port", "kim@naver.com", "＠", "：", "\u0307",
                   "\u11ab", "ΣΑ", "2001:db8::1", "１２:３４"])
    rng = random.Random(7)
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(6000)]
    texts += ["주민번호 900101-1234567 입니다", "전화 010 1234 5678", "전화 010\u00a01234\u00a05678", "010–1234–5678",
              "전화 010-12\u200b34-5678", "kim＠naver．com", "kim﹫naver.com", "１２３４５６７", "٣٣٣٣٣٣٣", "1 2 3 4", "a:b:c:d:e:f:g:h",
              # NFKC composes the jamo and the dot with the letter before them; the marks are of the text as read.
              "여권\u11ab M123A4567", "Passport\u0307 no. M123A4567",
              # IPv6: seven colons and no "::", public and private; a dialogue's colons, none of them a candidate.
              "서버 2001:4860:4860:0:0:0:0:8888 접속", "fd00:1:2:3:4:5:6:7 내부", "A: 1:2 B: 3:4 5:6 7:8 9:0"]
    # Numbers inside longer text, far apart: the span starts after the text does and ends before it.
    texts += [f"{rng.choice(alphabet) * 30} 오늘 {rng.choice(alphabet) * 9} 그리고 {'가' * 50} 010-1234-5678 끝" for _ in range(300)]
    marks, runs = marks_and_runs(texts)
    masker = PiiMasker()
    said_none = said_nothing = narrowed = 0
    for text, mark, (start, end) in zip(texts, marks.tolist(), runs.tolist()):
        alone = masker.mask(text)
        if not mark & NUMBERS:
            said_none += 1
            assert _CLUSTER.search(text) is None, text
        else:
            assert all(start <= cluster.start() and cluster.end() <= end for cluster in _CLUSTER.finditer(text)), text
            narrowed += 0 < start and end < len(text)
        if not mark:
            said_nothing += 1
            assert alone.text == text and not (alone.masked or alone.public or alone.rejected), text
        told = masker.apply(text, *masker.find(text, (start, end) if mark & NUMBERS else False, mark))
        assert (told.text, told.masked, told.public, told.rejected) == (alone.text, alone.masked, alone.public,
                                                                      alone.rejected), text
    assert 0 < said_nothing < said_none < len(texts) and narrowed > 100
    public, private, dialogue = "서버 2001:4860:4860:0:0:0:0:8888 접속", "fd00:1:2:3:4:5:6:7 내부", "A: 1:2 B: 3:4 5:6 7:8 9:0"
    mark_of = dict(zip(texts, marks.tolist()))
    assert mark_of[public] & COLONS and mark_of[private] & COLONS and not mark_of[dialogue] & COLONS
    assert masker.mask(public).masked == {"ip_address": 1}
    assert masker.mask(private).rejected == {("ip_address", "not_public"): 1}
