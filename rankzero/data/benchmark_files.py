"""Benchmark files read for scoring: one Suite of multiple-choice items per file, with lm-eval's prompts.

    suites = read_suites(["kmmlu/Law-test.csv", "kobest_copa.jsonl"], shots=5, max_items=500)
    suites[0].name, suites[0].requests()        # "Law-test", [(item, choice, context, continuation), ...]

Formats (the ones --decontaminate reads, decontaminate.py):
- KMMLU's CSV: `question, A, B, C, D, answer` (answer 1..4). The prompt is lm-eval's `kmmlu` template,
  `{question}\\nA. {A}\\nB. {B}\\nC. {C}\\nD. {D}\\n정답：`, and the choices are the letters.
- JSONL, one item a line: a question text (`question`, else the first of decontaminate.QUESTION_FIELDS), `choices`
  (a list of strings) and `answer` (a 0-based index, or the right choice's text; `label` is read as `answer`).
  The prompt is `{question}\\n정답:` and each choice is scored as its text.

`max_items`: a fixed subset, drawn with `seed`, so that scores compare across steps and runs. `shots`: that many
solved examples before each prompt, drawn with `seed` from the file's `-dev` sibling (KMMLU's `X-dev.csv` for
`X-test.csv`) when there is one, else from the items left out of the subset. Every problem is a RankzeroError
naming the file and line.
"""

from __future__ import annotations

import csv
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from rankzero.data.decontaminate import QUESTION_FIELDS, benchmark_files
from rankzero.errors import RankzeroError

LETTERS = "ABCDE"
KMMLU_COLUMNS = ("question", "A", "B", "C", "D", "answer")
TARGET_DELIMITER = " "  # lm-eval's default, between a prompt and its answer
FEWSHOT_DELIMITER = "\n\n"


@dataclass(frozen=True)
class Item:
    line: int  # in its file: what an audit of predictions looks up
    question: str
    choices: tuple[str, ...]  # the texts shown
    answer: int
    letters: bool  # KMMLU: the answer is a letter, the choices are in the prompt

    def prompt(self) -> str:
        if self.letters:
            shown = "".join(f"\n{LETTERS[index]}. {choice}" for index, choice in enumerate(self.choices))
            return f"{self.question.strip()}{shown}\n정답："
        return f"{self.question.strip()}\n정답:"

    def targets(self) -> tuple[str, ...]:
        return tuple(LETTERS[:len(self.choices)]) if self.letters else self.choices


@dataclass(frozen=True)
class Suite:
    name: str
    path: str
    items: tuple[Item, ...]
    shots: tuple[Item, ...] = ()
    in_file: int = 0  # items in the file, before max_items
    settings: dict = field(default_factory=dict)

    def context(self, item: Item) -> str:
        solved = [shot.prompt() + TARGET_DELIMITER + shot.targets()[shot.answer] for shot in self.shots]
        return FEWSHOT_DELIMITER.join([*solved, item.prompt()])

    def requests(self) -> list[tuple[int, int, str, str]]:
        """(item index, choice index, context, continuation) for every choice of every item."""
        return [(index, choice, self.context(item), TARGET_DELIMITER + target)
                for index, item in enumerate(self.items) for choice, target in enumerate(item.targets())]


def read_suites(paths, *, shots: int = 0, max_items: int | None = None, seed: int = 1234) -> list[Suite]:
    suites, names = [], set()
    try:
        files = benchmark_files(paths)
    except RankzeroError as error:  # its words name --decontaminate, the flag it was written for
        raise RankzeroError(str(error).replace("--decontaminate", "--benchmarks", 1)) from None
    for path in files:
        items = read_items(path)
        chosen = sorted(random.Random(seed).sample(range(len(items)), max_items)) \
            if max_items is not None and max_items < len(items) else list(range(len(items)))
        pool = _dev_items(path)
        if pool is None:
            taken = set(chosen)
            pool = [item for index, item in enumerate(items) if index not in taken]
        if shots > len(pool):
            raise RankzeroError(f"{path}: --benchmark_shots {shots} needs {shots} solved examples; its dev split or the "
                                f"items left out of --benchmark_max_items hold {len(pool)}")
        name = re.sub(r"\W+", "_", path.stem).strip("_") or "benchmark"
        name = name if name not in names else f"{name}_{len(names)}"
        names.add(name)
        suites.append(Suite(name, str(path), tuple(items[index] for index in chosen),
                            tuple(random.Random(seed + 1).sample(pool, shots)), len(items),
                            {"shots": shots, "max_items": max_items, "seed": seed}))
    return suites


