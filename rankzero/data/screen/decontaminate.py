"""Benchmark decontamination: training documents that contain an evaluation item are found and dropped.

    items = read_benchmarks(["kmmlu/", "click.json"])         # KMMLU CSV, KoBEST/LogicKor JSONL, CLIcK JSON, ...
    index = ContaminationIndex(items)                        # once per process that filters
    found = index.find(texts)                                # per document: the indices of the items it holds
    identity = benchmark_identity(paths)                     # what the prepared data's fingerprint hashes

The files are found and read by benchmark_files.py (shared with scoring: the same records, the same errors).

An item is *found* in a document by either of two rules, both on normalised text (NFKC, lower case,
punctuation and symbols folded to spaces: `words_of`):

- word n-grams (N = 8: Korean words carry their particles, so 8 of them are about as specific as
  GPT-3's 13 English words; bench/pii_bench.py measures 5, 8 and 13): the document holds at least half of the
  n-grams of the item's question (the choices' n-grams count towards it too). One shared sentence is
  not enough, and an n-gram that occurs in COMMON_ITEMS or more items (an exam's boilerplate, a poem
  quoted by several questions) is not indexed at all;
- the whole question, spacing ignored (reposts re-space Korean freely), for question parts of at least
  MIN_HANGUL Hangul syllables; a question text shared by COMMON_ITEMS or more items is a template and
  is not indexed.

Both are lookups of 64-bit hashes, batched over a chunk of documents: the n-grams at every word position,
and fixed-width windows of the spaceless text at every WINDOW_STEP-th position (each indexed question part
is indexed at every position, so one of the document's sampled windows falls inside it). One compiled pass
(scan.py) normalises the text, hashes them and keeps only those a bitmap of the index's keys lets through;
those few are looked up in sorted numpy arrays, and a document sharing enough sampled windows with a question to
hold it is verified by a substring test.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xxhash

from rankzero.data.screen.benchmark_files import benchmark_files, file_records
from rankzero.data.screen.scan import Bitmap, code_points, letters, prepare, scan, scan_texts
from rankzero.errors import RankzeroError

N = 8
COMMON_ITEMS = 5
MIN_SHARE = 0.5
# 12, not 20: a third of KMMLU's criminal-law questions have fewer than 20 Hangul syllables, and at 12 no
# real document of ko_real_dev matched (bench/RESULTS.md, "Personal information and contamination").
MIN_HANGUL = 12
WINDOW, WINDOW_STEP = 8, 4  # a question part of >= WINDOW + WINDOW_STEP - 1 characters is always sampled

_PUNCTUATION = re.compile(r"[^\w\s]|_")  # faster in re than [\W_]+, the spaces go with str.split
_HANGUL = re.compile(r"[가-힣]")
# Fields that hold an item's question text, in reading order, and its choices, across the formats above.
QUESTION_FIELDS = ("paragraph", "passage", "context", "premise", "sentence", "question", "questions", "query",
                   "instruction", "prompt", "text")
CHOICE_FIELDS = ("choices", "options", "A", "B", "C", "D", "E", "alternative_1", "alternative_2", "ending_1",
                 "ending_2", "ending_3", "ending_4")


@dataclass(frozen=True)
class Item:
    benchmark: str
    id: str
    parts: tuple[str, ...]  # the question's texts (a passage, the question proper)
    choices: tuple[str, ...]


def words_of(text: str) -> list[str]:
    """The words of the normalised text: NFKC, lower case, punctuation as spaces. The definition that
    scan.py's kernel computes per character (tests/data/screen/test_decontaminate.py checks they agree)."""
    return _PUNCTUATION.sub(" ", prepare(text).lower()).split()


# ---------------------------------------------------------------------------------------------
# Reading benchmark files


def benchmark_identity(paths) -> dict:
    """What the fingerprint hashes: each file's path and the xxh3-64 of all its bytes."""
    digests = []
    for path in benchmark_files(paths):
        digest = xxhash.xxh3_64()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        digests.append({"path": str(path), "xxh3_64": digest.hexdigest()})
    return {"files": digests, "rules": {"n": N, "common_items": COMMON_ITEMS, "min_share": MIN_SHARE,
                                        "min_hangul": MIN_HANGUL}}


