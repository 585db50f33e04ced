"""The evaluation set kept out of training whatever `--dedup` says: a training document that is a near-copy
of a held-out document, or contains one, is dropped (`eval_overlap`).

    spec = write_evaluation(build_dir / "evaluation.jsonl", sources, reading, held_out_below)
                                                      # the builder (Plan.start), before encoding; None: no split
    overlap = EvalOverlap(spec)                                      # in each process that runs the stage
    overlapping = overlap(texts, source_index)                       # a bool per document of a chunk

Exact dedup and near dedup keep the splits apart only when they are on (`--dedup exact`, the SFT default,
misses near-copies; `none` everything but repeats of --eval_dataset). So before the build, the builder
reads the held-out documents — every --eval_dataset document and the --dataset documents whose text hash
falls below the --validation_split_percentage threshold (split.py), as read — into a file; every stage
indexes them as decontaminate.py indexes benchmark items (word 8-grams, half of a document's n-grams,
the whole text spacing-blind) and drops a training document holding one. A document with exactly an
evaluation document's text is left to the split (held out itself, or dropped as `in_eval_dataset` /
`exact_duplicate`). The split's own rule decides from the text after the quality filter's repairs; the
file holds the text as read: a held-out document whose mojibake the filter repaired is indexed as read.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import xxhash

from rankzero.data.inputs.readers import lenient_documents
from rankzero.data.screen.decontaminate import ContaminationIndex, eval_items

EVAL_OVERLAP = "eval_overlap"


def text_hash(text: str) -> int:
    """The split's hash of a text (stage.text_hash; stage.py imports this module, so not from there)."""
    return xxhash.xxh3_64_intdigest(text.encode())


def write_evaluation(path: Path, sources, reading, limit: int | None) -> dict | None:
    """Write the held-out documents' texts to `path` (JSON lines): the --eval_dataset `sources` whole, and the
    documents of the others whose text hash is below `limit` (split.threshold; None: no percentage split), read as
    `reading` (plan.Reading) says. Returns what `EvalOverlap` needs, or None without a validation split."""
    if limit is None and not any(source.evaluation for source in sources):
        return None
    renderer = reading.renderer()
    count = 0
    with open(path, "w", encoding="utf-8") as handle:
        for index, source in enumerate(sources):
            if not source.evaluation and limit is None:
                continue
            for documents in lenient_documents(source, index, reading, renderer, reading.batch_size):
                texts = ["".join(text for text, _ in segments) for segments in documents]
                for text in texts:
                    if source.evaluation or text_hash(text) < limit:
                        handle.write(json.dumps(text, ensure_ascii=False) + "\n")
                        count += 1
    evaluation = [index for index, source in enumerate(sources) if source.evaluation]
    return {"path": str(path), "documents": count, "evaluation_sources": evaluation, "held_out_below": limit}


class EvalOverlap:
    def __init__(self, spec: dict):
        with open(spec["path"], encoding="utf-8") as handle:
            texts = [json.loads(line) for line in handle]
        self.index = ContaminationIndex(eval_items(texts))
        self.hashes = frozenset(text_hash(text) for text in texts)
        self.evaluation_sources = frozenset(spec["evaluation_sources"])
        self.limit = spec["held_out_below"]

    def __call__(self, texts: list[str], source_index: int) -> np.ndarray:
        overlapping = np.zeros(len(texts), dtype=bool)
        if source_index in self.evaluation_sources:
            return overlapping
        for number, found in enumerate(self.index.find(texts)):
            if found:
                digest = text_hash(texts[number])
                held_out = self.limit is not None and digest < self.limit
                overlapping[number] = not held_out and digest not in self.hashes
        return overlapping