def _dev_items(path: Path) -> list[Item] | None:
    if not path.stem.endswith("-test"):
        return None
    dev = path.with_name(path.stem[:-len("-test")] + "-dev" + path.suffix)
    return read_items(dev) if dev.is_file() else None


def read_items(path: Path) -> list[Item]:
    suffix = path.suffix.lower()
    try:
        with open(path, encoding="utf-8-sig", newline="" if suffix == ".csv" else None) as handle:
            if suffix == ".csv":
                items = _csv_items(path, handle)
            elif suffix == ".jsonl":
                items = [_json_item(path, number, line) for number, line in enumerate(handle, start=1) if line.strip()]
            else:
                raise RankzeroError(f"{path}: scoring reads KMMLU CSV and JSONL files (one item a line); convert it")
    except UnicodeDecodeError as error:
        raise RankzeroError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    except csv.Error as error:
        raise RankzeroError(f"{path}: not a readable CSV file ({error})") from None
    if not items:
        raise RankzeroError(f"{path}: no benchmark items in this file; give the benchmark's items")
    return items


def _csv_items(path: Path, handle) -> list[Item]:
    reader = csv.DictReader(handle)
    missing = [column for column in KMMLU_COLUMNS if column not in (reader.fieldnames or ())]
    if missing:
        raise RankzeroError(f"{path}:1: no {', '.join(missing)} column (KMMLU's CSV: "
                            f"{', '.join(KMMLU_COLUMNS)}, answer 1..4)")
    items = []
    for number, row in enumerate(reader, start=2):
        if any(row.get(column) is None for column in KMMLU_COLUMNS):
            raise RankzeroError(f"{path}:{number}: fewer fields than the header's {len(reader.fieldnames)}")
        answer = row["answer"].strip()
        if answer not in ("1", "2", "3", "4"):
            raise RankzeroError(f"{path}:{number}: answer {answer!r}; KMMLU's answer is 1, 2, 3 or 4")
        items.append(Item(number, row["question"], tuple(row[letter] for letter in "ABCD"), int(answer) - 1, True))
    return items


def _json_item(path: Path, number: int, line: str) -> Item:
    where = f"{path}:{number}"
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise RankzeroError(f"{where}: not valid JSON ({error.msg})") from None
    if not isinstance(record, dict):
        raise RankzeroError(f"{where}: expected an object with question, choices and answer")
    question = next((record[name] for name in QUESTION_FIELDS if isinstance(record.get(name), str)), None)
    choices = record.get("choices")
    if question is None:
        raise RankzeroError(f"{where}: no question text (looked for {', '.join(QUESTION_FIELDS)})")
    if not (isinstance(choices, list) and len(choices) >= 2 and all(isinstance(c, str) for c in choices)):
        raise RankzeroError(f"{where}: \"choices\" must be a list of at least two strings")
    answer = record.get("answer", record.get("label"))
    if isinstance(answer, str) and answer in choices:
        answer = choices.index(answer)
    if isinstance(answer, bool) or not isinstance(answer, int) or not 0 <= answer < len(choices):
        raise RankzeroError(f"{where}: \"answer\" {answer!r} is neither a 0-based index into the {len(choices)} "
                            "choices nor one of them")
    return Item(number, question, tuple(choices), answer, False)
