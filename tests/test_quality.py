"""Korean quality filter: sample rates, one crafted input per check, config round trip, fork safety.

One Kiwi model is loaded for the whole module (~3-4 s); tests that need other thresholds borrow it
through `QualityFilter.with_config`.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
from pathlib import Path

import pytest

from rankzero.data.quality import REASONS, QualityConfig, QualityFilter

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "data" / "quality_sample.jsonl"
SHIPPED_CONFIG = ROOT / "configs" / "quality_ko.yaml"

PROSE = ("오늘은 오랜만에 가족과 함께 공원에 다녀왔다. 날씨가 맑아서 산책하기에 좋았고, 아이들은 잔디밭에서 "
         "공을 차며 한참을 뛰어놀았다. 저녁에는 집 근처 식당에서 된장찌개를 먹었다.")
ENGLISH = ("The library opened its new reading room on Monday after two years of renovation. Visitors can now "
           "borrow laptops at the front desk, and the children's section has moved to the ground floor.")
CODE = ("def load_config(path):\n    with open(path) as handle:\n        data = json.load(handle)\n"
        "    data.setdefault(\"batch_size\", 32)\n    return data\n\n\nif __name__ == \"__main__\":\n"
        "    print(load_config(\"config.json\"))\n")


@pytest.fixture(scope="module")
def quality():
    return QualityFilter()


def load_sample() -> list[dict]:
    with open(SAMPLE, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def test_sample_rates(quality):
    records = load_sample()
    clean = [record["text"] for record in records if record["label"] == "clean"]
    junk = [record["text"] for record in records if record["label"] == "junk"]
    assert len(clean) >= 150 and len(junk) >= 150
    clean_kept = sum(reason is None for reason in quality.judge_batch(clean)) / len(clean)
    junk_reasons = quality.judge_batch(junk)
    junk_dropped = sum(reason is not None for reason in junk_reasons) / len(junk)
    print(f"\nquality sample: clean kept {clean_kept:.1%} of {len(clean)}, "
          f"junk dropped {junk_dropped:.1%} of {len(junk)}")
    assert set(junk_reasons) - {None} <= set(REASONS)
    assert clean_kept >= 0.95
    assert junk_dropped >= 0.95


def test_sample_has_every_genre_and_junk_kind():
    kinds = {(record["label"], record["kind"]) for record in load_sample()}
    for genre in ("news", "encyclopedia", "daily", "recipe", "review", "opinion", "legal", "forum", "short",
                  "english", "code"):
        assert ("clean", genre) in kinds, genre
    for junk in ("menu", "keyword_stuffing", "gambling_spam", "adult_spam", "salad_uniform", "salad_common",
                 "symbol_lines", "boilerplate", "repeated_lines", "fragment", "number_table", "url_list",
                 "lorem_ipsum"):
        assert ("junk", junk) in kinds, junk


# One input per check; each passes every check that runs before the one it is meant to fail.
CRAFTED = {
    "too_short": "안녕하세요. 반갑습니다.",
    "high_symbol_ratio": "오늘의 특가 ★★★★★ ♥♥♥♥♥ ▶▶▶▶▶ 지금 확인하세요 ■■■■■ ◆◆◆◆◆",
    "high_punctuation_ratio": "Wait!!!!!!!! What????? ---- ==== #### //// ;;;; ::::: (((( )))) ok....",
    "high_digit_ratio": "가격표 2024 1200 3400 5600 7800 9100 1120 1340 1560 1780 1990 2110",
    "high_url_ratio": "자료 모음\nhttps://example.com/a/1\nhttps://example.com/b/2\nhttps://example.org/c/3\n"
                      "http://example.net/d",
    "placeholder_text": "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.",
    "boilerplate": "Copyright © 2024 Example Inc. All rights reserved.\n이용약관 | 개인정보처리방침 | 고객센터",
    "dup_lines": "The meeting starts at nine.\nPlease call us now for a free quote.\n"
                 "Please call us now for a free quote.\nPlease call us now for a free quote.",
    # Lines mostly unique (1 of 7 repeats), paragraphs not (1 of 3 repeats).
    "dup_paragraphs": "Please call us now for a free quote.\n\nPlease call us now for a free quote.\n\n"
                      "The meeting starts at nine.\nBring your laptop and the notes.\nLunch is at noon in room two.\n"
                      "We finish around four.\nParking is free after six.",
    "top_ngram_repetition": "buy cheap shoes online buy cheap shoes today buy cheap shoes now buy cheap shoes here",
    # 30 distinct words twice: no 2/3/4-gram dominates, but half the text is a repeated 5..10-gram.
    "dup_ngram_repetition": " ".join([f"word{index}x" for index in range(30)] * 2),
    "low_hangul_ratio": "정말?! 12시... 진짜?! 34번!! 대박!! 56층... 와~~ 78점;; 네, 90원. 끝!! 좋아요?! 11월... "
                        "그래요?? 22일!! 맞아요... 33초",
    "kiwi_few_stop_morphemes": "홈 회사소개 제품안내 고객센터 공지사항 이벤트 사이트맵 채용정보 매장안내 브랜드스토리",
    "kiwi_low_alphabetic_tokens": "제1조 ①, ②, ③ … 2. 3. 4. (가) (나) (다) “예” ‘아니오’ 규정은 다음과 같다. 끝이다.",
    "kiwi_no_final_endings": "서울의 봄 축제에서 즐길 거리와 일정, 행사장을 찾는 방법과 교통편 정보, 주차장 이용 방법 "
                             "및 요금 안내, 먹거리 장터 운영 시간과 참가 업체 목록",
    "kiwi_low_particle_ending_ratio": "강남 맛집 추천 강남역 파스타 맛집 홍대 카페 추천 신촌 고기집 합정 브런치 카페 "
                                      "정보 지금 예약하세요. 바로 확인하세요. 주차 가능 매장 있습니다.",
}


@pytest.mark.parametrize("reason", list(CRAFTED))
def test_each_check_fires_on_its_input(quality, reason):
    assert reason in REASONS
    assert quality.judge(CRAFTED[reason]) == reason


@pytest.mark.parametrize("reason, change", [
    ("too_long", {"max_chars": 100}),
    ("low_line_punctuation", {"min_line_punctuation_ratio": 0.9}),
    ("kiwi_mean_morpheme_length", {"max_mean_morpheme_chars": 1.2}),
    ("kiwi_few_stop_morphemes", {"min_stop_morphemes": 50}),
])
def test_thresholds_are_read_from_the_config(quality, reason, change):
    # Clean prose with one threshold moved past it fails exactly that check; a second line without a
    # final "." makes the line-punctuation share 0.5.
    text = PROSE + "\n내일은 비가 많이 온다고 하니 우산을 꼭 챙겨서 나가야겠다"
    assert quality.judge(text) is None
    strict = quality.with_config(dataclasses.replace(QualityConfig(), **change))
    assert strict.judge(text) == reason


def test_every_reason_is_reachable():
    reachable = set(CRAFTED) | {"too_long", "not_korean", "low_line_punctuation", "kiwi_mean_morpheme_length"}
    assert reachable == set(REASONS)


def test_english_and_code_are_kept_unless_drop_non_korean(quality):
    assert quality.judge_batch([ENGLISH, CODE, PROSE]) == [None, None, None]
    korean_only = quality.with_config(QualityConfig(drop_non_korean=True))
    assert korean_only.judge_batch([ENGLISH, CODE, PROSE]) == ["not_korean", "not_korean", None]


def test_sample_english_and_code_are_kept(quality):
    texts = [record["text"] for record in load_sample() if record["kind"].startswith(("english", "code"))]
    assert len(texts) >= 10
    assert quality.judge_batch(texts) == [None] * len(texts)


class CountingKiwi:
    """Stands in for Kiwi and records what it was asked to analyse."""

    def __init__(self, kiwi):
        self.kiwi, self.calls = kiwi, []

    def split_into_sents(self, text, **kwargs):
        self.calls.append(text)
        return self.kiwi.split_into_sents(text, **kwargs)


def test_kiwi_sees_only_korean_survivors_and_at_most_kiwi_max_chars(quality):
    counting = quality.with_config(QualityConfig(kiwi_max_chars=2000))
    counting._kiwi = CountingKiwi(quality._kiwi)
    paragraphs = [record["text"] for record in load_sample()
                  if record["label"] == "clean" and record["kind"] in ("news", "daily", "opinion", "review")]
    long_korean = "\n".join(paragraphs)  # distinct paragraphs: nothing repeats, so Kiwi is reached
    assert len(long_korean) > 2 * counting.config.kiwi_max_chars
    reasons = counting.judge_batch([ENGLISH, CODE, CRAFTED["high_symbol_ratio"], PROSE, long_korean])
    assert reasons == [None, None, "high_symbol_ratio", None, None]
    assert counting._kiwi.calls[0] == PROSE
    assert len(counting._kiwi.calls) == 2
    assert counting.config.kiwi_max_chars // 2 < len(counting._kiwi.calls[1]) <= counting.config.kiwi_max_chars


def test_shipped_yaml_equals_defaults():
    assert QualityConfig.from_yaml(SHIPPED_CONFIG) == QualityConfig()
    assert QualityConfig.from_yaml(SHIPPED_CONFIG).to_dict() == QualityConfig().to_dict()
    json.dumps(QualityConfig().to_dict())  # enters the fingerprint: must serialise


def test_yaml_unknown_key_names_key_file_and_valid_keys(tmp_path):
    path = tmp_path / "quality.yaml"
    path.write_text("min_chars: 10\nmin_hangul_ratoi: 0.5\n", encoding="utf-8")
    with pytest.raises(ValueError) as error:
        QualityConfig.from_yaml(path)
    message = str(error.value)
    assert "min_hangul_ratoi" in message and str(path) in message and "min_hangul_ratio" in message


@pytest.mark.parametrize("line", ["min_chars: ten", "min_chars: 1.5", "drop_non_korean: 1",
                                  "stop_morphemes: 다", "max_digit_ratio: 2.0"])
def test_yaml_wrong_type_or_range_raises(tmp_path, line):
    path = tmp_path / "quality.yaml"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=line.split(":")[0]):
        QualityConfig.from_yaml(path)


def test_yaml_overrides_and_coerces(tmp_path):
    path = tmp_path / "quality.yaml"
    path.write_text("max_digit_ratio: 1\ndrop_non_korean: true\n", encoding="utf-8")
    config = QualityConfig.from_yaml(path)
    assert config.max_digit_ratio == 1.0 and isinstance(config.max_digit_ratio, float)
    assert config.drop_non_korean is True
    assert config.min_chars == QualityConfig().min_chars


_FORKED_FILTER: QualityFilter | None = None


def _judge_in_child(texts):
    return _FORKED_FILTER.judge_batch(texts)


def test_filter_built_in_parent_works_in_forked_children(quality):
    global _FORKED_FILTER
    _FORKED_FILTER = quality
    texts = [record["text"] for record in load_sample()][::6]
    chunks = [texts[start:start + 10] for start in range(0, len(texts), 10)]
    expected = [quality.judge_batch(chunk) for chunk in chunks]
    pool = multiprocessing.get_context("fork").Pool(2)
    try:
        # A Kiwi with a thread pool deadlocks here; the timeout turns a hang into a failure.
        assert pool.map_async(_judge_in_child, chunks).get(timeout=60) == expected
    finally:
        pool.terminate()
        pool.join()
        _FORKED_FILTER = None


def test_kiwi_thread_pool_gives_the_same_verdicts():
    """judge_batch on Kiwi's own thread pool (the 2-core pipeline path) decides exactly as one at a time."""
    import json
    from pathlib import Path

    from rankzero.data.quality import QualityFilter

    sample = [json.loads(line)["text"] for line in
              (Path(__file__).resolve().parents[1] / "data/quality_sample.jsonl").read_text().splitlines()]
    assert QualityFilter(threads=2).judge_batch(sample) == QualityFilter().judge_batch(sample)