def read_benchmarks(paths) -> list[Item]:
    """The items of every benchmark file under `paths`; a file's benchmark is its record's `benchmark`
    field, else the directory named on the command line, else the file's name."""
    items = []
    for raw in paths:
        root = Path(raw).expanduser()
        for path in benchmark_files([raw]):
            default = root.name if root.is_dir() else path.stem
            read = _read_file(path, default)
            if not read:  # unsaid, the prepare would decontaminate against nothing and say it had
                raise RankzeroError(f"{path}: no benchmark items in this file ({_nothing_in(path)}): nothing would be "
                                    "decontaminated against it; give the benchmark's items, or leave the file out of "
                                    "--decontaminate")
            items += read
    return items


def _nothing_in(path: Path) -> str:
    if path.stat().st_size == 0:
        return "it is empty"
    return {".csv": "a header without rows", ".jsonl": "no line holds a record"}.get(path.suffix.lower(),
                                                                                     "an empty list")


def _read_file(path: Path, benchmark: str) -> list[Item]:
    return [_item(record.fields, benchmark, record.where, path, record.number) for record in file_records(path)]


def _texts(value) -> list[str]:
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, list):
        return [text for element in value for text in _texts(element)]
    if isinstance(value, dict):  # {"text": [...], "label": [...]}
        return _texts(value.get("text", []))
    return []


def _item(record, benchmark: str, where: str, path: Path, number: int) -> Item:
    if not isinstance(record, dict):
        raise RankzeroError(f"{where}: expected an object with a question or a text, got {type(record).__name__}")
    parts = tuple(text for name in QUESTION_FIELDS for text in _texts(record.get(name)))
    if not parts:
        raise RankzeroError(f"{where}: no question text (looked for {', '.join(QUESTION_FIELDS)})")
    choices = tuple(text for name in CHOICE_FIELDS for text in _texts(record.get(name)))
    identifier = record.get("id", record.get("idx"))
    named = record.get("benchmark")
    for key, value in (("id" if "id" in record else "idx", identifier), ("benchmark", named)):
        # str() of a list or an object would name the item "['a']" in contaminated_items.jsonl
        if value is not None and (isinstance(value, bool) or not isinstance(value, (str, int))):
            raise RankzeroError(f"{where}: its \"{key}\" is {type(value).__name__} {json.dumps(value)[:60]}; an item's "
                                f"{key} is a string or a whole number")
    return Item(str(named or benchmark), str(f"{path.stem}:{number}" if identifier is None else identifier), parts,
                choices)


# ---------------------------------------------------------------------------------------------
# The index


