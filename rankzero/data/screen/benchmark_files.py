"""Benchmark files read for scoring: each item turned into lm-evaluation-harness's prompt and choices.

    suites = read_suites(["kmmlu/", "kobest_boolq-test.jsonl"], shots=5, max_items=500)
    for suite in suites:                      # one per path given (files named alike join: Law-dev + Law-test)
        suite.name, suite.items[0].context, suite.items[0].continuations()   # what score_suites scores

The shapes rankzero scores, told apart by their fields, each with the prompt of lm-eval's task (0.4.x YAMLs):
  kmmlu             question, A, B, C, D, answer (1-4)            "{question}\\nA. ..\\nD. ..\\n정답：" → " A".." D"
  kobest_boolq      paragraph, question, label (0/1)              "{paragraph} 질문: {question} 답변: " → 아니오 / 예
  kobest_copa       premise, question (원인/결과), alternative_1/2, label
  kobest_hellaswag  context, ending_1..ending_4, label (0-3)      "문장: {context}" → the endings
  kobest_sentineg   sentence, label                               "문장: {sentence} 긍부정:" → 부정 / 긍정
  kobest_wic        context_1, context_2, word, label
  haerae            query, answer ("(A)".."(E)")                  "{query}" → (A)..(E)
  click             paragraph, question, choices, answer (a choice's text), id
A file is a CSV (a header row), JSONL, or JSON (a list, or an object holding one). Its split is in its name
(`Law-dev.csv`, `copa_train.jsonl`) or in a record's `split` field: test items (or items of no split) are scored,
and shots come, with a fixed seed, from the same subject's (the file's name without its split) dev items, else
its train items, else its validation items (lm-eval's order), else from its other test items, never the item
itself; a split that gives no shots is not read further. Shots are joined as
lm-eval joins them: "{text} {answer}\\n\\n" per shot, then the item's text; lm-eval's sampler is followed draw for
draw, so with its seed (1234) an item's shots are lm-eval's. `max_items` keeps a seeded subset of each
benchmark, drawn after the shots, so an item's prompt does not depend on the cap.
Anything that cannot be scored is one RankzeroError naming the file and line.
"""

from __future__ import annotations

import csv
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

from rankzero.errors import RankzeroError

SUFFIXES = (".csv", ".jsonl", ".json")
TARGET_DELIMITER, FEWSHOT_DELIMITER = " ", "\n\n"  # lm-eval's defaults, which its Korean tasks keep
SHOT_SPLITS = ("dev", "train", "validation")
_SPLIT_IN_NAME = re.compile(r"^(?P<subject>.+?)[-_](?P<split>dev|train|validation|test)$", re.IGNORECASE)
_LETTERS = "ABCDE"


@dataclass(frozen=True)
class Record:
    path: Path
    number: int  # the line of a CSV or JSONL file, the index in a JSON list
    fields: object

    @property
    def where(self) -> str:
        json_list = self.path.suffix.lower() == ".json"
        return f"{self.path} item {self.number}" if json_list else f"{self.path}:{self.number}"


@dataclass(frozen=True)
class Question:
    """One item as lm-eval's task asks it: the prompt, the choices (acc_norm divides by their characters)."""

    id: str
    where: str
    context: str
    choices: tuple[str, ...]
    gold: int

    def continuations(self) -> list[str]:
        return [TARGET_DELIMITER + choice for choice in self.choices]


@dataclass(frozen=True)
class Suite:
    name: str
    shape: str
    items: tuple[Question, ...]
    shots: int
    items_in_files: int  # before max_items
    seed: int


# ---------------------------------------------------------------------------------------------
# Files and records (shared with decontaminate.py)


def benchmark_files(paths, flag: str = "--decontaminate") -> list[Path]:
    """Every benchmark file under `paths` (a directory is read whole), sorted; RankzeroError for a path
    that is missing or holds none."""
    files = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
            if not found:
                raise RankzeroError(f"{flag} {raw}: no {', '.join(SUFFIXES)} file in this directory")
            files += found
        elif path.is_file():
            if path.suffix.lower() not in SUFFIXES:
                raise RankzeroError(f"{flag} {raw}: not a benchmark file; give {', '.join(SUFFIXES)} "
                                    "files or a directory of them")
            files.append(path)
        elif path.exists():  # reading a FIFO would wait for a writer; a device or socket holds no benchmark
            raise RankzeroError(f"{flag} {raw}: not a regular file or directory (a FIFO, socket or device); "
                                f"give {', '.join(SUFFIXES)} files or a directory of them")
        else:
            raise RankzeroError(f"{flag} {raw}: no such file or directory")
    return files


