"""Benchmark files read for scoring (issue 45): what cannot be scored is one error naming the file and line, shots
come from the dev split (never the item itself), and the item cap keeps a fixed subset whose prompts do not
depend on it. That the prompts are lm-eval's: test_benchmark_scores.py."""

from __future__ import annotations

import json
import sys

import pytest

from benchmark_items import write_benchmark
from helpers import REPO, run
from rankzero.data.screen.benchmark_files import read_suites
from rankzero.errors import RankzeroError

KMMLU_HEADER = "question,A,B,C,D,answer\n"
GOOD_ROW = "다음 중 옳은 것은?,사과,배,감,귤,2\n"
COPA = {"premise": "비가 왔다.", "question": "결과", "alternative_1": "우산을 썼다.", "alternative_2": "해가 떴다.",
        "label": 0}


def jsonl(*records) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in records)


BAD_FILES = [
    ("empty-test.jsonl", "", None, "no benchmark items in this file (it is empty)"),
    ("copa-test.jsonl", jsonl(COPA, COPA, '{"premise": "비가'), 3, "not valid JSON"),
    ("Law-test.csv", KMMLU_HEADER + GOOD_ROW + "다음 중 틀린 것은?,사과,배,감,귤,\n", 3,
     'its "answer" is ""; it must be a whole number from 1 to 4'),
    ("Law-test.csv", KMMLU_HEADER + GOOD_ROW + "다음 중 틀린 것은?,사과,배,감,귤,5\n", 3,
     'its "answer" is 5; it must be a whole number from 1 to 4'),
    ("copa-test.jsonl", jsonl(COPA, {**COPA, "label": 2}), 2,
     'its "label" is 2; it must be a whole number from 0 to 1'),
    ("copa-test.jsonl", jsonl(COPA, {**COPA, "label": True}), 2, 'its "label" is true'),
    ("notes-test.jsonl", jsonl({"text": "그냥 문서"}), 1, "not a benchmark item rankzero can score (its fields: text)"),
    ("mixed-test.jsonl", jsonl(COPA, {"sentence": "좋다", "label": 1}), 2,
     "a kobest_sentineg item in benchmark 'mixed', whose first item"),
    ("click.jsonl", jsonl({"id": "a", "paragraph": "", "question": "무엇?", "choices": ["가", "나", "다", "라"],
                           "answer": "마"}), 1, "its \"answer\" '마' is none of its choices"),
    ("haerae.jsonl", jsonl({"query": "무엇?", "answer": "F"}), 1, "HAE-RAE answers are one of (A), (B)"),
]


@pytest.mark.parametrize("name,content,line,message", BAD_FILES,
                         ids=[f"{name}-{message[:24]}" for name, _, _, message in BAD_FILES])
def test_what_cannot_be_scored_is_one_error_naming_file_and_line(tmp_path, name, content, line, message):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(RankzeroError) as error:
        read_suites([path])
    where = f"{path}:{line}: " if line else f"{path}: "
    assert str(error.value).startswith(where) and message in str(error.value), str(error.value)
    assert "\n" not in str(error.value)


def test_evaluate_reports_a_bad_file_in_one_line_before_loading_a_model(tmp_path):
    """Exit 2, one line, no traceback; the model dir needs only its config for the arguments to pass."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    path = tmp_path / "Law-test.csv"
    path.write_text(KMMLU_HEADER + "다음 중 틀린 것은?,사과,배,감,귤,7\n", encoding="utf-8")
    result = run([sys.executable, REPO / "scripts" / "evaluate.py", tmp_path / "model", "--benchmarks", path],
                 check=False)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (f'error: {path}:2: its "answer" is 7; it must be a whole number from 1 to 4 (the right '
                             "choice)\n")


def test_shots_come_from_the_dev_file_of_the_same_subject(tmp_path):
    write_benchmark(tmp_path / "kmmlu", "kmmlu", {"dev": 5, "test": 6})
    write_benchmark(tmp_path / "other", "kmmlu", {"dev": 5, "test": 4}, seed=1)
    (tmp_path / "other" / "Law-dev.csv").rename(tmp_path / "kmmlu" / "Math-dev.csv")
    (tmp_path / "other" / "Law-test.csv").rename(tmp_path / "kmmlu" / "Math-test.csv")
    (suite,) = read_suites([tmp_path / "kmmlu"], shots=3)
    dev = {}
    for subject in ("Law", "Math"):  # the dev items' prompts, read as a benchmark of their own
        (tmp_path / f"{subject}.csv").write_bytes((tmp_path / "kmmlu" / f"{subject}-dev.csv").read_bytes())
        dev[subject] = read_suites([tmp_path / f"{subject}.csv"])[0].items
    assert suite.name == "kmmlu" and len(suite.items) == 10 and suite.items_in_files == 10
    for question in suite.items:
        subject = "Law" if "Law-test" in question.where else "Math"
        shots = question.context.split("\n\n")[:-1]
        assert len(shots) == 3
        for shot in shots:  # a dev item of the same subject, with its answer
            assert any(shot == f"{d.context} {d.choices[d.gold]}" for d in dev[subject]), shot


def test_without_a_dev_split_an_item_is_never_its_own_shot(tmp_path):
    """HAE-RAE has one split: shots are the other items (five of six: every draw must leave the item out)."""
    (path,) = write_benchmark(tmp_path, "haerae", {"": 6})
    items = read_suites([path], shots=5)[0].items
    texts = [question.context.split("\n\n")[-1] for question in items]
    for text, question in zip(texts, items):
        shots = [shot.rsplit(" ", 1)[0] for shot in question.context.split("\n\n")[:-1]]
        assert text not in shots and sorted(shots) == sorted(t for t in texts if t != text)
    with pytest.raises(RankzeroError, match=r"haerae.jsonl: --benchmark_shots 6 needs 7 items of 'haerae'"):
        read_suites([path], shots=6)


def test_the_item_cap_keeps_a_fixed_subset_whose_prompts_do_not_depend_on_it(tmp_path):
    write_benchmark(tmp_path / "copa", "kobest_copa", {"train": 8, "test": 40})
    everything = {q.id: q for q in read_suites([tmp_path / "copa"], shots=2)[0].items}
    (capped,) = read_suites([tmp_path / "copa"], shots=2, max_items=10)
    assert capped.items_in_files == 40 and len(capped.items) == 10
    again = read_suites([tmp_path / "copa"], shots=2, max_items=10)[0]
    assert [q.id for q in capped.items] == [q.id for q in again.items]
    assert all(everything[q.id] == q for q in capped.items)
    assert [q.id for q in capped.items] != [q.id for q in read_suites([tmp_path / "copa"], shots=2, max_items=10,
                                                                       seed=7)[0].items]
    assert len(read_suites([tmp_path / "copa"], max_items=100)[0].items) == 40


def test_files_named_alike_are_one_benchmark_and_directories_one_each(tmp_path):
    law_dev, law_test = write_benchmark(tmp_path / "kmmlu", "kmmlu", {"dev": 5, "test": 3})
    (copa,) = write_benchmark(tmp_path, "kobest_copa", {"test": 4})
    suites = read_suites([law_dev, law_test, tmp_path / "kmmlu", copa], shots=1)
    assert [(s.name, s.shape, len(s.items)) for s in suites] == [("Law", "kmmlu", 3), ("kmmlu", "kmmlu", 3),
                                                                 ("kobest_copa", "kobest_copa", 4)]
    with pytest.raises(RankzeroError, match=r"Law-dev.csv: benchmark 'Law' has only dev/train/validation items"):
        read_suites([law_dev])
