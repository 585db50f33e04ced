"""Benchmark decontamination (rankzero/data/screen/decontaminate.py): every input format, the three ways an item
is planted, the rules that keep common n-grams and short overlaps from dropping documents, user errors."""

import csv
import json

import pytest

from rankzero.data.screen.decontaminate import (COMMON_ITEMS, ContaminationIndex, Item, benchmark_identity, eval_items,
                                                read_benchmarks, words_of)
from rankzero.data.screen.scan import Bitmap, code_points, letters, prepare, scan
from rankzero.errors import RankzeroError

QUESTIONS = [
    "다음 중 대한민국 헌법상 국회의 권한에 속하지 않는 것으로 가장 적절한 것은 무엇인가?",
    "조선 시대 세종대왕이 집현전 학자들과 함께 창제한 훈민정음의 창제 목적으로 옳지 않은 것은?",
    "광합성 과정에서 빛에너지를 화학에너지로 전환하는 엽록체 내부 구조의 이름으로 옳은 것은?",
    "회계에서 자산의 취득원가를 내용연수에 걸쳐 체계적으로 배분하는 절차를 무엇이라고 하는가?",
]
CHOICES = [("예산안 심의", "조약 체결 동의", "대법원장 임명", "국정감사")] * 4
PAGE = ("오늘은 공부한 내용을 정리해 보려고 한다. 어제 도서관에서 친구와 함께 기출 문제를 풀었는데 생각보다 어려웠다. "
        "{} 이 문제를 보고 한참을 고민했다. 다음에는 더 열심히 준비해야겠다고 다짐하며 집으로 돌아왔다.")


def write_kmmlu(path, questions=QUESTIONS):
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["question", "answer", "A", "B", "C", "D", "Category", "Human Accuracy"])
        for question, choices in zip(questions, CHOICES):
            writer.writerow([question, 2, *choices, "Law", 0.5])


@pytest.fixture
def index(tmp_path):
    write_kmmlu(tmp_path / "law-test.csv")
    return ContaminationIndex(read_benchmarks([tmp_path / "law-test.csv"]))


def test_formats(tmp_path):
    directory = tmp_path / "kmmlu"
    directory.mkdir()
    write_kmmlu(directory / "Law-test.csv")
    (tmp_path / "logickor.jsonl").write_text(json.dumps(
        {"id": 7, "category": "추론", "questions": ["첫 질문입니다", "둘째 질문입니다"], "references": [None, None]},
        ensure_ascii=False) + "\n\n", encoding="utf-8")
    (tmp_path / "click.json").write_text(json.dumps([
        {"id": "KIIP_1", "paragraph": "지문입니다", "question": "물음입니다", "choices": ["가", "나"], "answer": "가"}],
        ensure_ascii=False), encoding="utf-8")
    (tmp_path / "kobest.jsonl").write_text(json.dumps(
        {"premise": "전제", "question": "결과", "alternative_1": "하나", "alternative_2": "둘", "label": 0},
        ensure_ascii=False) + "\n", encoding="utf-8")
    (tmp_path / "normalised.jsonl").write_text(
        json.dumps({"benchmark": "haerae", "id": "h1", "question": "질문", "choices": ["a", "b"], "answer": "a"}) + "\n"
        + json.dumps({"text": "그냥 글"}, ensure_ascii=False) + "\n", encoding="utf-8")
    items = read_benchmarks([directory, tmp_path / "logickor.jsonl", tmp_path / "click.json",
                             tmp_path / "kobest.jsonl", tmp_path / "normalised.jsonl"])
    assert [item.benchmark for item in items] == ["kmmlu"] * 4 + ["logickor", "click", "kobest", "haerae", "normalised"]
    assert items[0] == Item("kmmlu", "Law-test:2", (QUESTIONS[0],), CHOICES[0])
    assert items[4] == Item("logickor", "7", ("첫 질문입니다", "둘째 질문입니다"), ())
    assert items[5] == Item("click", "KIIP_1", ("지문입니다", "물음입니다"), ("가", "나"))
    assert items[6] == Item("kobest", "kobest:1", ("전제", "결과"), ("하나", "둘"))
    assert items[7].id == "h1" and items[8] == Item("normalised", "normalised:2", ("그냥 글",), ())


