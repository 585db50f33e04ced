"""Decontamination's pass defined in numpy (rankzero/data/screen/reference.py) against the compiled kernel
(scan.scan): the same n-gram and window hashes with their owners, in the same order, the same marks and
number runs, bit for bit, on every code point of the Basic Multilingual Plane in the contexts that set marks, on
thousands of random texts over the classes the pass tells apart, and on real Korean."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers import HAS_COMPILER, NO_EXTENSION, REPO
from rankzero.data import native
from rankzero.data.native.constants import AT_SIGN, COLONS, NUMBERS, PASSPORT
from rankzero.data.native.hashing import GRAM_BASE, WINDOW_BASE, WORD_BASE, fmix64
from rankzero.data.screen.scan import Bitmap, code_points, marks_of, prepare, scan
from rankzero.data.screen.reference import marks_reference, scan_reference

REAL = Path("/work/shared/corpora/ko_real_dev")
MASK = (1 << 64) - 1


def assert_same(codes: np.ndarray, offsets: np.ndarray, n: int, window: int, step: int, bitmap: Bitmap) -> tuple:
    """Both paths on one batch: every output equal, values, dtypes and shapes. Returns the kernel's."""
    if not HAS_COMPILER and native.missing() is not None:
        pytest.skip(NO_EXTENSION)
    expected = scan.compiled(codes, offsets, n, window, step, bitmap)
    got = scan_reference(codes, offsets, n, window, step, bitmap)
    for name, want, have in (("grams", expected[0], got[0]), ("windows", expected[1], got[1])):
        for field in ("values", "owners"):
            want_array, have_array = getattr(want, field), getattr(have, field)
            assert have_array.dtype == want_array.dtype, (name, field)
            np.testing.assert_array_equal(have_array, want_array, err_msg=f"{name}.{field} n={n} {window}/{step}")
    for name, want, have in (("marks", expected[2], got[2]), ("runs", expected[3], got[3])):
        assert have.dtype == want.dtype and have.shape == want.shape, name
        np.testing.assert_array_equal(have, want, err_msg=name)
    return expected


def sparse_bitmap(*batches: tuple[np.ndarray, np.ndarray]) -> Bitmap:
    """A bitmap of every third hash the kernel gives these batches (with everything) plus random keys: some
    hashes pass, most do not."""
    keys = [np.random.default_rng(1).integers(0, 2**63, 1000, dtype=np.uint64)]
    for codes, offsets in batches:
        grams, windows, _, _ = scan(codes, offsets, 3, 5, 2, Bitmap.everything())
        keys += [grams.values[::3], windows.values[::3]]
    return Bitmap.of(*keys)


def test_the_definition_by_hand():
    """One text worked out with Python integers from the module's docstring: what both paths must give."""
    text = "Ab cd, 여권 e 010-1234-5678 x@y a::b"
    codes, offsets = code_points([text])

    def polynomial(values, base):
        total = 0
        for value in values:
            total = (total * int(base) + value) & MASK
        return total

    def mix(value):
        return int(fmix64(np.array([value], dtype=np.uint64))[0])

    words = ["ab", "cd", "여권", "e", "010", "1234", "5678", "x", "y", "a", "b"]
    word_hashes = [mix(polynomial(map(ord, word), WORD_BASE) ^ len(word)) for word in words]
    letters = [ord(char) for char in "".join(words)]
    grams, windows, marks, runs = scan_reference(codes, offsets, 3, 5, 2, Bitmap.everything())
    assert grams.values.tolist() == [mix(polynomial(word_hashes[end - 3:end], GRAM_BASE)) for end in range(3, 12)]
    assert windows.values.tolist() == [mix(polynomial(letters[end - 5:end], WINDOW_BASE))
                                       for end in range(5, len(letters) + 1, 2)]
    assert grams.owners.tolist() == [0] * 9 and windows.owners.tolist() == [0] * len(windows.values)
    assert marks.tolist() == [NUMBERS | AT_SIGN | COLONS | PASSPORT]
    assert runs.tolist() == [[text.index("010") - 1, text.index("5678") + 5]]  # " 010-1234-5678 ", spaces included
    assert_same(codes, offsets, 3, 5, 2, Bitmap.everything())


