"""Generate a synthetic Korean web-like corpus of a requested size, deterministically.

    python scripts/make_corpus.py --size_mb 50 --output corpus.jsonl [--seed 0]

Output: JSONL, one `{"text": ...}` per line (UTF-8, not ASCII-escaped). The mix imitates a crawl:
  ~88% Korean prose   sentences of data/sample/ko.jsonl, about a third of them spliced at a clause
                      boundary (the head of one sentence + the tail of another) and some with fresh
                      numbers, so a 50 MB corpus does not repeat the same few hundred lines; web
                      trimmings (titles, dates, lists, comment lines) on some documents
  ~5%  English/code   sentences of data/sample/en.txt; small Python/JavaScript/SQL snippets
  ~7%  junk           navigation menus, keyword spam, price lists, syllable salad, symbol lines,
                      short fragments — what a quality filter is there to remove
Document lengths are lognormal (median ~1.5 KB, long tail to 40 KB). The same seed and size give the
same bytes; a larger size with the same seed starts with the same documents.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLE_KO = REPO / "data" / "sample" / "ko.jsonl"
SAMPLE_EN = REPO / "data" / "sample" / "en.txt"

SENTENCE_END = re.compile(r"(?<=[.?!])\s+")
# Clause boundaries where a sentence can be cut and another sentence's tail attached: a connective
# ending followed by a space. The head keeps its ending, the tail starts a new clause.
CLAUSE_CUT = re.compile(r"(?:(?<=[가-힣]고)|(?<=[가-힣]며)|(?<=지만)|(?<=는데)|(?<=면서)|(?<=도록)|(?<=아서)"
                        r"|(?<=어서)|(?<=해서)|(?<=으면)|(?<=하면)|(?<=니까)),? ")
AUXILIARY_START = ("있", "싶", "보", "말", "계", "나서", "주")  # "-고 있다", "-어 보다": not a new clause
NUMBER = re.compile(r"(?<![0-9])[0-9]{2,4}(?![0-9])")

MEDIAN_DOC_BYTES = 1500
DOC_SIGMA = 0.9
MIN_DOC_BYTES, MAX_DOC_BYTES = 150, 40_000
SHARE_ENGLISH, SHARE_CODE, SHARE_JUNK = 0.035, 0.015, 0.07

WEB_TITLES = ["{topic} 정리", "{topic}에 대한 생각", "[정보] {topic} 알아보기", "{topic} 후기", "오늘의 기록: {topic}",
              "{topic}, 이것만 알면 됩니다", "초보자를 위한 {topic} 이야기"]
TITLE_WORDS = ["주말", "여행", "요리", "과학", "역사", "경제", "운동", "기술", "문화", "생활", "건강", "독서", "공부",
               "집밥", "산책", "캠핑", "재테크", "육아", "반려동물", "음악"]
WEB_TAILS = ["※ 이 글은 개인적인 경험을 바탕으로 작성되었습니다.", "궁금한 점은 댓글로 남겨 주세요.",
             "도움이 되셨다면 공감 부탁드립니다.", "다음 글에서 이어서 정리하겠습니다.",
             "사진은 직접 촬영한 것입니다.", "내용에 오류가 있으면 알려 주시면 고치겠습니다."]
COMMENTS = ["좋은 정보 감사합니다.", "덕분에 잘 읽었어요!", "저도 지난달에 다녀왔는데 정말 좋더라고요.",
            "자세한 설명 고맙습니다.", "다음 글도 기대할게요.", "이 부분은 처음 알았네요."]
MENU_ITEMS = ["홈", "회사소개", "제품안내", "고객센터", "공지사항", "자주 묻는 질문", "로그인", "회원가입", "장바구니",
              "마이페이지", "이벤트", "오시는 길", "사이트맵", "개인정보처리방침", "이용약관", "채용정보", "English"]
SPAM_WORDS = ["최저가", "무료배송", "다이어트", "특가", "할인", "쿠폰", "대출", "당일지급", "무직자", "초간편",
              "성인", "추천", "이벤트", "당첨", "보장", "무료상담", "비밀", "100%", "즉시", "부업", "고수익"]
PRODUCTS = ["무선 이어폰", "보조 배터리", "텀블러", "캠핑 의자", "수건 세트", "운동화", "노트", "볼펜", "전기 포트",
            "가습기", "요가 매트", "우산", "머그컵", "블루투스 스피커", "휴대폰 케이스"]
FRAGMENTS = ["ㅋㅋㅋㅋㅋ", "감사합니다!!", "좋아요", "ㅠㅠ", "첫 댓글입니다", "퍼가요~", "로그인이 필요합니다.",
             "페이지를 찾을 수 없습니다.", "더보기", "목록으로", "이전 글 | 다음 글", "Copyright © All rights reserved."]
SYMBOL_LINES = ["★☆★☆★☆★☆★☆", "=====================", "▶▶▶ 클릭 ◀◀◀", "■□■□■□■□", "~~~~~~~~~~~~~~~~", "♥♥♥♥♥♥"]
CODE_SNIPPETS = [
    "def {name}(values):\n    total = 0\n    for value in values:\n        if value > {n}:\n            total += value\n"
    "    return total\n\n\nprint({name}([{n}, {m}, {k}]))\n",
    "function {name}(items) {{\n  return items\n    .filter((item) => item.count > {n})\n"
    "    .map((item) => item.name);\n}}\n\nconsole.log({name}([{{ name: 'a', count: {m} }}]));\n",
    "SELECT user_id, COUNT(*) AS orders\nFROM orders\nWHERE created_at >= '2023-0{d}-01'\n"
    "GROUP BY user_id\nHAVING COUNT(*) > {n}\nORDER BY orders DESC\nLIMIT {m};\n",
    "import json\n\nwith open('{name}.json', encoding='utf-8') as handle:\n    data = json.load(handle)\n"
    "print(len(data), 'records')  # expected about {m}\n",
    "class {Name}:\n    def __init__(self, size={n}):\n        self.size = size\n        self.items = []\n\n"
    "    def add(self, item):\n        if len(self.items) < self.size:\n            self.items.append(item)\n",
]
CODE_NAMES = ["count_items", "load_rows", "summarize", "filter_scores", "parse_line", "merge_batches", "top_users"]


def split_sentences(text: str) -> list[str]:
    return [sentence for sentence in SENTENCE_END.split(text.strip()) if sentence]


def load_bank() -> dict:
    """Sentences, clause heads and clause tails from the bundled samples."""
    for path in (SAMPLE_KO, SAMPLE_EN):
        if not path.exists():
            sys.exit(f"error: {path} is missing; run `python data/sample/make_sample.py` to write it")
    korean: list[str] = []
    with open(SAMPLE_KO, encoding="utf-8") as handle:
        for line in handle:
            for paragraph in json.loads(line)["text"].split("\n"):
                korean.extend(split_sentences(paragraph))
    korean = sorted(set(korean))  # sorted: set order is not stable across runs
    heads, tails = [], []
    for sentence in korean:
        for match in CLAUSE_CUT.finditer(sentence):
            head, tail = sentence[:match.start()], sentence[match.end():]
            if len(head) >= 8 and len(tail) >= 12 and tail.endswith(".") and not tail.startswith(AUXILIARY_START):
                heads.append(head)
                tails.append(tail)
    english: list[str] = []
    with open(SAMPLE_EN, encoding="utf-8") as handle:
        for line in handle:
            english.extend(split_sentences(line))
    return {"korean": korean, "heads": heads, "tails": tails, "english": sorted(set(english))}


def korean_sentence(rng: random.Random, bank: dict) -> str:
    roll = rng.random()
    if roll < 0.1:  # two clause heads and a tail: millions of combinations from a few hundred parts
        sentence = f"{rng.choice(bank['heads'])} {rng.choice(bank['heads'])} {rng.choice(bank['tails'])}"
    elif roll < 0.35:
        sentence = rng.choice(bank["heads"]) + " " + rng.choice(bank["tails"])
    else:
        sentence = rng.choice(bank["korean"])
    if roll > 0.85:  # fresh figures, as in real reports and posts
        sentence = NUMBER.sub(lambda _: str(rng.randint(10, 2024)), sentence)
    return sentence


def fresh_korean_sentence(rng: random.Random, bank: dict, used: set[str]) -> str:
    """A sentence not yet in this document (a few tries): repeated lines inside one document are what
    a quality filter drops, and only the junk here should look like junk."""
    for _ in range(4):
        sentence = korean_sentence(rng, bank)
        if sentence not in used:
            break
    used.add(sentence)
    return sentence


def korean_document(rng: random.Random, bank: dict, target_bytes: int) -> str:
    paragraphs: list[str] = []
    used: set[str] = set()
    if rng.random() < 0.4:
        paragraphs.append(rng.choice(WEB_TITLES).format(topic=rng.choice(TITLE_WORDS)))
    if rng.random() < 0.2:
        paragraphs.append(f"{rng.randint(2015, 2024)}년 {rng.randint(1, 12)}월 {rng.randint(1, 28)}일")
    size = sum(len(p.encode()) for p in paragraphs)
    while size < target_bytes:
        if rng.random() < 0.08:  # a short list, as blog posts and how-tos have
            items = [f"{i}. {fresh_korean_sentence(rng, bank, used)}" for i in range(1, rng.randint(3, 5))]
            paragraph = "\n".join(items)
        else:
            paragraph = " ".join(fresh_korean_sentence(rng, bank, used) for _ in range(rng.randint(2, 6)))
        paragraphs.append(paragraph)
        size += len(paragraph.encode()) + 2
    if rng.random() < 0.25:
        paragraphs.append(rng.choice(WEB_TAILS))
    if rng.random() < 0.1:
        paragraphs.append("\n".join(f"- {rng.choice(COMMENTS)}" for _ in range(rng.randint(1, 3))))
    return "\n\n".join(paragraphs)


def english_document(rng: random.Random, bank: dict, target_bytes: int) -> str:
    sentences, size = [], 0
    while size < target_bytes:
        sentence = rng.choice(bank["english"])
        sentences.append(sentence)
        size += len(sentence) + 1
    return " ".join(sentences)


def code_document(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(1, 4)):
        name = rng.choice(CODE_NAMES)
        snippet = rng.choice(CODE_SNIPPETS).format(
            name=name, Name="".join(word.title() for word in name.split("_")),
            n=rng.randint(1, 99), m=rng.randint(1, 999), k=rng.randint(1, 99), d=rng.randint(1, 9))
        parts.append(snippet)
    if rng.random() < 0.5:
        parts.insert(0, "아래 코드는 예제입니다. 환경에 맞게 수정해서 사용하세요.")
    return "\n".join(parts)


def junk_document(rng: random.Random) -> str:
    kind = rng.randrange(6)
    if kind == 0:  # navigation menu
        return "\n".join(" | ".join(rng.sample(MENU_ITEMS, rng.randint(4, 8))) for _ in range(rng.randint(1, 4)))
    if kind == 1:  # keyword spam
        return " ".join(rng.choice(SPAM_WORDS) for _ in range(rng.randint(20, 120)))
    if kind == 2:  # price list
        return "\n".join(f"{rng.choice(PRODUCTS)} {rng.randint(1, 99) * 1000 - 100:,}원 ▶ 구매하기"
                         for _ in range(rng.randint(5, 30)))
    if kind == 3:  # syllable salad: passes a Hangul-ratio gate, means nothing
        words = ["".join(chr(0xAC00 + rng.randrange(11172)) for _ in range(rng.randint(1, 4)))
                 for _ in range(rng.randint(30, 200))]
        return " ".join(words)
    if kind == 4:  # symbol lines with a hook
        return "\n".join(rng.choice(SYMBOL_LINES + SPAM_WORDS) for _ in range(rng.randint(3, 15)))
    return rng.choice(FRAGMENTS)  # too short to be a document


def generate(size_bytes: int, output: Path, seed: int = 0) -> dict:
    """Write documents until `size_bytes` is reached; return counts by kind."""
    rng = random.Random(seed)
    bank = load_bank()
    counts = {"korean": 0, "english": 0, "code": 0, "junk": 0}
    written = 0
    mu = math.log(MEDIAN_DOC_BYTES)
    with open(output, "wb") as handle:
        while written < size_bytes:
            target = int(min(MAX_DOC_BYTES, max(MIN_DOC_BYTES, rng.lognormvariate(mu, DOC_SIGMA))))
            # Never overshoot the requested size by a whole long document.
            target = min(target, max(MIN_DOC_BYTES, size_bytes - written))
            roll = rng.random()
            if roll < SHARE_JUNK:
                kind, text = "junk", junk_document(rng)
            elif roll < SHARE_JUNK + SHARE_ENGLISH:
                kind, text = "english", english_document(rng, bank, target)
            elif roll < SHARE_JUNK + SHARE_ENGLISH + SHARE_CODE:
                kind, text = "code", code_document(rng)
            else:
                kind, text = "korean", korean_document(rng, bank, target)
            line = (json.dumps({"text": text}, ensure_ascii=False) + "\n").encode("utf-8")
            handle.write(line)
            written += len(line)
            counts[kind] += 1
    return {"bytes": written, "documents": sum(counts.values()), **counts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size_mb", type=float, required=True, help="output size in MiB")
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.size_mb <= 0:
        parser.error(f"--size_mb must be positive, got {args.size_mb}")
    start = time.perf_counter()
    stats = generate(int(args.size_mb * 2**20), args.output, args.seed)
    print(f"wrote {args.output}: {stats['bytes'] / 2**20:.1f} MiB, {stats['documents']} documents "
          f"(korean {stats['korean']}, english {stats['english']}, code {stats['code']}, junk {stats['junk']}) "
          f"in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
