"""Shared fixtures: a tiny tokenizer trained on a few KB of Korean/English text written here, and corpora.

    tokenizer_dir   session-scoped (training takes well under a second); read-only by convention: tests
                    that change a tokenizer copy it first
    corpus          400 distinct Korean documents in this test's tmp_path (the test may change it)
    large_corpus    1,500 of them, session-scoped and read-only: a build long enough to signal or kill
    train_corpus    the sample texts six times over, session-scoped and read-only: what training tests use
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest

# The tests sit in folders that mirror the package and import each other's helpers by module name
# (test_neardup's texts, test_train_preemption's process helpers): every folder is importable whichever file
# pytest is given, not only those it has collected already.
for _folder in sorted(Path(__file__).resolve().parent.rglob("*")):
    if _folder.is_dir() and _folder.name != "__pycache__" and str(_folder) not in sys.path:
        sys.path.append(str(_folder))



@functools.cache
def _no_cpp_compiler() -> bool:
    from rankzero.train.training_args import inductor_finds_a_cpp_compiler

    return not inductor_finds_a_cpp_compiler()


def pytest_runtest_setup(item):
    """`needs_cxx` (helpers.py): skipped, with the reason, where inductor finds no C++ compiler."""
    if item.get_closest_marker("needs_cxx") is not None and _no_cpp_compiler():
        from helpers import NO_CXX

        pytest.skip(NO_CXX)


KOREAN_PARAGRAPHS = [
    "서울은 대한민국의 수도이며 정치, 경제, 문화의 중심지이다. 한강이 도시를 가로질러 흐르고, "
    "강 북쪽에는 오래된 궁궐과 골목이, 남쪽에는 높은 빌딩과 넓은 도로가 자리 잡고 있다.",
    "오늘 아침에는 비가 조금 내렸지만 점심 무렵부터 날씨가 맑아졌다. 우리는 공원에 가서 산책을 하고 "
    "근처 식당에서 김치찌개와 된장찌개를 먹었다. 가격은 두 사람에 만 팔천 원이었다.",
    "한국어는 교착어이기 때문에 하나의 어절 안에 어간과 조사, 어미가 함께 붙는다. 예를 들어 "
    "'학교에서는'은 '학교'와 '에서'와 '는'으로 나눌 수 있다. 그래서 토크나이저가 어절 단위를 잘 다루는 것이 중요하다.",
    "제1조(목적) 이 법은 국민의 건강을 보호하고 삶의 질을 높이는 것을 목적으로 한다. ① 국가는 "
    "국민이 건강한 생활을 할 수 있도록 노력하여야 한다. ② 지방자치단체는 이에 필요한 시책을 마련하여야 한다.",
    "어제 회의에서 우리 팀은 다음 분기의 계획을 논의했습니다. 새로운 서비스를 2025년 3월까지 출시하고, "
    "사용자 의견을 모아 기능을 계속 개선하기로 했습니다. 다들 수고 많으셨습니다!",
    "할머니께서는 시골에서 감자와 고구마를 키우신다. 여름 방학이 되면 손자들이 놀러 와서 함께 밭일을 돕고, "
    "저녁에는 마당에 모여 앉아 옛날이야기를 듣는다. ㅋㅋㅋ 정말 재미있었어요.",
    "인공지능 모델을 학습하려면 많은 양의 데이터와 계산 자원이 필요하다. 특히 한국어 데이터는 영어에 비해 "
    "양이 적기 때문에 품질이 좋은 문서를 골라 쓰는 일이 더욱 중요하다.",
    "지하철 2호선은 서울의 주요 지역을 순환하는 노선이다. 출퇴근 시간에는 사람이 매우 많아서 "
    "조금 일찍 집을 나서는 것이 좋다. 역 안에는 편의점과 빵집도 있다.",
]

ENGLISH_PARAGRAPHS = [
    "The quick brown fox jumps over the lazy dog. Tokenizers split text into pieces that a language "
    "model can learn from, and a good one keeps frequent words whole.",
    "Seoul is the capital of South Korea. It's a large city with a long history, busy markets and "
    "quiet palaces, and it hosted the Summer Olympics in 1988.",
    "Training a model needs data, compute and patience. We don't want to waste any of them, so the "
    "data is prepared once and shared by every process that trains.",
]

CODE_SNIPPETS = [
    "def add(a, b):\n    \"\"\"Return a + b.\"\"\"\n    return a + b\n\n\nfor i in range(10):\n    print(add(i, 2))\n",
    "if (x == y && y != 0) {\n\treturn x->next;\n}\n",
]

# A few KB of mixed text, repeated so that BPE sees frequent pairs more than once.
SAMPLE_TEXTS = (KOREAN_PARAGRAPHS + ENGLISH_PARAGRAPHS + CODE_SNIPPETS) * 3

TOKENIZER_VOCAB_SIZE = 1000


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory):
    """A directory holding an HF fast tokenizer (tokenizer.json, bos/eos/pad/unk, chat template)."""
    from rankzero.tokenizer_trainer import train_tokenizer

    path = tmp_path_factory.mktemp("tokenizer")
    train_tokenizer(SAMPLE_TEXTS, TOKENIZER_VOCAB_SIZE, path)
    return path


@pytest.fixture
def corpus(tmp_path):
    from helpers import korean_documents, write_jsonl

    return write_jsonl(tmp_path / "ko.jsonl", [{"text": t} for t in korean_documents(400)])


@pytest.fixture(scope="session")
def large_corpus(tmp_path_factory):
    from helpers import korean_documents, write_jsonl

    return write_jsonl(tmp_path_factory.mktemp("large_corpus") / "ko.jsonl",
                       [{"text": t} for t in korean_documents(1500)])


@pytest.fixture(scope="session")
def train_corpus(tmp_path_factory):
    from helpers import write_corpus

    return write_corpus(tmp_path_factory.mktemp("train_corpus") / "docs.jsonl")