@pytest.mark.parametrize("name,content,message", [
    ("bad.jsonl", '{"question": "q"}\n{"question": \n', "bad.jsonl:2: not valid JSON"),
    ("bad.json", '{"data": 3}', "expected a JSON list"),
    ("empty.jsonl", '{"answer": "a"}\n', "empty.jsonl:1: no question text"),
    ("latin.csv", None, "not UTF-8"),
    ("notes.txt", "x", "not a benchmark file"),
])
def test_user_errors_name_the_file_and_line(tmp_path, name, content, message):
    path = tmp_path / name
    if content is None:
        path.write_bytes("question,A\n".encode() + "질문".encode("euc-kr") + b",a\n")
    else:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(RankzeroError, match=message):
        read_benchmarks([path])
    with pytest.raises(RankzeroError, match="no such file"):
        read_benchmarks([tmp_path / "missing.csv"])


def test_normalize():
    assert words_of("ＡＢＣ，  다음 중「옳은」 것은?\n①") == ["abc", "다음", "중", "옳은", "것은", "1"]


# Word characters and breaks the kernel must classify and lower-case as `words_of` does: full-width and
# compatibility forms, an underscore, combining marks, Hangul and compatibility jamo, Han, an emoji and Deseret
# capitals (outside the BMP), a mathematical letter, a titlecase digraph, spaces of other widths, symbols, ß.
TRICKY = ("Ｆｕｌｌ＿width_x ①② ｶﾀｶﾅ e\u0301t\u00e9 가 漢字 😀𝐀bc\u00a0다음\u3000중∑±§ a\u200bb ß Ǆ 𐐀𐐁 ㅇㅠ ㎡ "
          "ABC Straße")
# Lower case that is no function of the code point alone: a capital sigma (final or not), the dotted capital I.
CONTEXTUAL = "ΟΔΟΣ ΣΟΦΟΣ İstanbul"


def test_the_kernel_reads_the_words_words_of_reads():
    texts = [TRICKY, CONTEXTUAL, PAGE.format(QUESTIONS[0]), "", "하나"]
    codes, offsets = code_points([prepare(text) for text in texts])
    for number, text in enumerate(texts):
        assert letters(codes[offsets[number]:offsets[number + 1]]) == "".join(words_of(text)), text
    # n-grams: the same words in another spacing, case, width and punctuation hash the same; a changed word not.
    def grams(text, n=3):
        return scan(*code_points([prepare(text)]), n, 8, 4, Bitmap.everything())[0].values.tolist()
    assert len(grams(TRICKY)) == len(words_of(TRICKY)) - 2
    assert grams("가나 다라, 마바 사아") == grams("  가나\n다라 (마바)… 사아 ") != grams("가나 다라 마바 사자")
    assert grams("ABC def ghi") == grams("ａｂｃ DEF-ghi")


def test_items_planted_three_ways_are_found(index):
    question, choices = QUESTIONS[1], CHOICES[1]
    whole = f"{question}\n① {choices[0]} ② {choices[1]} ③ {choices[2]} ④ {choices[3]}\n정답: ②"
    respaced = question.replace(" ", "").replace("세종대왕이", "세종 대왕이").replace("훈민정음의", "훈민 정음의")
    for document in (whole, PAGE.format(question), PAGE.format(respaced)):
        assert index.find([PAGE.format("무관한 문장"), document]) == [[], [1]]


def test_a_respaced_question_is_found_wherever_it_starts():
    """The whole-question rule alone (no spaces left: no 8-gram of the question's words): found at every offset of
    the scan's window sampling (one window every WINDOW_STEP letters), also for the shortest question the rule
    takes. The documents it tests must share enough sampled windows with a question; this fails if that bound
    asks one more window than the worst offset gives."""
    short = "가나다라마바사아자차카타"  # MIN_HANGUL syllables
    index = ContaminationIndex([Item("b", "1", (QUESTIONS[2],), ()), Item("b", "2", (short,), ())])
    for prefix in ("", "가", "가나", "가나다", "가나다라", "가나다라마"):
        for question, expected in ((QUESTIONS[2], [0]), (short, [1])):
            document = f"머리말 {prefix}{question.replace(' ', '')} 꼬리말 문장"
            assert index.find([document]) == [expected], (prefix, question)