# Contexts around each code point c: inside a word and a number, at a text's start and end, and beside what sets
# each mark, one mark to a text (a text that always holds "::" would hide what ":{c}:" does).
CONTEXTS = ["{c}", "ab{c}cd e{c}", "12-3{c}4567 8{c}9", "여{c}권 {c}권", "assp{c}rt {c}ssport", ":{c}: a:b:c:d:e:f{c}g",
            "x{c}@ {c}assport 1234567{c}", "1:2:3:4:5:6{c}7:8"]


def test_numbers_behind_other_separators_and_full_width_at_signs_are_marked():
    """NUMBERS for a run of digits behind any dash, space or invisible character (pii_forms.py), AT_SIGN for '＠' and
    '﹫': what the masker reads, so the pass hides none of it from the masker, in C and in numpy alike."""
    texts = ["전화 010\u00a02345\u00a06789", "010\u20132345\u20136789", "010\u31612345\u31616789", "010\u22122345",
             "900101\u200b1\u200b2\u200b3", "0\u200b1\u200b0\u200b2\u200b3\u200b4\u200b5", "010\n2345\n6789",
             "kim＠naver．com", "kim﹫naver.com", "전화 010 가 2345", "2024년 3월"]
    expected = [NUMBERS] * 7 + [AT_SIGN, AT_SIGN, 0, 0]
    codes, offsets = code_points(texts)
    assert marks_reference(codes, offsets)[0].tolist() == expected
    _, _, marks, runs = assert_same(codes, offsets, 1, 1, 1, Bitmap.everything())
    assert marks.tolist() == expected and runs[0].tolist() == [2, 16]  # the space before 010 is a separator too
    for got, want in zip(marks_of(texts), marks_reference(codes, offsets)):
        np.testing.assert_array_equal(got, want)


def test_colons_mark_an_ipv6_candidate_alone():
    """COLONS: a run of ASCII hex digits and colons holding "::" or 7 colons (what pii.py's IPv6 check needs), not
    the colons of a dialogue or of the time of day, however many."""
    texts = ["2001:db8:85a3:0:0:8a2e:370:7334", "fe80::1", "A: 네 B: 1:2 3:4 5:6 7:8 9:0", "12:30:45 ~ 13:00:00",
             "a:b:c:d:e:f:g:h", "주소 2001:db8:85a3:0:0:8a2e:370:7334 입니다", "1:2:3:4:", "5:6:7:8", ":", ":1"]
    expected = [COLONS, COLONS, 0, 0, 0, COLONS, 0, 0, 0, 0]  # seven colons, or "::", across a boundary: none
    codes, offsets = code_points(texts)
    assert [mark & COLONS for mark in marks_reference(codes, offsets)[0].tolist()] == expected
    _, _, marks, _ = assert_same(codes, offsets, 1, 1, 1, Bitmap.everything())
    assert [mark & COLONS for mark in marks.tolist()] == expected


@pytest.mark.parametrize("context", CONTEXTS)
def test_every_basic_plane_code_point_in_context(context):
    texts = [context.format(c=chr(code)) for code in range(0x10000)]
    codes, offsets = code_points(texts)
    for n, window, step in ((1, 1, 1), (2, 3, 2)):
        assert_same(codes, offsets, n, window, step, Bitmap.everything())
    assert_same(codes, offsets, 2, 3, 2, sparse_bitmap((codes, offsets)))
    # The marks alone (`--pii mask` without --decontaminate) are a loop of their own in the compiled pass.
    for got, want in zip(marks_of(texts), marks_reference(codes, offsets)):
        np.testing.assert_array_equal(got, want)


# The classes the pass tells apart: letters (ASCII, Hangul, Greek, accented, a capital the table lower-cases),
# digits (ASCII, Arabic-Indic, full-width), the number clusters' separators (other dashes, spaces and invisible
# characters among them), other breaks, the at signs, ':', the passport
# words' letters in both cases, astral letters, digits and an emoji (all of kind 2), and the dotted capital I,
# whose lower case is two code points (no word character by itself).
ALPHABET = (list("aBz가나여권ΣéK") + list("09٣５") + list("-.() +\uff0d\u3000\u2013\u3161\u2212\u00a0\u00ad") +
            list("\n,!_\u200b") + list("@:\uff20\ufe6b") + list("asportASPORT") +
            ["\U00010400", "\U0001d7ce", "\U0001f600", "\u0130", "\U000e0020"])


