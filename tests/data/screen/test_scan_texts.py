"""scan.scan_texts: the compiled pass normalising text as read (a table of each code point's folds under NFKC)
against its definition, `prepare` then `scan`, with the marks of the text as given (what the masker reads): the
same hashes, owners and order, bit for bit, on every code point in the contexts where NFKC could see it, on random
texts over a dozen classes, on real Korean, and on the numpy path a process without a C compiler takes."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from helpers import needs_extension
from rankzero.data.native.hashing import EXPANDED, SLOW
from rankzero.data.screen import scan as screen_scan
from rankzero.data.screen.scan import Bitmap, code_points, marks_of, prepare, scan, scan_texts
from test_dedup_kernel import random_texts

REAL = Path("/work/shared/corpora/ko_real_dev")
SHAPES = ((8, 8, 4), (2, 3, 1), (1, 1, 1))

pytestmark = needs_extension


def definition(texts: list[str], n: int, window: int, step: int, bitmap: Bitmap) -> tuple:
    grams, windows, _, _ = scan(*code_points([prepare(text) for text in texts]), n, window, step, bitmap)
    return grams, windows, *marks_of(texts)


def assert_same(texts: list[str], bitmap: Bitmap = Bitmap.everything()):
    for n, window, step in SHAPES:
        ours, expected = scan_texts.compiled(texts, n, window, step, bitmap), definition(texts, n, window, step, bitmap)
        for name, (got, want) in {"grams": (ours[0], expected[0]), "windows": (ours[1], expected[1])}.items():
            if not (np.array_equal(got.values, want.values) and np.array_equal(got.owners, want.owners)):
                raise AssertionError(f"{name} {(n, window, step)}: differ in {_first_text(texts, got, want)!r}")
        for name, got, want in (("marks", ours[2], expected[2]), ("runs", ours[3], expected[3])):
            if not np.array_equal(got, want):
                raise AssertionError(f"{name}: differ in {texts[int(np.flatnonzero(got != want)[0] // got[0].size)]!r}")


def _first_text(texts: list[str], got, want) -> str:
    """The first text whose hashes differ: by their count per text, else by the first value that differs."""
    counts = np.bincount(got.owners, minlength=len(texts)), np.bincount(want.owners, minlength=len(texts))
    if not np.array_equal(*counts):
        return texts[int(np.flatnonzero(counts[0] != counts[1])[0])]
    return texts[int(got.owners[np.flatnonzero(got.values != want.values)[0]])]


def contexts(code: int) -> list[str]:
    """`code` after and before a Latin letter, a syllable, conjoining and compatibility jamo, a space, a format
    character, a digit run and the masker's marks; then next to a combining mark and capital sigma."""
    char = chr(code)
    return [f"a{char}b 가{char}ᅡ {char}ㅏ ᄀ{char} 각{char}ᆨ e{char} {char}ᄀ ㄱ{char}ㅏ 가\u200b{char} {char}",
            f"여{char}권 010{char}1234567 x{char}@y :{char}:", f"{char}\u0301 e{char}", f"Σ{char} {char}Σ"]


def test_the_table_is_the_normalised_folds_of_every_basic_plane_code_point():
    table, expansions = screen_scan._normalising_table()
    for code in range(0x10000):
        expected, value = screen_scan.normalised_folds(code), int(table[code])
        if expected is None or (len(expected) == 1 and not screen_scan._composing(expected[0])):
            assert value == (SLOW if expected is None else expected[0]), hex(code)
        else:  # several folds, or one that Hangul composes with the fold before it
            at = value - int(EXPANDED)
            assert expansions[at + 1:at + 1 + expansions[at]].tolist() == expected, hex(code)


def test_every_basic_plane_code_point_in_context():
    texts = [text for code in range(0x10000) for text in contexts(code)]
    assert_same(texts, Bitmap.everything())


def test_every_supplementary_plane_code_point_and_the_tags_in_context():
    codes = [*range(0x10000, 0x20000), *range(0xE0000, 0xE0200)]
    assert_same([text for code in codes for text in contexts(code)])


def test_hangul_that_composes_goes_to_prepare():
    texts = ["ㅎㅏ", "하ㄳ", "ᄒ ᅡ", "ㅋㅋㅋ ㅠㅠ", "각", "각", "ㄱ ㅏ", "각ㄱ"]
    assert_same(texts)
    codes, offsets = code_points(texts)
    table, expansions = screen_scan._normalising_table()
    slow = screen_scan._compiled_scan(codes, offsets, 2, 3, 1, Bitmap.everything(), 2, table,
                                      expansions, *screen_scan._astral_normalised_folds(codes))[4]
    # NFKC composes the first, second, fifth and sixth; the others are their own folds, compatibility jamo apart.
    assert slow.tolist() == [1, 1, 0, 0, 1, 1, 0, 0]
    assert [unicodedata.normalize("NFKC", text) != text for text in texts] == [True, True, False, True, True, True,
                                                                                True, True]


@pytest.mark.parametrize("seed", [0, 1])
def test_random_texts_over_every_class(seed):
    texts = random_texts(3000, seed=seed) + ["", " ", "하나 둘 셋", "ＡＢＣ ｄｅｆ", "①②③ ㈜㈜"]
    assert_same(texts)
    keys = scan_texts(texts[:200], 8, 8, 4, Bitmap.everything())[0].values[::7]
    assert_same(texts, Bitmap.of(keys))  # a sparse bitmap: some pass, most do not


def test_expansions_past_the_first_room():
    """ﷺ is 18 folds: a batch of them writes more windows than code points, so the pass runs again with more."""
    texts = ["\ufdfa" * 50, "\ufdfa \ufdfa"]
    assert_same(texts)


@pytest.mark.skipif(not REAL.exists(), reason="the real corpus is not on this machine")
def test_real_korean():
    texts = [json.loads(line)["text"] for path in sorted(REAL.glob("*.jsonl"))
             for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert_same(texts)
    codes, offsets = code_points(texts)
    table, expansions = screen_scan._normalising_table()
    slow = screen_scan._compiled_scan(codes, offsets, 8, 8, 4, Bitmap.everything(), 2, table,
                                      expansions, *screen_scan._astral_normalised_folds(codes))[4]
    changed = sum(prepare(text) != text for text in texts)
    assert changed > 20 and slow.sum() < changed / 5  # most texts NFKC changes stay on the compiled path


def test_without_the_compiled_pass_the_same(monkeypatch):
    texts = random_texts(500, seed=3)
    compiled = scan_texts(texts, 8, 8, 4, Bitmap.everything())
    monkeypatch.setenv("RANKZERO_PASSES", "numpy")
    numpy = scan_texts(texts, 8, 8, 4, Bitmap.everything())
    for got, want in zip((*numpy[0], *numpy[1], *numpy[2:]), (*compiled[0], *compiled[1], *compiled[2:])):
        assert np.array_equal(got, want)