def test_an_index_of_english_items_alone_has_no_whole_questions_and_finds_nothing_by_chance():
    """No item of 12 Hangul: no whole-question key. A document's windows still pass the bitmap (of the n-grams) by
    chance now and then; looking them up among no keys must find nothing, not fail."""
    import random

    index = ContaminationIndex([Item("b", "1", ("Which of the following best describes the role of the national "
                                                "assembly under the constitution of Korea",), ("Budget", "Treaty"))])
    assert not index.questions
    rng = random.Random(0)
    pages = ["".join(rng.choice("가나다라마바사아자차카타파하 ") for _ in range(400)) for _ in range(300)]
    assert index.find(pages) == [[] for _ in pages]


def test_partial_copies_are_found_by_ngrams_alone(index):
    # A question with one word changed is no longer a whole-question match, but most n-grams remain.
    long_question = QUESTIONS[0] + " 단, 헌법재판소의 결정례와 국회법의 관련 조항을 함께 고려하여 판단하시오."
    index = ContaminationIndex([Item("b", "1", (long_question,), ())])
    edited = long_question.replace("관련 조항을", "관계 조항을")
    assert index.find([PAGE.format(edited)]) == [[0]]


def test_one_shared_sentence_or_a_template_does_not_drop(tmp_path):
    template = "다음 글을 읽고 물음에 답하시오 글쓴이의 주장으로 가장 적절한 것을 보기에서 고르시오"
    items = [Item("exam", str(i), (f"{template} 보기 {i}",), ()) for i in range(COMMON_ITEMS)]
    index = ContaminationIndex(items)
    assert index.find([PAGE.format(template)]) == [[]]  # the template is in every item: not indexed
    poem = "죽는 날까지 하늘을 우러러 한 점 부끄럼이 없기를 잎새에 이는 바람에도 나는 괴로워했다"
    long_item = Item("exam", "p", (f"{poem} 위 시에 대한 설명으로 {QUESTIONS[0]} {QUESTIONS[2]} {QUESTIONS[3]}",), ())
    index = ContaminationIndex([long_item])
    assert index.find([PAGE.format(poem)]) == [[]]  # one quoted verse is far less than half the item


