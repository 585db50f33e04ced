"""`--dedup near` in a build: the engines' one bookkeeping of which document went where, and the decision applied.

    ledger = NearLedger(threshold, work_dir, memory_budget_bytes)
    ledger.add(source_index, signatures, shingles, validation, lengths, truncated)   # in dedup order
    removed = ledger.decide(stats)                 # near.py's decision; each source's stats lose its near-copies
    ledger.training_keep(source_index)             # bool per training document of the source, in order
    ledger.validation_keep()                       # bool per held-out document, in order
    write_samples(path, ledger, specs, tokenizer, where)   # dedup_samples.jsonl; where(number) → (staged file, position)

Both engines add the documents that survived the filter, exact dedup and the evaluation-set check, in
source order (the local engine as chunks are consumed, the Ray driver task by task), so the numbering,
and with it the decision, is the same on both. Per document the ledger keeps its source (int32), split
(bool), tokens (int64) and SFT cut flag (bool): 14 bytes, in numpy arrays. Where an engine staged a
document is the engine's to say (`where`): the ledger knows no file layout.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from rankzero import malloc
from rankzero.data.dedup.near import NearDuplicates, settings
from rankzero.data.screen.pii import mask_name
from rankzero.data.shards import read_staged

SAMPLE_CHARS = 80


class NearLedger:
    """One build's near dedup: the documents in dedup order, where each went, the decision and its samples."""

    def __init__(self, threshold: float, work_dir: Path, memory_budget_bytes: int | None = None):
        self.near = NearDuplicates(threshold, work_dir, memory_budget_bytes)
        self._parts: list[tuple] = []
        self._lines: list[tuple[int, tuple[str, np.ndarray] | None]] = []  # per add: (documents, (file, lines))
        self.removed: np.ndarray | None = None
        self.pairs: list[tuple[int, int]] = []

    def add(self, source_index: int, signatures: np.ndarray, shingles: np.ndarray, validation: np.ndarray,
            lengths: np.ndarray, truncated: np.ndarray | None, lines: tuple[str, np.ndarray] | None = None) -> None:
        """The next documents in dedup order, all of one source; `validation`: held out (else training);
        `lines`: their file and each one's line (record number) in it, for dedup_samples.jsonl."""
        self.near.add(signatures, shingles)
        count = len(lengths)
        self._lines.append((count, lines))
        self._parts.append((np.full(count, source_index, np.int32), validation.astype(bool), lengths.astype(np.int64),
                            np.zeros(count, bool) if truncated is None else truncated.astype(bool)))

    def _column(self, index: int) -> np.ndarray:
        return np.concatenate([part[index] for part in self._parts]) if self._parts else np.empty(0)

    def decide(self, stats: list) -> np.ndarray:
        """Decide; each source's stats lose its near-copies (`SourceStats.drop`). Returns the removed mask."""
        decision = self.near.decide()
        self.near.close()
        self.removed, self.pairs = decision.removed, decision.pairs
        self.source, self.validation = self._column(0).astype(np.int32), self._column(1).astype(bool)
        tokens, truncated = self._column(2).astype(np.int64), self._column(3).astype(bool)
        self._parts = []
        for index, stat in enumerate(stats):
            mine = self.removed & (self.source == index)
            if mine.any():
                training, held = mine & ~self.validation, mine & self.validation
                stat.drop({"near_duplicate": int(mine.sum())}, int(tokens[training].sum()),
                          truncated=int(truncated[training].sum()), held=(int(held.sum()), int(tokens[held].sum()),
                                                                          int(truncated[held].sum())))
        # The decision's arrays (the band keys, ~330 bytes a document) are freed now: their pages go back to the
        # kernel, not kept by malloc beside the pages Arrow's own allocator takes for packing and the shuffle.
        malloc.release_free_memory()
        return self.removed

    def line_of(self, number: int) -> dict:
        """{"file", "line"} of a document (by its number in dedup order), or its number within its source
        where the engine did not say."""
        starts = np.cumsum([0] + [count for count, _ in self._lines])
        part = int(np.searchsorted(starts, number, side="right")) - 1
        if self._lines[part][1] is None:
            return {"document": int((self.source[:number] == self.source[number]).sum())}
        path, lines = self._lines[part][1]
        return {"file": path, "line": int(lines[number - starts[part]])}

    def describe(self) -> dict:
        """The manifest's "near_dedup": the settings, the rule, and how this build's decision went."""
        near = self.near
        return {**settings(near.threshold), "documents": near.count, "removed": int(self.removed.sum()),
                "pairs_compared": near.compared, "spilled_runs": near.spilled_runs,
                "memory_budget_mb": round(near.budget / (1 << 20), 3)}

    def training_keep(self, source_index: int) -> np.ndarray:
        mine = (self.source == source_index) & ~self.validation
        return ~self.removed[mine]

    def validation_keep(self) -> np.ndarray:
        return ~self.removed[self.validation]

    def locate(self, number: int) -> tuple[int, bool, int]:
        """(source, held out, position among that source's training documents, or among all held-out ones)."""
        source, held = int(self.source[number]), bool(self.validation[number])
        before = self.validation[:number] if held else (self.source[:number] == source) & ~self.validation[:number]
        return source, held, int(before.sum())


def staged_starts(path: Path, positions: set[int]) -> dict[int, np.ndarray]:
    """The token ids of the documents at `positions` in a staged file (one read of it)."""
    found, offset = {}, 0
    for ids, lengths, _ in read_staged(path):
        starts = np.concatenate(([0], np.cumsum(lengths)))
        for position in positions:
            if offset <= position < offset + len(lengths):
                local = position - offset
                found[position] = np.array(ids[starts[local]:starts[local + 1]])
        offset += len(lengths)
        if len(found) == len(positions):
            break
    return found


def write_samples(path: Path, ledger: NearLedger, specs: list[str], tokenizer,
                  where: Callable[[int], tuple[Path, int]]) -> None:
    """dedup_samples.jsonl: a line per removed pair (the first SAMPLES removed documents), each side with its
    source (`specs[source index]`), its file and line (record number for record formats), and its first
    SAMPLE_CHARS characters, decoded from the staged token ids. `where(number)` → (staged file, position in
    it): the engine's layout."""
    numbers = sorted({n for pair in ledger.pairs for n in pair})
    located = {n: where(n) for n in numbers}
    by_file: dict[Path, set[int]] = {}
    for file, position in located.values():
        by_file.setdefault(file, set()).add(position)
    ids = {file: staged_starts(file, positions) for file, positions in by_file.items()}

    def side(number: int) -> dict:
        source = int(ledger.source[number])
        file, position = located[number]
        place = ledger.line_of(number)
        if "file" in place:
            place["file"] = mask_name(place["file"])
        return {"source": specs[source], **place,
                "split": "validation" if ledger.validation[number] else "train",
                "text": decode_start(tokenizer, ids[file][position])}

    lines = [json.dumps({"removed": side(j), "kept_earlier": side(i)}, ensure_ascii=False) for j, i in ledger.pairs]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def decode_start(tokenizer, ids: np.ndarray) -> str:
    """The first SAMPLE_CHARS characters of a document from its token ids (the text as it was encoded)."""
    text = tokenizer.backend.decode(ids[:SAMPLE_CHARS * 2].tolist(), skip_special_tokens=True)
    return text[:SAMPLE_CHARS]
