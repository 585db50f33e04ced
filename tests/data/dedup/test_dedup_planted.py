"""The planted near-copies corpus of bench/dedup_bench.py: deterministic, each copy after its original and
changed exactly as its kind says; the reference shingles and the earlier-match search it is scored with."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"
sys.path.insert(0, str(BENCH))

import dedup_planted  # noqa: E402
from dedup_planted import (KINDS, best_earlier_match, jaccard, load_originals, plant, reference_shingles,  # noqa: E402
                           write_planted)

SENTENCES = ["서울시는 오늘 새로운 교통 정책을 발표했다.", "시민들은 대체로 환영하는 분위기다.",
             "전문가들은 효과를 지켜봐야 한다고 말했다.", "이번 정책은 내년 3월부터 시행된다.",
             "버스 노선도 일부 조정될 예정이다.", "자세한 내용은 시청 누리집에서 볼 수 있다."]


@pytest.fixture
def real_dir(tmp_path):
    """A stand-in for ko_real_dev: 40 multi-line Korean documents, each its own shuffle of the sentences."""
    directory = tmp_path / "real"
    directory.mkdir()
    rng = random.Random(7)
    with open(directory / "news.jsonl", "w", encoding="utf-8") as handle:
        for number in range(40):
            lines = [" ".join(rng.sample(SENTENCES, 4)) + f" 기사 번호 {number}호." for _ in range(rng.randint(3, 8))]
            handle.write(json.dumps({"text": "\n".join(lines)}, ensure_ascii=False) + "\n")
    return directory


def test_planted_corpus_is_deterministic(tmp_path, real_dir):
    first = write_planted(tmp_path / "a", real_dir, 0.1, 10, seed=0)[0].read_bytes()
    second = write_planted(tmp_path / "b", real_dir, 0.1, 10, seed=0)[0].read_bytes()
    other = write_planted(tmp_path / "c", real_dir, 0.1, 10, seed=1)[0].read_bytes()
    assert first == second
    assert first != other


def test_every_copy_follows_its_original_and_changes_as_its_kind_says(real_dir):
    originals = load_originals(real_dir, 0.1, seed=0)
    texts, labels = plant(originals, per_kind=8, seed=0)
    assert [label["kind"] for label in labels].count("original") == len(originals)
    assert [text for text, label in zip(texts, labels) if label["kind"] == "original"] == [t for t, _ in originals]
    for kind in KINDS:
        assert sum(1 for label in labels if label["kind"] == kind) == 8, kind
    for index, label in enumerate(labels):
        if label["kind"] == "original":
            continue
        original, copy = texts[label["of"]], texts[index]
        assert label["of"] < index and labels[label["of"]]["kind"] == "original"
        assert copy != original
        if label["kind"] == "header_footer":
            assert original in copy and copy.index(original) > 0 and not copy.endswith(original)
        elif label["kind"] == "rewrapped":
            assert copy.split() == original.split()
        elif label["kind"] == "paragraph_dropped":
            assert copy.count("\n") == original.count("\n") - 1
            dropped = len(original.split()) - len(copy.split())
            assert 0 < dropped <= 0.10 * len(original.split())
        else:  # words replaced in place: the same number of words, 5% of them different (at least one)
            before, after = original.split(), copy.split()
            assert len(before) == len(after)
            changed = [position for position, (a, b) in enumerate(zip(before, after)) if a != b]
            assert len(changed) == max(1, round(0.05 * len(before)))
            if label["kind"] == "words_5pct_runs" and len(changed) >= 5:
                assert any(changed[i + 4] - changed[i] == 4 for i in range(len(changed) - 4))


def test_copies_are_placed_after_later_originals_too(real_dir):
    texts, labels = plant(load_originals(real_dir, 0.1, seed=0), per_kind=8, seed=0)
    # Not all copies sit right behind their original: first-wins is tested across a distance.
    assert any(labels[index - 1]["kind"] == "original" and index - 1 != label["of"]
               for index, label in enumerate(labels) if label["kind"] != "original")


def test_reference_shingles_fold_case_punctuation_digits_and_short_texts():
    assert reference_shingles("하나 둘 셋 넷") == frozenset()  # fewer than 5 words: no shingle
    assert len(reference_shingles("하나 둘 셋 넷 다섯")) == 1
    assert reference_shingles("ＡＢＣ, 2024년 3월 5일 오전!") == reference_shingles("abc 1999년 1월 1일 오전")
    assert jaccard(reference_shingles("가 나 다 라 마 바"), reference_shingles("가 나 다 라 마 사")) == pytest.approx(1 / 3)
    assert jaccard(frozenset(), frozenset()) == 0.0


def test_best_earlier_match_finds_the_closest_earlier_document_only():
    base = " ".join(chr(0xAC00 + 7 * n) * 2 for n in range(40))  # 40 distinct words (digits would fold)
    texts = ["완전히 다른 문서 하나 입니다 정말로 그렇습니다", base, base + " 끝에 붙은 말 조금", "또 다른 문서 전혀 겹치지 않는 내용 입니다"]
    best = best_earlier_match([reference_shingles(text) for text in texts])
    assert best[0] == (0.0, -1) and best[1] == (0.0, -1)
    assert best[2][1] == 1 and best[2][0] == pytest.approx(36 / 40)
    assert best[3] == (0.0, -1)


def test_missing_real_dir_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="--real_dir"):
        load_originals(tmp_path / "nowhere", 0.0, seed=0)
    assert dedup_planted.REAL_DIR.name == "ko_real_dev"
