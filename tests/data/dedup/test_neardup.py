"""Near-duplicate removal: the signatures (dedup/minhash.py) and the LSH decision (dedup/near.py), without a prepare.

The prepare-level tests (both engines, manifests, samples) are in test_prepare_dedup.py.
"""

from __future__ import annotations

import random
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

from rankzero.data.dedup import kernel, minhash
from rankzero.data.dedup.near import NearDuplicates, near_duplicate_indices, required_matches


def distinct_texts(count: int, words: int = 120, seed: int = 0) -> list[str]:
    """Texts of random words from a large vocabulary: any two share next to no 5-gram."""
    rng = random.Random(seed)
    syllables = "가나다라마바사아자차카타파하거너더러머버서어저처커터퍼허고노도로모보소오조초코토포호"
    vocabulary = ["".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(5000)]
    return [" ".join(rng.choice(vocabulary) for _ in range(words)) + "." for _ in range(count)]


def near_copy(text: str, changed: float, seed: int = 1, header: str = "[뉴스 제공] 무단 전재 금지") -> str:
    rng = random.Random(seed)
    words = text.split()
    for index in rng.sample(range(len(words)), int(changed * len(words))):
        words[index] = "바뀐말"
    return header + "\n" + " ".join(words)


def test_normalisation_folds_case_digits_punctuation_and_width():
    same = ["Hello, World 2024 한국어 문서 입니다", "hello world 1999 한국어 문서 입니다!!", "ＨＥＬＬＯ world 0000 한국어, 문서 입니다"]
    shingles, counts = minhash.shingle_hashes(same)
    assert counts.tolist() == [2, 2, 2]
    assert len(set(shingles.tolist())) == 2


def test_texts_shorter_than_a_shingle_have_no_signature():
    shingles, counts = minhash.shingle_hashes(["", "하나 둘 셋 넷", "   ", "하나 둘 셋 넷 다섯"])
    assert counts.tolist() == [0, 0, 0, 1]


def test_signatures_are_the_same_in_another_process():
    texts = distinct_texts(5)
    here = minhash.minhash_signatures(texts)[0]
    code = ("import sys, json; sys.path.insert(0, '.'); from rankzero.data.dedup import minhash; "
            "from tests.data.dedup.test_neardup import distinct_texts; "
            "print(json.dumps(minhash.minhash_signatures(distinct_texts(5))[0].tolist()))")
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": "123", "PATH": ""}, cwd=str(__import__("pathlib").Path(__file__).parents[3]))
    assert np.array_equal(here, np.array(__import__("json").loads(there.stdout), dtype=np.uint32))


def test_a_planted_near_copy_is_removed_and_distinct_texts_are_kept():
    texts = distinct_texts(200)
    # A header and 1% of the words changed: word 5-gram Jaccard ~0.85 for 120 words.
    planted = near_copy(texts[10], 0.01)
    removed = near_duplicate_indices(texts + [planted])
    assert removed == [200]


def test_the_first_copy_wins_whatever_the_order():
    texts = distinct_texts(50)
    copy = near_copy(texts[3], 0.01)
    assert near_duplicate_indices([copy] + texts) == [4]  # texts[3] is now the later one
    assert near_duplicate_indices(texts + [copy]) == [50]


def test_a_copy_far_below_the_threshold_is_kept():
    texts = distinct_texts(20)
    rewritten = near_copy(texts[0], 0.3)  # word 5-gram Jaccard ~0.1
    assert near_duplicate_indices(texts + [rewritten]) == []
    # At 3% changed (Jaccard ~0.77) the band test proposes the pair (p = 0.98); the signature test keeps it
    # at a threshold of 0.95 and removes it at 0.6.
    close = near_copy(texts[0], 0.03, header="")
    assert near_duplicate_indices(texts + [close], threshold=0.95) == []
    assert near_duplicate_indices(texts + [close], threshold=0.6) == [20]


def test_short_and_empty_texts_are_never_near_copies():
    texts = ["", "", "짧은 글", "짧은 글", "하나 둘 셋 넷", "하나 둘 셋 넷!", "   "]
    assert near_duplicate_indices(texts) == []