def file_records(path: Path, flag: str = "--decontaminate") -> list[Record]:
    """The records of one benchmark file: a CSV's rows (by header), a JSONL file's lines, a JSON list's items."""
    suffix = path.suffix.lower()
    try:
        with open(path, encoding="utf-8-sig", newline="" if suffix == ".csv" else None) as handle:
            if suffix == ".csv":
                return [Record(path, number, row) for number, row in enumerate(csv.DictReader(handle), start=2)]
            if suffix == ".jsonl":
                return [Record(path, number, _json(line, path, number, flag))
                        for number, line in enumerate(handle, start=1) if line.strip()]
            data = _json(handle.read(), path, None, flag)
    except UnicodeDecodeError as error:
        raise RankzeroError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    except csv.Error as error:
        raise RankzeroError(f"{path}: not a readable CSV file ({error})") from None
    if isinstance(data, dict):  # {"data": [...]} or {"split": [...]}
        data = next((value for value in data.values() if isinstance(value, list)), None)
    if not isinstance(data, list):
        raise RankzeroError(f"{path}: expected a JSON list of items (or an object holding one)")
    return [Record(path, number, record) for number, record in enumerate(data)]


def _json(text: str, path: Path, line: int | None, flag: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        where = f"{path}:{line}" if line is not None else f"{path}:{error.lineno}"
        raise RankzeroError(f"{where}: not valid JSON ({error.msg}); fix or remove this file from {flag}") from None


# ---------------------------------------------------------------------------------------------
# Shapes: lm-eval's doc_to_text / doc_to_choice / doc_to_target for each task family


def _text(record: Record, name: str) -> str:
    value = record.fields.get(name)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        shown = "missing" if value is None else type(value).__name__
        raise RankzeroError(f"{record.where}: its \"{name}\" is {shown}; a benchmark item needs it as text")
    return value


def _index(record: Record, name: str, count: int, first: int = 0) -> int:
    value = record.fields.get(name)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not first <= value < first + count:
        shown = "missing" if value is None else json.dumps(value, ensure_ascii=False)[:40]
        raise RankzeroError(f"{record.where}: its \"{name}\" is {shown}; it must be a whole number from {first} to "
                            f"{first + count - 1} (the right choice)")
    return value - first


def _kmmlu(r):
    question = f"{_text(r, 'question').strip()}\n" + "".join(f"{letter}. {_text(r, letter)}\n" for letter in "ABCD")
    return question + "정답：", ("A", "B", "C", "D"), _index(r, "answer", 4, first=1)  # a full-width colon, as lm-eval


def _boolq(r):
    return f"{_text(r, 'paragraph')} 질문: {_text(r, 'question')} 답변: ", ("아니오", "예"), _index(r, "label", 2)


def _copa(r):
    connectors = {"원인": " 왜냐하면", "결과": " 그래서"}
    question = _text(r, "question").strip()
    if question not in connectors:
        raise RankzeroError(f"{r.where}: its \"question\" is {question!r}; KoBEST COPA asks 원인 or 결과")
    # lm-eval writes f"{premise} {connector}" with the connector's own space: two spaces, kept for equal scores.
    return (f"{_text(r, 'premise')} {connectors[question]}", (_text(r, "alternative_1"), _text(r, "alternative_2")),
            _index(r, "label", 2))


def _hellaswag(r):
    endings = tuple(_text(r, f"ending_{number}") for number in range(1, 5))
    return f"문장: {_text(r, 'context')}", endings, _index(r, "label", 4)


def _sentineg(r):
    return f"문장: {_text(r, 'sentence')} 긍부정:", ("부정", "긍정"), _index(r, "label", 2)


def _wic(r):
    text = (f"문장1: {_text(r, 'context_1')} 문장2: {_text(r, 'context_2')} 두 문장에서 {_text(r, 'word')}가 "
            "같은 뜻으로 쓰였나?")
    return text, ("아니오", "예"), _index(r, "label", 2)


def _haerae(r):
    choices = tuple(f"({letter})" for letter in _LETTERS)  # lm-eval's five, whatever the query lists
    answer = _text(r, "answer").strip()
    if answer not in choices:
        raise RankzeroError(f"{r.where}: its \"answer\" is {answer!r}; HAE-RAE answers are one of {', '.join(choices)}")
    return _text(r, "query"), choices, choices.index(answer)


def _click(r):
    options = r.fields.get("choices")
    if not isinstance(options, list) or len(options) not in (4, 5) or not all(isinstance(o, str) for o in options):
        raise RankzeroError(f"{r.where}: its \"choices\" must be a list of 4 or 5 texts (CLIcK)")
    answer = _text(r, "answer")
    if answer not in options:
        raise RankzeroError(f"{r.where}: its \"answer\" {answer[:40]!r} is none of its choices (CLIcK answers with "
                            "a choice's text)")
    context, question = r.fields.get("paragraph") or "", _text(r, "question")
    listed = f"보기:\nA:{options[0]}, B: {options[1]}, C: {options[2]}, D: {options[3]}\n정답:"  # lm-eval shows four
    if context:
        text = ("주어진 맥락을 천천히 읽고, 질문에 대한 적절한 정답을 A, B, C, D 중에 골라 알파벳 하나로 답하시오.\n\n"
                f"맥락: {context}\n질문: {question}\n{listed}")
    else:
        text = f"주어진 질문을 천천히 읽고, 적절한 정답을 A, B, C, D 중에 골라 알파벳 하나로 답하시오.\n\n질문: {question}\n{listed}"
    return text, tuple(_LETTERS[:len(options)]), options.index(answer)


# (shape, the fields that tell it, its prompt), checked in this order: the first whose fields a record has
SHAPES = (
    ("kmmlu", ("question", "A", "B", "C", "D", "answer"), _kmmlu),
    ("click", ("paragraph", "question", "choices", "answer"), _click),
    ("kobest_copa", ("premise", "question", "alternative_1", "alternative_2", "label"), _copa),
    ("kobest_boolq", ("paragraph", "question", "label"), _boolq),
    ("kobest_hellaswag", ("context", "ending_1", "ending_2", "ending_3", "ending_4", "label"), _hellaswag),
    ("kobest_wic", ("context_1", "context_2", "word", "label"), _wic),
    ("kobest_sentineg", ("sentence", "label"), _sentineg),
    ("haerae", ("query", "answer"), _haerae),
)


def shape_of(record: Record) -> str:
    if not isinstance(record.fields, dict):
        raise RankzeroError(f"{record.where}: expected an object (a benchmark item), got "
                            f"{type(record.fields).__name__}")
    for name, fields, _ in SHAPES:
        if all(record.fields.get(field) is not None for field in fields):
            return name
    raise RankzeroError(f"{record.where}: not a benchmark item rankzero can score (its fields: "
                        f"{', '.join(sorted(map(str, record.fields))[:8]) or 'none'}); scored shapes: "
                        + "; ".join(f"{name} ({', '.join(fields)})" for name, fields, _ in SHAPES))


# ---------------------------------------------------------------------------------------------
# Suites


def _subject_and_split(record: Record) -> tuple[str, str]:
    match = _SPLIT_IN_NAME.match(record.path.stem)
    subject, split = (match["subject"], match["split"].lower()) if match else (record.path.stem, "test")
    named = record.fields.get("split")
    return subject, (named.lower() if isinstance(named, str) and named.strip() else split)


def _suite_name(raw) -> str:
    path = Path(raw).expanduser()
    if path.is_dir():
        return path.resolve().name
    match = _SPLIT_IN_NAME.match(path.stem)
    return match["subject"] if match else path.stem


def _draw_shots(rng: random.Random, pool: list, shots: int, own: int | None, records: list[Record]) -> list[int]:
    """lm-eval's ContextSampler.sample, draw for draw: k from a separate shot split; k + 1 from the items themselves,
    then the item (and any copy of it) left out."""
    if own is None:
        return rng.sample(pool, shots)
    drawn = [index for index in rng.sample(pool, shots + 1) if records[index].fields != records[own].fields][:shots]
    if len(drawn) < shots:
        drawn = rng.sample([index for index in pool if records[index].fields != records[own].fields], shots)
    return drawn


def _questions(name: str, records: list[Record], shots: int, seed: int) -> tuple[str, list[Question]]:
    shapes = {record.where: shape_of(record) for record in records}
    shape = shapes[records[0].where]
    for record in records:
        if shapes[record.where] != shape:
            raise RankzeroError(f"{record.where}: a {shapes[record.where]} item in benchmark {name!r}, whose first "
                                f"item ({records[0].where}) is {shape}; give each benchmark's files as their own path")
    prompt = next(make for shape_name, _, make in SHAPES if shape_name == shape)
    asked = [prompt(record) for record in records]
    subjects: dict[str, dict[str, list[int]]] = {}
    for index, record in enumerate(records):
        subject, split = _subject_and_split(record)
        subjects.setdefault(subject, {}).setdefault(split if split in SHOT_SPLITS else "test", []).append(index)
    questions = []
    for subject, splits in subjects.items():
        splits.setdefault("test", [])
        # lm-eval's rule: the task's few-shot split (KMMLU: dev), else its training split, else its validation split
        pool = next((splits[kind] for kind in SHOT_SPLITS if kind in splits), None)
        pool, separate = (pool, True) if pool is not None else (splits["test"], False)
        if shots and len(pool) < shots + (0 if separate else 1):
            raise RankzeroError(f"{records[(pool or splits['test'])[0]].path}: --benchmark_shots {shots} needs "
                                f"{shots + (0 if separate else 1)} items of {subject!r} to draw from "
                                f"({'its dev/train split' if separate else 'the item itself left out'}); it has "
                                f"{len(pool)}: give fewer shots or a dev file")
        rng = random.Random(seed)  # one sampler per subject, as lm-eval has one per task
        for index in splits["test"]:
            drawn = _draw_shots(rng, pool, shots, None if separate else index, records) if shots else []
            context = "".join(f"{asked[i][0]}{TARGET_DELIMITER}{asked[i][1][asked[i][2]]}{FEWSHOT_DELIMITER}"
                              for i in drawn)
            identifier, where = records[index].fields.get("id"), records[index].where
            text, choices, gold = asked[index]
            questions.append(Question(str(identifier) if isinstance(identifier, (str, int)) else where, where,
                                      context + text, choices, gold))
    if not questions:
        raise RankzeroError(f"{records[0].path}: benchmark {name!r} has only {'/'.join(SHOT_SPLITS)} items (shots); "
                            "give its test file too")
    return shape, questions


def read_suites(paths, *, shots: int = 0, max_items: int | None = None, seed: int = 1234,
                flag: str = "--benchmarks") -> list[Suite]:
    """One Suite per benchmark: each path given (a directory, or files whose names differ only by their split)."""
    if shots < 0:
        raise RankzeroError(f"--benchmark_shots {shots}: give 0 or more")
    if max_items is not None and max_items < 1:
        raise RankzeroError(f"--benchmark_max_items {max_items}: give 1 or more (or leave it out for every item)")
    grouped: dict[str, list[Record]] = {}
    for raw in paths:
        for path in benchmark_files([raw], flag):
            records = file_records(path, flag)
            if not records:
                why = "it is empty" if path.stat().st_size == 0 else "no records"
                raise RankzeroError(f"{path}: no benchmark items in this file ({why}); give the benchmark's items, or "
                                    f"leave the file out of {flag}")
            grouped.setdefault(_suite_name(raw), []).extend(records)
    suites = []
    for name, records in grouped.items():
        shape, questions = _questions(name, records, shots, seed)
        kept = questions
        if max_items is not None and len(questions) > max_items:
            kept = [questions[i] for i in sorted(random.Random(seed).sample(range(len(questions)), max_items))]
        suites.append(Suite(name, shape, tuple(kept), shots, len(questions), seed))
    return suites
