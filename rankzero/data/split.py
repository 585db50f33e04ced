"""The validation split: which documents are held out for evaluation, the same on every build engine.

    holdout = Holdout(evaluation, percentage, dedup=True)     # once per build; evaluation: a bool per source
    decision = holdout(source_index, hashes, count)           # per chunk or task, in source order
    decision.train, decision.validation                       # a bool per document; the others were dropped
    held_out(hashes, threshold(percentage))                   # the hash rule alone (a one-pass Ray task)

A document of a `--dataset` source is held out when the xxh3-64 hash of its text (`stage.text_hash`, the
one exact dedup uses), read as a fraction of 2**64, is below `--validation_split_percentage` / 100. So
the choice depends on the text alone: not on the engine, the worker count, the chunking or the order,
and exact duplicates always land in the same split. Every document of an `--eval_dataset` source is
held out. Evaluation sources come first in source order, and a training document whose text repeats
one of theirs is dropped (`in_eval_dataset`), with or without `--dedup exact`: held-out text is never
trained on. With `--dedup exact` repeats are then dropped across both splits, first one wins
(dedup/exact.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rankzero.data.dedup.exact import ExactDuplicates

HOW_CHOSEN = ("a document of --dataset is held out when xxh3-64(its text) / 2**64 < percentage / 100; every "
              "document of --eval_dataset is held out; training documents repeating an evaluation document "
              "are dropped")


def threshold(percentage: float | None) -> int | None:
    """The hash below which a document is held out (None: no percentage split)."""
    if percentage is None:
        return None
    return min(int(percentage / 100 * 2.0 ** 64), 2 ** 64 - 1)


def held_out(hashes: np.ndarray, limit: int | None) -> np.ndarray:
    """True for each document whose text hash falls below the threshold."""
    if limit is None:
        return np.zeros(len(hashes), dtype=bool)
    return hashes < np.uint64(limit)


@dataclass
class Decision:
    train: np.ndarray  # bool per document
    validation: np.ndarray
    dropped: Counter


class Holdout:
    """Decides, in source order, which documents train, which are held out and which are dropped."""

    def __init__(self, evaluation: Sequence[bool], percentage: float | None, dedup: bool):
        """`evaluation`: per source, in order, whether it is an --eval_dataset source (held out whole)."""
        self.evaluation = list(evaluation)
        self.limit = threshold(percentage)
        self.duplicates = ExactDuplicates() if dedup else None
        self.evaluation_texts: set[int] = set()

    def __call__(self, source_index: int, hashes: np.ndarray | None, count: int) -> Decision:
        if hashes is None:  # neither dedup nor a split asked for: everything trains
            return Decision(np.ones(count, dtype=bool), np.zeros(count, dtype=bool), Counter())
        keep = np.ones(count, dtype=bool)
        dropped = Counter()
        evaluation = self.evaluation[source_index]
        if evaluation:
            self.evaluation_texts.update(hashes.tolist())
        elif self.evaluation_texts:
            seen = self.evaluation_texts
            repeats = np.fromiter((digest in seen for digest in hashes.tolist()), dtype=bool, count=count)
            keep &= ~repeats
            dropped["in_eval_dataset"] += int(repeats.sum())
        if self.duplicates is not None:
            first = self.duplicates.keep(hashes[keep])
            dropped["exact_duplicate"] += int((~first).sum())
            keep[keep] = first
        validation = keep & (True if evaluation else held_out(hashes, self.limit))
        return Decision(keep & ~validation, validation, +dropped)