def random_batch(rng: np.random.Generator) -> list[str]:
    """0-30 texts of 0-60 code points, each drawn from a random handful of ALPHABET's classes."""
    texts = []
    for _ in range(rng.integers(0, 31)):
        palette = rng.choice(len(ALPHABET), size=rng.integers(1, 12), replace=False)
        texts.append("".join(ALPHABET[index] for index in rng.choice(palette, size=rng.integers(0, 61))))
    return texts


SHAPES = [(1, 1, 1), (1, 8, 4), (2, 1, 3), (3, 5, 2), (8, 8, 4), (13, 50, 7), (5, 64, 1), (4, 3, 9)]


@pytest.mark.parametrize("seed", range(4))
def test_random_texts(seed):
    rng = np.random.default_rng(seed)
    batches = [code_points(random_batch(rng)) for _ in range(150)]
    bitmap = sparse_bitmap(*batches)
    texts = 0
    for codes, offsets in batches:
        n, window, step = SHAPES[rng.integers(len(SHAPES))]
        assert_same(codes, offsets, n, window, step, Bitmap.everything())
        assert_same(codes, offsets, n, window, step, bitmap)
        texts += len(offsets) - 1
    assert texts > 1500


def test_empty_batches_and_texts():
    for texts in ([], [""], ["", "", ""], ["", "a b", ""], ["@"], [":", ":"]):
        codes, offsets = code_points(texts)
        for n, window, step in SHAPES:
            assert_same(codes, offsets, n, window, step, Bitmap.everything())


def test_texts_do_not_reach_into_each_other():
    """A word, a window, a number run, '::', '여권' and "assport" split by a text boundary are two texts' pieces."""
    texts = ["ab", "cd", "123", "4567", ":", ":", "여", "권", "ass", "port", "12345", "67 89", "", "1234567"]
    codes, offsets = code_points(texts)
    grams, windows, marks, runs = assert_same(codes, offsets, 1, 3, 1, Bitmap.everything())
    assert grams.owners.tolist() == [0, 1, 2, 3, 6, 7, 8, 9, 10, 11, 11, 13]
    assert marks.tolist() == [0] * 13 + [NUMBERS]
    assert runs[-1].tolist() == [0, 7] and not runs[:-1].any()
    assert windows.owners.tolist() == [2, 3, 3, 8, 9, 9, 10, 10, 10, 11, 11, 13, 13, 13, 13, 13]


@pytest.mark.skipif(not REAL.is_dir(), reason=f"{REAL} (real Korean) is not on this machine")
def test_real_korean():
    texts = [prepare(json.loads(line)["text"]) for path in sorted(REAL.glob("*.jsonl"))
             for line in path.open(encoding="utf-8") if line.strip()]
    codes, offsets = code_points(texts)
    bitmap = sparse_bitmap((codes, offsets))
    for n, window, step in ((8, 8, 4), (1, 1, 1), (13, 50, 7)):
        grams, windows, marks, runs = assert_same(codes, offsets, n, window, step, Bitmap.everything())
        sparse = assert_same(codes, offsets, n, window, step, bitmap)
        assert 0 < len(sparse[0].values) < len(grams.values) and 0 < len(sparse[1].values) < len(windows.values)
    assert {int(mark) for mark in marks} >= {0, NUMBERS}  # marks and runs are exercised, not all zero


def test_the_numpy_path_needs_no_compiled_pass():
    probe = ("import sys\nfrom rankzero.data.screen.reference import scan_reference\n"
             "from rankzero.data.screen.scan import Bitmap, code_points\n"
             "scan_reference(*code_points(['하나 둘 셋 010-1234-5678']), 2, 3, 1, Bitmap.everything())\n"
             "assert 'rankzero.data.native._passes' not in sys.modules, 'the compiled passes were loaded'\n")
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO),
                            "CC": "no-such-compiler"}, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
