"""Mixing sources by share of tokens (`SPEC@WEIGHT`), the same for every build engine.

    mixing_ratios(stats)                                   # after counting: each source's ratio, in place
    for share in passes(stat.ratio): ...                   # 2.5 → 1.0, 1.0, 0.5: read the source that often
    ids, lengths, labels = subsample(ids, lengths, labels, share, rng)

A weight is a source's share of the output tokens; the output total is the natural total (every
source once). A source above its natural share is read again (repeats), below it is subsampled: the
last pass keeps each document with probability `share`, seeded, so the mix is the same on every run.
"""

from __future__ import annotations

import math

import numpy as np

from rankzero.data.pack import select_documents
from rankzero.errors import RankzeroError


def mixing_ratios(stats: list) -> None:
    """weight = share of output tokens; output total = natural total; ratio = target / natural."""
    weights = [s.weight for s in stats]
    if all(w is None for w in weights):
        return
    missing = [s.spec for s in stats if s.weight is None]
    if missing:
        raise RankzeroError(f"--dataset: give every source a weight (SPEC@WEIGHT) or none; missing for {missing}")
    empty = [s.spec for s in stats if s.tokens == 0]
    if empty:
        raise RankzeroError(f"--dataset: sources {empty} have a weight but no tokens left after filtering")
    total = sum(s.tokens for s in stats)
    weight_sum = sum(weights)
    for s in stats:
        s.ratio = (s.weight / weight_sum) * total / s.tokens


def passes(ratio: float) -> list[float]:
    """The share of a source's documents each pass keeps: whole passes, then the remainder."""
    return [min(1.0, ratio - repeat) for repeat in range(math.ceil(ratio - 1e-9))]


def subsample(ids: np.ndarray, lengths: np.ndarray, labels: np.ndarray | None, share: float,
              rng: np.random.Generator):
    """Each document kept with probability `share` (all of them at 1.0, drawing nothing)."""
    if share >= 1.0:
        return ids, lengths, labels
    return select_documents(ids, lengths, labels, rng.random(len(lengths)) < share)