def test_the_spill_path_decides_the_same(tmp_path):
    texts = distinct_texts(300, words=60)
    texts += [near_copy(texts[i], 0.0, seed=i) for i in range(0, 300, 7)]
    random.Random(3).shuffle(texts)
    decisions = []
    for budget, batch in ((1 << 30, 1000), (20_000, 13), (2_000, 5)):
        near = NearDuplicates(0.8, tmp_path / f"budget-{budget}", budget)
        for start in range(0, len(texts), batch):
            near.add(*minhash.minhash_signatures(texts[start:start + batch]))
        decisions.append((near.decide(), near.spilled_runs))
    (memory, none), (small, some), (tiny, many) = decisions
    assert none == 0 and 1 < some < many
    assert memory.removed.sum() == 43
    for other in (small, tiny):
        assert np.array_equal(memory.removed, other.removed)
        assert memory.pairs == other.pairs
    assert len(memory.pairs) == 20 and all(i < j and memory.removed[j] for j, i in memory.pairs)


def test_the_threshold_counts_agreeing_values():
    assert required_matches(0.8) == 96
    assert required_matches(1.0) == minhash.PERMUTATIONS
    with pytest.raises(ValueError, match="--dedup_threshold"):
        NearDuplicates(1.5, "/tmp")


def test_band_shapes_follow_the_threshold():
    assert [minhash.lsh_shape(t) for t in (0.9, 0.8, 0.7, 0.5)] == [(12, 10), (20, 6), (30, 4), (40, 3)]
    for threshold in (0.95, 0.8, 0.6, 0.3):
        bands, rows = minhash.lsh_shape(threshold)
        assert bands * rows == minhash.PERMUTATIONS and 1 - (1 - threshold ** rows) ** bands >= 0.99


def test_a_header_and_five_percent_of_the_words_changed():
    """Word 5-gram Jaccard of such a copy is ~0.6 (each changed word touches 5 shingles): removed at the default
    0.55, where the bands are 40 x 3, kept at 0.8; the distinct texts stay either way."""
    texts = distinct_texts(100, words=400, seed=7)
    planted = near_copy(texts[7], 0.05, seed=2)
    assert near_duplicate_indices(texts + [planted], threshold=0.8) == []
    assert near_duplicate_indices(texts + [planted]) == [100]


def test_a_text_longer_than_a_piece_has_the_shingles_it_would_have_whole(monkeypatch):
    texts = distinct_texts(3, words=300)  # ~1,000 characters each, cut into pieces of 64 at spaces
    whole = minhash.shingle_hashes(texts)
    monkeypatch.setattr(kernel, "PIECE_CHARS", 64)
    pieces = minhash.shingle_hashes(texts)
    assert np.array_equal(whole[1], pieces[1]) and np.array_equal(whole[0], pieces[0])


def test_a_copy_is_found_behind_a_template_sibling(tmp_path):
    """Document 0 shares half the bands of 1 (a page of the same template: 60 of 120 values); 2 is a near-copy
    of 1 (110 of 120) whose shared bands are all held first by 0. The second holder is compared too."""
    rng = np.random.default_rng(0)
    page = rng.integers(0, 2 ** 32, size=minhash.PERMUTATIONS, dtype=np.uint32)
    sibling, copy = page.copy(), page.copy()
    sibling[60:] = rng.integers(0, 2 ** 32, size=60, dtype=np.uint32)
    copy[60 + 6 * np.arange(10)] += 1  # one value in each of the last 10 bands of 6
    near = NearDuplicates(0.8, tmp_path)
    near.add(np.stack([sibling, page, copy]), np.full(3, 100))
    decision = near.decide()
    assert decision.removed.tolist() == [False, False, True] and decision.pairs == [(2, 1)]


def test_the_decision_never_holds_the_band_keys_twice(tmp_path):
    """The keys are kept in the pieces they were added in: joining them when the decision starts held them twice,
    the prepare's peak at 200 MiB (bench/RESULTS.md, issue 30's memory line). numpy reports its buffers to
    tracemalloc, so the decision's own peak is measured here, not estimated."""
    rng = np.random.default_rng(0)
    near = NearDuplicates(0.55, tmp_path)
    for _ in range(40):  # 40 batches of 500 random signatures: no two documents alike
        near.add(rng.integers(0, 2 ** 32, (500, minhash.PERMUTATIONS), dtype=np.uint32), np.ones(500, np.int64))
    keys = sum(piece.nbytes for piece in near._keys)
    tracemalloc.start()
    try:
        decision = near.decide()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not decision.removed.any()
    assert keys == 20_000 * near.bands * 8
    assert peak < keys / 2, f"the decision peaked at {peak:,} bytes over {keys:,} bytes of keys"