def _lookup(keys: np.ndarray, owners: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(query index, owner) for every indexed key equal to a query."""
    # Sorted queries walk the keys in order (a random probe per query misses the cache on a large index).
    if not len(keys):  # an index without whole questions (English items, short ones) or without n-grams
        return np.empty(0, np.int64), np.empty(0, owners.dtype)
    order = np.argsort(queries, kind="stable")
    ordered = queries[order]
    left = np.searchsorted(keys, ordered, "left")
    found = np.flatnonzero(keys[np.minimum(left, len(keys) - 1)] == ordered)
    if not len(found):
        return np.empty(0, np.int64), np.empty(0, owners.dtype)
    right = np.searchsorted(keys, ordered[found], "right")
    counts = right - left[found]
    query_of = np.repeat(order[found], counts)
    # Each hit's run of equal keys, flattened: start + 0, 1, ... within the run.
    starts = np.repeat(left[found], counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    return query_of, owners[starts + offsets]


class ContaminationIndex:
    """The n-grams and whole questions of a set of items; `find` says which items each document holds."""

    def __init__(self, items: list[Item]):
        self.items = items
        questions = [prepare(" ".join(item.parts)) for item in items]
        # The choices' words follow the question's (a space between: no word spans the two).
        values, owners = _distinct_grams([f"{question} {prepare(' '.join(item.choices))}"
                                          for question, item in zip(questions, items)])
        question_values, question_owners = _distinct_grams(questions)
        distinct, items_per_gram = np.unique(values, return_counts=True)
        common = distinct[items_per_gram >= COMMON_ITEMS]
        kept = ~np.isin(values, common)
        kept_per_item = np.bincount(owners[kept], minlength=len(items))
        # Half of the item's own question n-grams: boilerplate shared with other items neither counts towards
        # it nor raises it (an item whose question has none of its own: half of all it has).
        own = np.bincount(question_owners[~np.isin(question_values, common)], minlength=len(items))
        own = np.where(own > 0, own, kept_per_item)
        self.need = np.where(kept_per_item > 0, np.maximum(1, np.ceil(own * MIN_SHARE)), 0).astype(np.int64)
        self.gram_keys, self.gram_items = values[kept], owners[kept]  # by key, then item

        keys_of: dict[str, set[int]] = {}
        for number, item in enumerate(items):
            for part in item.parts:
                spaceless = _spaceless(prepare(part))
                if len(_HANGUL.findall(spaceless)) >= MIN_HANGUL:
                    keys_of.setdefault(spaceless, set()).add(number)
        self.questions = [key for key, owners in keys_of.items() if len(owners) < COMMON_ITEMS]
        self.question_items = [sorted(keys_of[key]) for key in self.questions]
        # Every window of each question (step 1), so that one of a document's sampled windows falls inside it.
        _, windows, _, _ = scan(*code_points(self.questions), N, WINDOW, 1, Bitmap.everything())
        order = np.argsort(windows.values, kind="stable")
        self.window_keys, self.window_questions = windows.values[order], windows.owners[order]
        self.bitmap = Bitmap.of(self.gram_keys, self.window_keys)
        # A question inside a document holds (letters - WINDOW + 1) // WINDOW_STEP or more of the windows the
        # document's scan samples (one every WINDOW_STEP letters), each one of the question's: a document sharing
        # fewer with it cannot hold it, and is spared the substring test.
        self.windows_needed = [max(1, (len(question) - WINDOW + 1) // WINDOW_STEP) for question in self.questions]
        self.templates = len(keys_of) - len(self.questions) + len(common)
        self.indexed = np.zeros(len(items), dtype=bool)
        self.indexed[self.need > 0] = True
        for owners in self.question_items:
            self.indexed[owners] = True

    def describe(self) -> dict:
        per_benchmark = Counter(item.benchmark for item in self.items)
        indexed = Counter(item.benchmark for item, ok in zip(self.items, self.indexed) if ok)
        return {name: {"items": per_benchmark[name], "items_indexed": indexed[name]} for name in sorted(per_benchmark)}

    def find(self, texts: list[str]) -> list[list[int]]:
        """For each text, the sorted indices of the items it contains (most lists are empty)."""
        return self.find_with_marks(texts)[0]

    def find_with_marks(self, texts: list[str]) -> tuple[list[list[int]], np.ndarray, np.ndarray]:
        """`find`, and what the same pass tells the PII masker for free: per text, the marks (native/constants.py) of what
        it may hold (a clear bit proves the text as given holds none of that), and the [start, end) of the text
        that holds all its number clusters (pii.PiiMasker.find's `numbers`)."""
        found: list[set[int]] = [set() for _ in texts]
        # The pass hands back only the hashes the bitmap lets through: the indexed ones and ~1% by chance.
        grams, windows, marks, runs = scan_texts(texts, N, WINDOW, WINDOW_STEP, self.bitmap)
        if len(grams.values):
            query, owner = _lookup(self.gram_keys, self.gram_items, grams.values)
            # Each distinct (document, item, n-gram) once: a repeated sentence counts once.
            matched = set(zip(grams.owners[query].tolist(), owner.tolist(), grams.values[query].tolist()))
            per_pair = Counter((document, item) for document, item, _ in matched)
            for (document, item), count in per_pair.items():
                if count >= self.need[item]:
                    found[document].add(item)
        if len(windows.values):
            query, question = _lookup(self.window_keys, self.window_questions, windows.values)
            spaceless: dict[int, str] = {}
            for (document, number), count in Counter(zip(windows.owners[query].tolist(), question.tolist())).items():
                if count < self.windows_needed[number]:  # too few of the question's windows: it is not there
                    continue
                if document not in spaceless:
                    spaceless[document] = _spaceless(prepare(texts[document]))
                if self.questions[number] in spaceless[document]:
                    found[document].update(self.question_items[number])
        return [sorted(items) for items in found], marks, runs


def _distinct_grams(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(hash, text) of each distinct word N-gram of each (prepared) text, ordered by hash, then text."""
    grams, _, _, _ = scan(*code_points(texts), N, WINDOW, WINDOW_STEP, Bitmap.everything())
    order = np.lexsort((grams.owners, grams.values))
    values, owners = grams.values[order], grams.owners[order]
    first = np.ones(len(values), dtype=bool)
    first[1:] = (values[1:] != values[:-1]) | (owners[1:] != owners[:-1])
    return values[first], owners[first]


def _spaceless(prepared: str) -> str:
    return letters(code_points([prepared])[0])


def eval_items(texts, name: str = "eval_overlap") -> list[Item]:
    """Evaluation documents as items: a training document holding most of one's n-grams is a near-copy of
    it, or contains it."""
    return [Item(name, str(number), (text,), ()) for number, text in enumerate(texts)]