def test_the_index_is_its_set_definition():
    """The index's n-gram keys, items and thresholds (built in whole-array numpy) against their definition in
    Python sets, item by item: an n-gram in COMMON_ITEMS or more items is not indexed; an item needs half of its
    question's own n-grams, or of all it has when its question has none of its own."""
    template = "다음 글을 읽고 물음에 답하시오 글쓴이의 주장으로 가장 적절한 것을 보기에서 고르시오"
    items = [Item("exam", str(i), (f"{template} 보기 {i}",), (QUESTIONS[i % 4],)) for i in range(COMMON_ITEMS - 1)]
    items += [Item("b", f"q{i}", (question, question), choices) for i, (question, choices) in
              enumerate(zip(QUESTIONS, CHOICES))]
    # The template's fifth item: its n-grams are in exactly COMMON_ITEMS items.
    items += [Item("b", "short", ("수도는?",), ("서울", "부산")), Item("b", "t", (template,), (QUESTIONS[1],))]
    index = ContaminationIndex(items)

    def grams(text: str) -> set[int]:
        return set(scan(*code_points([text]), 8, 8, 4, Bitmap.everything())[0].values.tolist())

    questions = [prepare(" ".join(item.parts)) for item in items]
    whole = [grams(f"{question} {prepare(' '.join(item.choices))}") for question, item in zip(questions, items)]
    common = {gram for gram in set().union(*whole) if sum(gram in own for own in whole) >= COMMON_ITEMS}
    assert common  # the template's n-grams
    pairs, need = [], []
    for number, (question, all_grams) in enumerate(zip(questions, whole)):
        kept = all_grams - common
        own = len((grams(question) or all_grams) - common) or len(kept)
        need.append(max(1, -(-own // 2)) if kept else 0)
        pairs += sorted((gram, number) for gram in kept)
    pairs.sort()
    assert index.gram_keys.tolist() == [gram for gram, _ in pairs]
    assert index.gram_items.tolist() == [number for _, number in pairs]
    assert index.need.tolist() == need
    assert 0 in need and len(set(need)) > 2


def test_short_items_are_not_indexed_and_say_so():
    index = ContaminationIndex([Item("b", "1", ("수도는?",), ("서울", "부산")), Item("b", "2", (QUESTIONS[0],), ())])
    assert index.describe() == {"b": {"items": 2, "items_indexed": 1}}
    assert index.find(["수도는? 서울 부산"]) == [[]]


def test_eval_documents_as_items_catch_near_copies():
    words = " ".join(f"{QUESTIONS[i % 4]}" for i in range(6)).split()
    evaluation = " ".join(words)
    near_copy = " ".join(word if i % 40 else "바뀐말" for i, word in enumerate(words))
    index = ContaminationIndex(eval_items([evaluation]))
    assert index.find([near_copy, PAGE.format(evaluation), PAGE.format("")]) == [[0], [0], []]


def test_identity_follows_content(tmp_path):
    path = tmp_path / "law-test.csv"
    write_kmmlu(path)
    before = benchmark_identity([tmp_path])
    write_kmmlu(path, QUESTIONS[::-1])
    assert benchmark_identity([tmp_path]) != before


def test_the_index_follows_the_files(tmp_path):
    from rankzero.data.screen.screening import load_index

    path = tmp_path / "law-test.csv"
    write_kmmlu(path)
    first = load_index((str(tmp_path),))
    assert load_index((str(tmp_path),)) is first  # built once per process
    write_kmmlu(path, QUESTIONS[:1])
    assert len(load_index((str(tmp_path),)).items) == 1


def test_the_stable_code_points_are_their_own_nfkc_wherever_they_stand():
    """What scan.nfkc leaves unnormalised: every code point outside _UNSTABLE maps to itself, has no
    combining class and is the second of no canonical composition (Hangul's algorithmic pairs end in jamo, which
    are outside); the space and line break it splits at are neither first nor second of one."""
    import sys
    import unicodedata

    from rankzero.data.screen.scan import _UNSTABLE

    every = range(sys.maxunicode + 1)
    pairs = [decomposition.split() for decomposition in map(unicodedata.decomposition, map(chr, every))
             if decomposition and decomposition[0] != "<"]
    firsts = {int(parts[0], 16) for parts in pairs if len(parts) == 2}
    seconds = {int(parts[1], 16) for parts in pairs if len(parts) == 2}
    stable = [code for code in every if not 0xD800 <= code < 0xE000 and not _UNSTABLE.match(chr(code))]
    assert len(stable) > 11_172 + 20_000  # the Hangul syllables and the CJK ideographs at least
    for code in stable:
        char = chr(code)
        assert unicodedata.normalize("NFKC", char) == char and not unicodedata.combining(char), hex(code)
        assert code not in seconds and not 0x1100 <= code < 0x1200, hex(code)
    assert not {ord(" "), ord("\n")} & (firsts | seconds)


def test_nfkc_by_words_is_nfkc():
    """Random texts over code points that compose, reorder, expand and fold across word and line breaks."""
    import random
    import unicodedata

    from rankzero.data.screen.scan import _MOST_WINDOWS, nfkc

    alphabet = (list("가각나 \n\n  eA.,ㅇㅠ①…㈜．０（ＡΣ") + ["\u0301", "\u0308", "\u0327", "\u3099", "\u1100", "\u1161",
                "\u11a8", "\u3131", "\u314f", "\u00a8", "\u2126", "\u0344", "\uf900", "\u0f73", "\u00b7", "か", "ｶ", "ﾞ",
                "\U0001d400", "\U00011099", "\U000110ba"])
    rng = random.Random(11)
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))) for _ in range(20_000)]
    texts.append("①" * (3 * _MOST_WINDOWS) + " 가 ㅠ" * (3 * _MOST_WINDOWS))  # past the window bound: one call
    for text in texts:
        assert nfkc(text) == unicodedata.normalize("NFKC", text), ascii(text)
