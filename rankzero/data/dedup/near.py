"""Near-duplicate removal: MinHash LSH over the whole corpus, first one wins, in bounded memory.

    near = NearDuplicates(threshold, work_dir)       # once per build (the local builder, the Ray driver)
    near.add(signatures, shingle_counts)              # in source order: each document's minhash.py signature
    decision = near.decide()                          # decision.removed: a bool per document added
    near_duplicate_indices(texts, threshold)          # the same, for a list of texts (benchmarks, tests)

The rule, exactly: number the documents in the order they are added (source order, after the quality
filter, exact dedup and the evaluation-set check). Document j is removed when, for some band b of the
bands (40 of 3 values at the default threshold 0.55), one of the first 3 documents i < j whose band-b key
(minhash.band_hashes) equals j's has at least
ceil(threshold x 120) of its 120 MinHash values equal to j's (compared on their low 16 bits, stored so:
a chance agreement is 2**-16, an estimate high by at most 0.00002). `i` itself may be removed too:
the rule is a property of the pair, so it needs no order of decisions and gives the same set however the
work is split. A document of fewer than 5 words has no shingle and takes no part: never removed, never
the reason another is.

Bands and rows (minhash.lsh_shape), 40 x 3 for the threshold 0.55: two documents of Jaccard similarity s
share a band with probability 1 - (1 - s**3)**40: 0.9993 at s = 0.55, 0.93 at 0.4, 0.67 at 0.3, 0.27 at 0.2
(20 x 6 at 0.8: 0.998 at 0.8, 0.27 at 0.5). The band test only proposes pairs; the signature test decides them, so the S-curve is set high at
the threshold (few pairs at s >= threshold are never compared) and the cost of a low-s pair is one
comparison. Another threshold gets its own shape: the most rows for which the S-curve is >= 0.99 there.

Memory: per document the builder keeps one bool (removed) and, until it spills, its band keys and its
document number (40 x 8 + 8 = 328 bytes at 0.55, 168 at 0.8), counted against `memory_budget_bytes` at what a
run on disk holds (a number beside every key: 640, 320); past the budget the keys are sorted per band and
written to disk as a run. The decision reads, per band, one range of key values at a time from every run
(the runs are sorted, so a range is a slice of each), sized to the budget: a merge of sorted runs without
a heap, since every key of one value lands in one range. The signatures go straight to a file (240 bytes
per document) and are read back only for the compared pairs. docs/design.md has the arithmetic for 400 M
documents. Nothing here is held as Python objects per document. No library does this bookkeeping: the LSH
indexes of datasketch and rensa are in-memory maps of every key (hundreds of bytes per document on the
Python or Rust heap) that answer queries, and neither spills nor numbers documents.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rankzero.config import DEFAULT_DEDUP_THRESHOLD
from rankzero.data.dedup.minhash import PERMUTATIONS, algorithm, band_hashes, lsh_shape, minhash_signatures

DEFAULT_MEMORY_BUDGET = 1 << 30  # bytes of band keys; a build's is --dedup_memory_mb (config.WorkersConfig)
ENTRY_BYTES = 16  # a band key (uint64) and its document number (int64)
DECIDE_BYTES_PER_ENTRY = 112  # key, number, sort order, sorted copies, group and rank, up to 3 pairs: one range
SAMPLES = 20
# Each document is compared with the first HOLDERS documents sharing a band key with it: a template's pages
# share keys, and the first holder of one may be a sibling page while the copy is the second or third.
HOLDERS = 3
RULE = ("documents in source order (after the filter and exact dedup); one is removed when, in one of the bands, "
        "one of the first 3 earlier documents with the same band key agrees with it on at least ceil(threshold x 120) of the 120 "
        "MinHash values (word 5-grams of NFKC, lower-cased text, digits folded to 0, punctuation a word break); texts of fewer "
        "than 5 words are never removed")


@dataclass
class NearDecision:
    removed: np.ndarray  # bool per document added
    pairs: list[tuple[int, int]]  # the first SAMPLES removed documents (by number) and the earlier one they repeat


def settings(threshold: float) -> dict:
    """What the manifest says of near dedup at `threshold`: the settings, the sketch and the rule."""
    return {"threshold": threshold, **algorithm(threshold), "rule": RULE,
            "samples": f"dedup_samples.jsonl (the first {SAMPLES} removed documents and the earlier ones they repeat)"}


def required_matches(threshold: float) -> int:
    """How many of the PERMUTATIONS values must agree for an estimated similarity >= threshold."""
    return math.ceil(threshold * PERMUTATIONS - 1e-9)


class _Run:
    """Band keys of a span of documents, each band sorted by (key, number), memory-mapped from disk."""

    def __init__(self, keys: np.ndarray, numbers: np.ndarray):
        self.keys, self.numbers = keys, numbers  # (bands, n) each

    @classmethod
    def write(cls, path: Path, keys: list[np.ndarray], numbers: np.ndarray) -> "_Run":
        """keys (n, bands) in pieces (_band_column), numbers (n,) ascending → files, one band sorted at a time (the
        extra memory is one band's, not the run's)."""
        bands = keys[0].shape[1]
        sorted_keys = np.lib.format.open_memmap(path.with_suffix(".keys.npy"), "w+", np.uint64, (bands, len(numbers)))
        sorted_numbers = np.lib.format.open_memmap(path.with_suffix(".numbers.npy"), "w+", np.int64,
                                                   (bands, len(numbers)))
        for band in range(bands):
            column = _band_column(keys, band)
            order = np.argsort(column, kind="stable")  # stable: equal keys stay in number order
            sorted_keys[band] = column[order]
            sorted_numbers[band] = numbers[order]
        sorted_keys.flush()
        sorted_numbers.flush()
        del sorted_keys, sorted_numbers
        return cls(np.load(path.with_suffix(".keys.npy"), mmap_mode="r"),
                   np.load(path.with_suffix(".numbers.npy"), mmap_mode="r"))


class NearDuplicates:
    """The LSH bookkeeping of one build: documents are added in source order, decided once at the end."""

    def __init__(self, threshold: float, work_dir: Path, memory_budget_bytes: int | None = None):
        if not 0 < threshold <= 1:
            raise ValueError(f"--dedup_threshold {threshold}: must be above 0 and at most 1")
        self.threshold = threshold
        self.bands, self.rows = lsh_shape(threshold)
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.budget = max(int(DEFAULT_MEMORY_BUDGET if memory_budget_bytes is None else memory_budget_bytes), 1)
        self.count = 0
        self._signatures = open(self.work_dir / "signatures.u16", "wb")
        self._keys: list[np.ndarray] = []  # (n, bands) uint64 of the documents with shingles, since the last spill
        self._numbers: list[np.ndarray] = []
        self._buffered = 0
        self.runs: list[_Run] = []
        self.spilled_runs = 0  # runs written to disk
        self.compared = 0  # pairs whose signatures were compared

    def add(self, signatures: np.ndarray, shingle_counts: np.ndarray) -> None:
        """The next documents' signatures (minhash.minhash_signatures), in source order."""
        assert len(signatures) == len(shingle_counts) and signatures.shape[1:] == (PERMUTATIONS,)
        self._signatures.write(np.ascontiguousarray(signatures.astype(np.uint16)).tobytes())
        with_shingles = np.flatnonzero(shingle_counts > 0)
        if len(with_shingles):
            self._keys.append(band_hashes(signatures[with_shingles], self.rows))
            self._numbers.append(with_shingles.astype(np.int64) + self.count)
            self._buffered += len(with_shingles) * self.bands * ENTRY_BYTES
        self.count += len(signatures)
        if self._buffered > self.budget:
            self._spill()

    def _take_buffer(self) -> tuple[list[np.ndarray], np.ndarray]:
        """The buffered keys (the pieces of (n, bands) added, left unjoined: joined they would be held twice while
        the decision starts, the prepare's peak) and numbers (n,), emptying the buffer."""
        keys = self._keys
        numbers = np.concatenate(self._numbers) if self._numbers else np.empty(0, np.int64)
        self._keys, self._numbers, self._buffered = [], [], 0
        return keys, numbers

    def _spill(self) -> None:
        keys, numbers = self._take_buffer()
        if len(numbers):
            self.runs.append(_Run.write(self.work_dir / f"run-{len(self.runs):05d}", keys, numbers))
            self.spilled_runs += 1

    def decide(self) -> NearDecision:
        """Which documents are near-copies of an earlier one (the rule in the module docstring)."""
        self._signatures.close()
        if self.runs:
            self._spill()  # one kind of run: every range is read from files
            in_memory = None
        else:
            in_memory = self._take_buffer()  # within the budget: each band is sorted as it is decided
        removed = np.zeros(self.count, dtype=bool)
        pairs = np.empty((0, 2), dtype=np.int64)
        if self.count == 0 or (in_memory is not None and not len(in_memory[1])):
            return NearDecision(removed, [])
        signatures = np.memmap(self.work_dir / "signatures.u16", dtype=np.uint16, mode="r",
                               shape=(self.count, PERMUTATIONS))
        needed = required_matches(self.threshold)
        for band in range(self.bands):
            for keys, numbers in self._band_pieces(band, in_memory):
                earlier, later = _first_holders(keys, numbers)
                undecided = ~removed[later]
                earlier, later = earlier[undecided], later[undecided]
                if not len(later):
                    continue
                self.compared += len(later)
                agree = (signatures[earlier] == signatures[later]).sum(axis=1)
                near = agree >= needed
                removed[later[near]] = True
                found = np.stack([later[near], earlier[near]], axis=1)
                pairs = np.concatenate([pairs, found])
                pairs = pairs[np.unique(pairs[:, 0], return_index=True)[1][:SAMPLES]]  # each removed once, earliest
        del signatures
        return NearDecision(removed, [(int(j), int(i)) for j, i in pairs])

    def _band_pieces(self, band: int, in_memory: tuple | None):
        """(keys, numbers) of one band, numbers ascending among equal keys, in pieces holding every copy of a
        key: the whole band from memory, or one key range at a time from every spilled run."""
        if in_memory is not None:
            keys, numbers = in_memory
            yield _band_column(keys, band), numbers
            return
        entries = sum(run.keys.shape[1] for run in self.runs)
        ranges = max(1, math.ceil(entries * DECIDE_BYTES_PER_ENTRY / self.budget))
        bounds = [int(r * 2 ** 64 // ranges) for r in range(ranges)] + [2 ** 64]
        for low, high in zip(bounds[:-1], bounds[1:]):
            yield self._gather(band, low, high)

    def _gather(self, band: int, low: int, high: int) -> tuple[np.ndarray, np.ndarray]:
        """Every run's (key, number) pairs of `band` with low <= key < high, runs in order (so numbers ascend
        among equal keys)."""
        keys, numbers = [], []
        for run in self.runs:
            band_keys = run.keys[band]
            start = 0 if low == 0 else int(np.searchsorted(band_keys, np.uint64(low)))
            stop = len(band_keys) if high >= 2 ** 64 else int(np.searchsorted(band_keys, np.uint64(high)))
            keys.append(np.asarray(band_keys[start:stop]))
            numbers.append(np.asarray(run.numbers[band][start:stop]))
        return np.concatenate(keys), np.concatenate(numbers)

    def close(self) -> None:
        if not self._signatures.closed:
            self._signatures.close()


def _band_column(pieces: list[np.ndarray], band: int) -> np.ndarray:
    """One band's keys, contiguous, from the (n_i, bands) pieces they were added in."""
    return np.concatenate([piece[:, band] for piece in pieces])


def _first_holders(keys: np.ndarray, numbers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(earlier, later) pairs: every document whose key earlier documents also have, with each of that key's
    first HOLDERS documents that come before it (the first holder's pairs first)."""
    if not len(keys):
        return np.empty(0, np.int64), np.empty(0, np.int64)
    order = np.argsort(keys, kind="stable")  # numbers already ascend among equal keys
    keys, numbers = keys[order], numbers[order]
    index = np.arange(len(keys))
    group = np.maximum.accumulate(np.where(np.concatenate(([True], keys[1:] != keys[:-1])), index, 0))
    rank = index - group  # place in its key's group
    pairs = [(numbers[group[rank > k] + k], numbers[rank > k]) for k in range(HOLDERS)]
    return np.concatenate([e for e, _ in pairs]), np.concatenate([l for _, l in pairs])


def near_duplicate_indices(texts: Sequence[str], threshold: float = DEFAULT_DEDUP_THRESHOLD) -> list[int]:
    """The indices into `texts` that `--dedup near --dedup_threshold THRESHOLD` removes (first one wins):
    the prepare's own signatures (minhash.py) and decision (NearDuplicates), over texts as they are."""
    batch = 1000
    with tempfile.TemporaryDirectory(prefix="rankzero-neardup-") as work:
        near = NearDuplicates(threshold, Path(work))
        try:
            for start in range(0, len(texts), batch):
                near.add(*minhash_signatures(list(texts[start:start + batch])))
            return np.flatnonzero(near.decide().removed).tolist()
        finally:
            near.close()
