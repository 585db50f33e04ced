"""A near-copies corpus for measuring near-duplicate removal: real Korean documents, each followed
somewhere later by planted near-copies of a known kind, deterministically (same seed, same bytes).

    python bench/dedup_planted.py --out DIR [--bench_mib 3 --per_kind 300 --seed 0]

Originals: every document of ko_real_dev/*.jsonl (`--real_dir`, read in place), then the documents of
a `--bench_mib` bench corpus (scripts/make_corpus.py, same seed), in that order. One copy is planted per
chosen original (each original is chosen for at most one kind), at a random place after it, so "first
one wins" should keep the original and remove the copy. Only originals of >= MIN_PLANT_WORDS words get
copies. The kinds (each counted separately by bench/dedup_bench.py):
  header_footer       a site header line before and a footer line after (news/blog style; 10-20 words in all)
  words_5pct          5% of the words (at least 1) replaced by other corpus words at random positions
  words_5pct_runs     the same number of words replaced, in runs of 5 consecutive words (an edited phrase)
  paragraph_dropped   one line dropped, chosen among those holding <= 10% of the words (caption, link line,
                      one turn); originals without such a line are not eligible
  rewrapped           each paragraph re-flowed to a random width of 30-80 characters at spaces
Writes DIR/planted.jsonl ({"id", "text"} a line, ids "0".."N-1" = line numbers) and DIR/labels.json (per
line: kind, the line of its original for copies, where it came from).

The module also holds the bench's own reference shingler (NFKC, lower case, punctuation -> space, digits ->
0, whitespace words, 5-word shingles), used only to measure the true Jaccard similarity of pairs: what a
planted copy really shares with its original, and which originals genuinely near-copy an earlier one.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import re
import sys
import tempfile
import textwrap
import unicodedata
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
REAL_DIR = REPO.parent / "shared" / "corpora" / "ko_real_dev"  # beside the main checkout
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(REPO))

from scripts.make_corpus import generate  # noqa: E402

KINDS = ("header_footer", "words_5pct", "words_5pct_runs", "paragraph_dropped", "rewrapped")
MIN_PLANT_WORDS = 30
SHINGLE_WORDS = 5
CHANGED_WORD_SHARE = 0.05
RUN_WORDS = 5
DROPPABLE_LINE_SHARE = 0.10
WHITESPACE = re.compile(r"(\s+)")

SITES = ["한빛일보", "서울경제신문", "데일리뉴스24", "주간동아리", "코리아헤럴드", "지역방송 뉴스", "생활정보 블로그",
         "맘카페", "IT조선일보", "오늘의 소식"]
SECTIONS = ["사회", "경제", "생활/문화", "IT/과학", "국제", "지역", "오피니언", "라이프"]
NAMES = ["김민준", "이서연", "박지훈", "최유진", "정하늘", "강도윤", "윤서아", "한지민"]
HEADERS = ["{site} > {section} > 기사 본문", "[{site}] {section} | 입력 {date} | 수정 {date}",
           "홈 | {section} | {site} 공식 블로그", "{site} {section} 뉴스 입력 {date} 댓글 0", "※ {site} 제공 기사입니다"]
FOOTERS = ["ⓒ {site} 무단전재 및 재배포 금지", "{name} 기자 reporter{n}@news.co.kr 저작권자 ⓒ {site}",
           "▶ {site} 최신 기사 더 보기 ▶ 구독하기", "이 글이 도움이 되셨다면 공감과 구독 부탁드립니다 - {site}",
           "출처: {site} {section} 게시판 (원문 보기)"]


class _Fold(dict):
    """str.translate table built as characters are met: punctuation -> space, decimal digit -> 0."""

    def __missing__(self, code: int) -> int:
        category = unicodedata.category(chr(code))
        self[code] = 32 if category.startswith("P") else 48 if category == "Nd" else code
        return self[code]


_FOLD = _Fold()


def normalise(text: str) -> str:
    """NFKC, lower case, punctuation to a space, every decimal digit to 0 (the issue's normal form)."""
    return unicodedata.normalize("NFKC", text).lower().translate(_FOLD)


def reference_shingles(text: str) -> frozenset:
    """Set of 5-word shingles of the normal form; empty when there are fewer than 5 words."""
    words = normalise(text).split()
    return frozenset(hash(tuple(words[start:start + SHINGLE_WORDS]))
                     for start in range(len(words) - SHINGLE_WORDS + 1))


def jaccard(left: frozenset, right: frozenset) -> float:
    return len(left & right) / len(left | right) if left and right else 0.0


def best_earlier_match(shingle_sets: list[frozenset]) -> list[tuple[float, int]]:
    """For each document, (the highest true Jaccard with any earlier document, that document's index);
    (0.0, -1) when it shares no shingle with an earlier one. An inverted index keeps it near-linear."""
    postings: dict[int, list[int]] = collections.defaultdict(list)
    best = []
    for index, shingles in enumerate(shingle_sets):
        shared = collections.Counter(earlier for shingle in shingles for earlier in postings[shingle])
        match = (0.0, -1)
        for earlier, count in shared.items():
            similarity = count / (len(shingles) + len(shingle_sets[earlier]) - count)
            if similarity > match[0]:
                match = (similarity, earlier)
        best.append(match)
        for shingle in shingles:
            postings[shingle].append(index)
    return best


def load_originals(real_dir: Path, bench_mib: float, seed: int) -> list[tuple[str, str]]:
    """(text, where it came from) for ko_real_dev's documents, then a bench corpus's."""
    paths = sorted(real_dir.glob("*.jsonl"))
    if not paths:
        raise SystemExit(f"--real_dir {real_dir}: no *.jsonl there (ko_real_dev sits in shared/corpora/ beside "
                         "the main checkout)")
    originals = []
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                originals.append((json.loads(line)["text"], f"ko_real_dev/{path.name}:{number}"))
    if bench_mib > 0:
        with tempfile.TemporaryDirectory() as scratch:
            corpus = Path(scratch) / "bench.jsonl"
            generate(int(bench_mib * 2**20), corpus, seed=seed)
            with open(corpus, encoding="utf-8") as handle:
                for number, line in enumerate(handle, 1):
                    originals.append((json.loads(line)["text"], f"bench_corpus(seed {seed}):{number}"))
    return originals


def _fill(template: str, rng: random.Random) -> str:
    date = f"2024.{rng.randint(1, 12):02d}.{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"
    return template.format(site=rng.choice(SITES), section=rng.choice(SECTIONS), name=rng.choice(NAMES),
                           date=date, n=rng.randint(1, 99))


def header_footer(text: str, rng: random.Random, vocabulary: list[str]) -> str | None:
    return f"{_fill(rng.choice(HEADERS), rng)}\n\n{text}\n\n{_fill(rng.choice(FOOTERS), rng)}"


def _replace_words(text: str, positions: set[int], rng: random.Random, vocabulary: list[str]) -> str:
    pieces = WHITESPACE.split(text)  # words at even indices, the whitespace between them (kept) at odd ones
    word_slots = [index for index in range(0, len(pieces), 2) if pieces[index]]
    for position in positions:
        slot = word_slots[position]
        replacement = rng.choice(vocabulary)
        while replacement == pieces[slot]:
            replacement = rng.choice(vocabulary)
        pieces[slot] = replacement
    return "".join(pieces)


def _word_count(text: str) -> int:
    return len(text.split())


def words_5pct(text: str, rng: random.Random, vocabulary: list[str]) -> str | None:
    count = _word_count(text)
    changed = max(1, round(CHANGED_WORD_SHARE * count))
    return _replace_words(text, set(rng.sample(range(count), changed)), rng, vocabulary)


def words_5pct_runs(text: str, rng: random.Random, vocabulary: list[str]) -> str | None:
    count = _word_count(text)
    changed = max(1, round(CHANGED_WORD_SHARE * count))
    positions: set[int] = set()
    while len(positions) < changed:
        start = rng.randrange(count)
        positions.update(range(start, min(count, start + min(RUN_WORDS, changed - len(positions)))))
    return _replace_words(text, positions, rng, vocabulary)


def paragraph_dropped(text: str, rng: random.Random, vocabulary: list[str]) -> str | None:
    lines = text.split("\n")
    total = len(text.split())
    droppable = [index for index, line in enumerate(lines)
                 if line.strip() and len(line.split()) <= DROPPABLE_LINE_SHARE * total]
    if not droppable:
        return None
    drop = rng.choice(droppable)
    return "\n".join(line for index, line in enumerate(lines) if index != drop)


def rewrapped(text: str, rng: random.Random, vocabulary: list[str]) -> str | None:
    width = rng.randint(30, 80)
    return "\n\n".join(textwrap.fill(" ".join(paragraph.split()), width=width, break_long_words=False,
                                     break_on_hyphens=False) for paragraph in text.split("\n\n"))


PLANTERS = {"header_footer": header_footer, "words_5pct": words_5pct, "words_5pct_runs": words_5pct_runs,
            "paragraph_dropped": paragraph_dropped, "rewrapped": rewrapped}


def plant(originals: list[tuple[str, str]], per_kind: int, seed: int) -> tuple[list[str], list[dict]]:
    """Texts in corpus order and a label per text: {"kind", "of" (line of the original, copies only), "from"}."""
    rng = random.Random(seed)
    vocabulary = sorted({word for text, _ in originals for word in text.split() if len(word) > 1})
    candidates = [index for index, (text, _) in enumerate(originals) if len(text.split()) >= MIN_PLANT_WORDS]
    rng.shuffle(candidates)
    copies: dict[int, list] = collections.defaultdict(list)  # slot -> [(order, kind, text, original)]
    used: set[int] = set()
    for kind in KINDS:
        made = 0
        for original in candidates:
            if made == per_kind:
                break
            if original in used:
                continue
            text = PLANTERS[kind](originals[original][0], rng, vocabulary)
            if text is None:
                continue
            used.add(original)
            # The copy goes after a random later original (or at the very end): never before its original.
            slot = rng.randint(original, len(originals) - 1)
            copies[slot].append((rng.random(), kind, text, original))
            made += 1
    texts, labels, line_of = [], [], {}
    for index, (text, where) in enumerate(originals):
        line_of[index] = len(texts)
        texts.append(text)
        labels.append({"kind": "original", "from": where})
        for _, kind, copy, original in sorted(copies.get(index, [])):
            texts.append(copy)
            labels.append({"kind": kind, "of": line_of[original], "from": originals[original][1]})
    return texts, labels


def write_planted(out: Path, real_dir: Path, bench_mib: float, per_kind: int, seed: int) -> tuple[Path, Path]:
    texts, labels = plant(load_originals(real_dir, bench_mib, seed), per_kind, seed)
    out.mkdir(parents=True, exist_ok=True)
    corpus, label_path = out / "planted.jsonl", out / "labels.json"
    with open(corpus, "w", encoding="utf-8") as handle:
        for index, text in enumerate(texts):
            handle.write(json.dumps({"id": str(index), "text": text}, ensure_ascii=False) + "\n")
    with open(label_path, "w", encoding="utf-8") as handle:
        json.dump(labels, handle, ensure_ascii=False)
    return corpus, label_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="directory for planted.jsonl and labels.json")
    parser.add_argument("--real_dir", type=Path, default=REAL_DIR, help="ko_real_dev (read in place)")
    parser.add_argument("--bench_mib", type=float, default=3.0, help="size of the bench corpus part (MiB)")
    parser.add_argument("--per_kind", type=int, default=300, help="planted copies per kind")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    corpus, _ = write_planted(args.out, args.real_dir, args.bench_mib, args.per_kind, args.seed)
    labels = json.loads((args.out / "labels.json").read_text(encoding="utf-8"))
    print(corpus, dict(collections.Counter(label["kind"] for label in labels)))


if __name__ == "__main__":
    main()
