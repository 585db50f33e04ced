"""The compiled pass (dedup/kernel.py) against its definition (dedup/shingles.py, numpy + unicodedata): the same
word and shingle hashes, bit for bit, on every code point in the contexts where NFKC or lower() could see it."""

from __future__ import annotations

import random
import unicodedata

import numpy as np
import pytest

from helpers import needs_extension
from rankzero.data.dedup import kernel, minhash, shingles
from rankzero.data.native import hashing

pytestmark = needs_extension


def reference_words(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Word hashes by shingles.py's numpy path (what its 5-grams are made of), flat, and each text's count."""
    words, per_text = [], np.zeros(len(texts), np.int64)
    start = 0
    while start < len(texts):  # pieces of at most PIECE_CHARS characters, as numpy_shingle_hashes makes them
        stop, size = start, 0
        while stop < len(texts) and (stop == start or size + len(texts[stop]) < shingles.PIECE_CHARS // 2):
            size += len(texts[stop]) + 1
            stop += 1
        normalised = [unicodedata.normalize("NFKC", text).lower() for text in texts[start:stop]]
        hashes, owners = shingles._piece_words(normalised, list(range(start, stop)))
        words.append(hashes)
        per_text += np.bincount(owners, minlength=len(texts))
        start = stop
    return np.concatenate(words), per_text


def assert_same_words(texts: list[str]):
    words, per_text = kernel.word_hashes(texts)
    expected, expected_per_text = reference_words(texts)
    assert per_text.tolist() == expected_per_text.tolist()
    if not np.array_equal(words, expected):  # name the first text that differs
        ends = np.cumsum(per_text)
        first = int(np.flatnonzero(words != expected)[0])
        text = texts[int(np.searchsorted(ends, first, side="right"))]
        raise AssertionError(f"word hashes differ in {text!r} ({[hex(ord(char)) for char in text]})")


def contexts(code: int) -> list[str]:
    """`code` after and before a Latin letter, a syllable, conjoining and compatibility jamo, a space, a deleted
    format character; then next to a combining mark and capital sigma (texts the table leaves to unicodedata)."""
    char = chr(code)
    return [f"a{char}b 가{char}ᅡ {char}ㅏ ᄀ{char} 각{char}ᆨ e{char} {char}ᄀ ㄱ{char}ㅏ 가\u200b{char} {char}",
            f"{char}\u0301 e{char}", f"Σ{char} {char}Σ"]


def test_every_basic_plane_code_point_in_context():
    assert_same_words([text for code in range(0x10000) for text in contexts(code)])


def test_every_supplementary_plane_code_point_and_the_tags_in_context():
    codes = [*range(0x10000, 0x20000), *range(0xE0000, 0xE0200)]
    assert_same_words([text for code in codes for text in contexts(code)])


def test_the_table_is_normalised_folds_of_every_basic_plane_code_point():
    """normalising_table builds the plane at once; normalised_folds is its definition, one code point at a time."""
    table, expansions, most_words = kernel.normalising_table()
    for code in range(0x10000):
        expected, value = kernel.normalised_folds(code), int(table[code])
        if expected is None or len(expected) == 1:
            assert value == (hashing.SLOW if expected is None else expected[0]), hex(code)
        else:
            at = value - int(hashing.EXPANDED)
            assert expansions[at + 1:at + 1 + expansions[at]].tolist() == expected, hex(code)
            assert len(expected) <= most_words


def hangul_ends() -> tuple[list[int], list[int]]:
    """The code points whose folds end in an initial consonant or a syllable without a final (what a vowel or a
    final composes with), and those whose folds start with a vowel or a final."""
    table, expansions, _ = kernel.normalising_table()

    def folds(code: int) -> list[int]:
        value = int(table[code])
        if value == hashing.SLOW:
            return []
        if value >= hashing.EXPANDED and value != shingles.DELETE:
            at = value - int(hashing.EXPANDED)
            return expansions[at + 1:at + 1 + expansions[at]].tolist()
        return [value]

    def leads(value: int) -> bool:
        return 0x1100 <= value <= 0x1112 or (0xAC00 <= value <= 0xD7A3 and (value - 0xAC00) % 28 == 0)

    every = {code: folds(code) for code in range(0x10000)}
    firsts = [code for code, values in every.items() if values and leads(values[-1])]
    seconds = [code for code, values in every.items() if values and (0x1161 <= values[0] <= 0x1175 or
                                                                      0x11A8 <= values[0] <= 0x11C2)]
    return firsts, seconds


def test_every_hangul_pair_that_composes():
    firsts, seconds = hangul_ends()
    assert len(firsts) > 399 and len(seconds) > 2 * 48  # the syllables without a final; jamo, compatibility, half-width
    pairs = [chr(first) + chr(second) for first in firsts for second in seconds]
    for start in range(0, len(pairs), 20000):
        assert_same_words([" ".join(pairs[start:start + 20000])])


def test_every_canonical_pair_composed_and_decomposed():
    """Each pair that canonical composition merges (a letter and a mark, and the vowel signs of Indic scripts that
    are no marks: U+0B47 U+0B3E), apart and as its composite, after a letter and before one."""
    pairs = [(code, unicodedata.decomposition(chr(code)).split()) for code in range(0x30000)]
    texts = [f"a{chr(int(parts[0], 16))}{chr(int(parts[1], 16))}b {chr(code)}ᅡ"
             for code, parts in pairs if len(parts) == 2 and not parts[0].startswith("<")]
    assert len(texts) > 900
    assert_same_words(texts)


def test_canonical_pairs_end_below_the_third_plane():
    """unicode_context.composing_seconds scans the pair decompositions below U+30000 only."""
    assert not [code for code in range(0x30000, 0x110000)
                if len(unicodedata.decomposition(chr(code)).split()) == 2
                and not unicodedata.decomposition(chr(code)).startswith("<")]


CLASSES = {
    "hangul": [chr(code) for code in range(0xAC00, 0xD7A4, 97)],
    "compatibility jamo": [chr(code) for code in range(0x3131, 0x318F)],
    "conjoining jamo": [chr(code) for code in (*range(0x1100, 0x1113), *range(0x1161, 0x1176), *range(0x11A8, 0x11C3))],
    "latin": list("abcXYZÀéÉßİıΣσςΑΩ"),
    "digits": list("0123456789٣۴७৮๙０９"),
    "punctuation and symbols": list(".,!?;:()[]{}\"'-_…·※→★♥€$％＃"),
    "format and control": list("\u200b\u200c\u200d\u00ad\ufeff\u2060\x00\x07\x1b"),
    "space": list("  \t\n\u3000\u00a0"),
    "astral": list("😀👍🏻🇰🇷𝐀𝟏𠀀🄐"),
    "expanding": list("㈜㎡℃ﬁ①⑴㉠㉮ﷺ…‥"),
    "combining": list("\u0301\u0308\u0327\u302e\u3099"),
}


def random_texts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    pool = [char for chars in CLASSES.values() for char in chars]
    texts = []
    for _ in range(count):
        length = rng.choice([0, 1, 3, 8, 20, 60, 300])
        texts.append("".join(rng.choice(pool) if rng.random() < 0.8 else " " for _ in range(length)))
    return texts


def test_random_texts_over_every_class_make_the_same_shingles():
    texts = random_texts(3000, seed=0) + ["", " ", "하나", "하나 둘", "하나 둘 셋", "하나 둘 셋 넷", "하나 둘 셋 넷 다섯"]
    assert_same_words(texts)
    ours, expected = kernel.shingle_hashes.compiled(texts), shingles.numpy_shingle_hashes(texts)
    assert np.array_equal(ours[0], expected[0]) and ours[1].tolist() == expected[1].tolist()
    assert ours[1][-5:].tolist() == [0, 0, 0, 0, 1]


def test_texts_longer_than_a_piece_cut_as_the_reference_cuts_them(monkeypatch):
    monkeypatch.setattr(shingles, "PIECE_CHARS", 64)
    monkeypatch.setattr(kernel, "PIECE_CHARS", 64)
    shingles._powers.cache_clear()
    try:
        # Long runs without a space are cut inside a word, as the reference cuts them.
        texts = random_texts(300, seed=1) + ["가나다라" * 40, "ㅋ" * 100 + " 하하 " * 30, "…" * 70]
        ours, expected = kernel.shingle_hashes.compiled(texts), shingles.numpy_shingle_hashes(texts)
    finally:
        shingles._powers.cache_clear()
    assert np.array_equal(ours[0], expected[0]) and ours[1].tolist() == expected[1].tolist()


def test_a_text_longer_than_a_full_piece():
    words = ["가나", "다라마", "바사", "ㅋㅋ", "…", "Ａ１", "😀", "㈜삼성"]
    rng = random.Random(2)
    text = " ".join(rng.choice(words) for _ in range(shingles.PIECE_CHARS // 2))
    texts = [text, text.replace("바사", "ΑΣ", 1), "하나 둘 셋 넷 다섯"]  # the second: one segment unicodedata's
    assert len(text) > shingles.PIECE_CHARS
    ours, expected = kernel.shingle_hashes.compiled(texts), shingles.numpy_shingle_hashes(texts)
    assert np.array_equal(ours[0], expected[0]) and ours[1].tolist() == expected[1].tolist()


def test_signatures_are_those_of_the_reference():
    texts = random_texts(500, seed=3)
    expected = minhash.signatures_from_shingles(*shingles.numpy_shingle_hashes(texts))
    assert np.array_equal(minhash.minhash_signatures(texts)[0], expected)


def test_without_the_compiled_pass_the_signatures_are_the_same(monkeypatch):
    """A process without the extension (no C compiler at install) signs on numpy, to the same numbers."""
    texts = random_texts(400, seed=4)
    compiled = minhash.minhash_signatures(texts)[0]
    calls = []
    monkeypatch.setenv("RANKZERO_PASSES", "numpy")
    monkeypatch.setattr(kernel.shingle_hashes, "reference", lambda batch: calls.append(len(batch)) or
                        shingles.numpy_shingle_hashes(batch))
    assert np.array_equal(minhash.minhash_signatures(texts)[0], compiled)
    assert calls == [400]


@pytest.mark.parametrize("texts", [[], [""], ["  ", "\u200b"]])
def test_nothing_to_hash(texts):
    words, per_text = kernel.word_hashes(texts)
    assert len(words) == 0 and per_text.tolist() == [0] * len(texts)
    shingled, per_text = kernel.shingle_hashes(texts)
    assert len(shingled) == 0 and per_text.tolist() == [0] * len(texts)
