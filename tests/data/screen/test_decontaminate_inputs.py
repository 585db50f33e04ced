"""What --decontaminate is given, at its edges (issue 47, item 8): a benchmark file without items, a FIFO, ids that
are not strings or numbers, and an --eval_dataset that decontamination empties are each one line naming the file
or the flag, never a silent "0 items", a wrong cause, or an id written as "['a']"."""

from __future__ import annotations

import json
import os
import sys

import pytest

from helpers import REPO, data_args, korean_documents, prepare, quiet_env, run, write_jsonl
from rankzero.data.screen.decontaminate import read_benchmarks
from rankzero.errors import ConfigError, RankzeroError

QUESTION = "다음 중 대한민국 헌법상 국회의 권한에 속하지 않는 것으로 가장 적절한 것은 무엇인가?"


@pytest.mark.parametrize("name, content, why", [
    ("empty.csv", "", "it is empty"),
    ("header.csv", "question,A,B,C,D,answer\n", "a header without rows"),
    ("blank.jsonl", "\n\n", "no line holds a record"),
    ("list.json", "[]", "an empty list"),
    ("wrapped.json", '{"test": []}', "an empty list"),
])
def test_a_benchmark_file_without_items_is_an_error_naming_it(tmp_path, name, content, why):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(RankzeroError) as error:
        read_benchmarks([path])
    assert str(error.value) == (f"{path}: no benchmark items in this file ({why}): nothing would be decontaminated "
                                "against it; give the benchmark's items, or leave the file out of --decontaminate")


def test_an_empty_file_in_a_benchmark_directory_is_named_too(tmp_path):
    (tmp_path / "Law-test.csv").write_text(f"question,answer\n{QUESTION},1\n", encoding="utf-8")
    (tmp_path / "Art-test.csv").write_text("question,answer\n", encoding="utf-8")
    with pytest.raises(RankzeroError, match=r"Art-test.csv: no benchmark items in this file \(a header without rows\)"):
        read_benchmarks([tmp_path])


def test_a_header_only_csv_stops_the_prepare_in_one_line(tmp_path, tokenizer_dir):
    corpus = write_jsonl(tmp_path / "train.jsonl", [{"text": text} for text in korean_documents(20)])
    benchmark = tmp_path / "kmmlu.csv"
    benchmark.write_text("question,A,B,C,D,answer\n", encoding="utf-8")
    result = run([sys.executable, REPO / "train.py", "--tokenize_only", "--dataset", corpus, "--tokenizer_path",
                  tokenizer_dir, "--cache_dir", tmp_path / "cache", "--decontaminate", benchmark], check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {benchmark}: no benchmark items in this file (a header without rows): nothing would be "
        "decontaminated against it; give the benchmark's items, or leave the file out of --decontaminate")
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("manifest.json"))


def test_a_fifo_is_named_as_one_at_parse_time(tmp_path, tokenizer_dir):
    fifo = tmp_path / "bench.jsonl"
    os.mkfifo(fifo)
    problem = (f"--decontaminate {fifo}: not a regular file or directory (a FIFO, socket or device); give benchmark "
               "files or a directory of them")
    with pytest.raises(ConfigError) as error:
        data_args(tokenizer_dir, tmp_path / "cache", [tmp_path / "x.jsonl"], decontaminate=[fifo])
    assert problem in error.value.problems
    with pytest.raises(RankzeroError, match=r"not a regular file or directory \(a FIFO, socket or device\)"):
        read_benchmarks([fifo])  # the plan's reading, if the path became one after the parse
    result = run([sys.executable, REPO / "train.py", "--tokenize_only", "--dataset", tmp_path / "x.jsonl",
                  "--tokenizer_path", tokenizer_dir, "--decontaminate", fifo], check=False, env=quiet_env())
    assert result.returncode == 2 and "Traceback" not in result.stderr and problem in result.stderr, result.stderr


@pytest.mark.parametrize("record, shown", [
    ({"id": ["a"]}, 'its "id" is list ["a"]'),
    ({"id": {"n": 1}}, 'its "id" is dict {"n": 1}'),
    ({"idx": True}, 'its "idx" is bool true'),
    ({"id": 1.5}, 'its "id" is float 1.5'),
    ({"benchmark": ["kmmlu"]}, 'its "benchmark" is list ["kmmlu"]'),
])
def test_an_id_that_is_not_a_string_or_number_names_the_item(tmp_path, record, shown):
    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps({"question": QUESTION, "id": "ok"}, ensure_ascii=False) + "\n"
                    + json.dumps({"question": QUESTION, **record}, ensure_ascii=False) + "\n", encoding="utf-8")
    key = shown.split('"')[1]
    with pytest.raises(RankzeroError) as error:
        read_benchmarks([path])
    assert str(error.value).startswith(f"{path}:2: {shown}; an item's {key} is a string or a whole number")


def test_numbers_and_missing_ids_are_still_ids(tmp_path):
    path = tmp_path / "items.jsonl"
    path.write_text("\n".join(json.dumps(record, ensure_ascii=False) for record in [
        {"question": QUESTION, "id": 7}, {"question": QUESTION, "idx": "b"}, {"question": QUESTION, "id": None}]),
        encoding="utf-8")
    assert [item.id for item in read_benchmarks([path])] == ["7", "b", "items:3"]


def test_an_eval_set_emptied_by_decontamination_is_blamed_on_it(tmp_path, tokenizer_dir):
    """The eval set given to --decontaminate as well (a benchmark held out as validation): every one of its documents
    holds its own item. The error names decontamination, not the quality filter (which is off)."""
    training = write_jsonl(tmp_path / "train.jsonl", [{"text": text} for text in korean_documents(60)])
    evaluation = write_jsonl(tmp_path / "eval.jsonl", [{"text": text} for text in korean_documents(8, seed=5)])
    with pytest.raises(RankzeroError) as caught:
        prepare(data_args(tokenizer_dir, tmp_path / "cache", [training], eval_dataset=[evaluation],
                          decontaminate=[evaluation]), seed=0)
    message = str(caught.value)
    assert message.startswith(f"validation: all 8 documents of --eval_dataset {evaluation} were removed "
                              "(benchmark_contamination: 8) by benchmark decontamination (--decontaminate); "), message
    assert "quality" not in message and "(--decontaminate applies to it too)" in message


def test_a_corpus_emptied_by_decontamination_names_the_screen(tmp_path, tokenizer_dir):
    corpus = write_jsonl(tmp_path / "bench_copy.jsonl", [{"text": text} for text in korean_documents(6, seed=9)])
    with pytest.raises(RankzeroError) as caught:
        prepare(data_args(tokenizer_dir, tmp_path / "cache", [corpus], decontaminate=[corpus]), seed=0)
    assert str(caught.value) == ("screen (--decontaminate, --pii): all 6 documents were removed "
                                 "(benchmark_contamination: 6); nothing is left to prepare")
