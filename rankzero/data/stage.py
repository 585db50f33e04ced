"""The per-chunk stage, the same for every build engine: records → text → quality → tokens.

    stage = Stage(data_args, tokenizer, engine, quality_filter)       # in the builder's process
    stage = Stage.in_worker(data_args, "fastokens", quality, threads)   # in a fresh worker or Ray actor
    result = stage(chunk)                                              # a ChunkResult: ids, lengths, drops

A worker builds its own tokenizer, engine and Kiwi from the arguments (paths and names, never a
pickled tokenizer): nothing with a thread pool crosses a fork (a forked Kiwi pool hangs, and so does
fastokens' Rayon pool), and a Ray actor on another machine has nothing to inherit anyway.

Documents that survive the quality filter carry a 64-bit hash of their text: the engine removes
exact duplicates across chunks (first one wins) before packing.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections import Counter
from dataclasses import dataclass

import numpy as np

from rankzero.data.records import ChatRenderer, chunk_documents
from rankzero.data.encode import DocumentEncoder, TokenizerInfo, build_engine, load_tokenizer


@dataclass
class ChunkResult:
    source_index: int
    docs_in: int
    bytes_in: int
    ids: np.ndarray
    lengths: np.ndarray
    labels: np.ndarray | None
    hashes: np.ndarray | None  # uint64 per kept document (with the quality filter), for exact dedup
    dropped: Counter
    replaced_lines: int
    seconds: dict


def set_rust_threads(threads: int) -> None:
    """Size the Rayon pools of `tokenizers` and fastokens; each reads its variable once, when it starts."""
    os.environ.setdefault("RAYON_RS_NUM_THREADS", str(threads))  # tokenizers
    os.environ.setdefault("RAYON_NUM_THREADS", str(threads))  # fastokens


def text_hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


class Stage:
    """Everything the per-chunk work needs; calling it processes one chunk."""

    def __init__(self, data_args, tokenizer: TokenizerInfo, engine=None, quality_filter=None):
        self.text_column = data_args.text_column
        self.with_labels = data_args.mode == "sft"
        self.skip_bad_records = data_args.skip_bad_records
        self.on_decode_error = data_args.on_decode_error
        self.renderer = ChatRenderer(tokenizer.chat_template, tokenizer.special_tokens)
        self.encoder = DocumentEncoder(tokenizer, engine)
        self.quality_filter = quality_filter

    @classmethod
    def in_worker(cls, data_args, engine_name: str, quality_config, threads: int) -> "Stage":
        """Build a stage from arguments alone, in the process that will run it."""
        set_rust_threads(threads)
        tokenizer = load_tokenizer(data_args.tokenizer_path)
        quality_filter = None
        if quality_config is not None:
            from rankzero.data.quality import QualityFilter

            quality_filter = QualityFilter(quality_config, threads=threads)
        return cls(data_args, tokenizer, build_engine(engine_name, tokenizer), quality_filter)

    def __call__(self, chunk) -> ChunkResult:
        started = time.perf_counter()
        parsed = chunk_documents(chunk, self.text_column, self.renderer, with_masks=self.with_labels,
                                 skip_bad_records=self.skip_bad_records, on_decode_error=self.on_decode_error)
        documents = parsed.documents
        docs_in = len(documents) + parsed.bad_records + parsed.empty
        dropped = Counter({"bad_record": parsed.bad_records, "empty": parsed.empty})
        converted = time.perf_counter()
        hashes = None
        if self.quality_filter is not None:
            texts = ["".join(t for t, _ in segments) for segments in documents]
            verdicts, fixed = self.quality_filter.judge_and_repair(texts)
            dropped.update(reason for reason in verdicts if reason)
            kept = [(d, t, f) for d, t, f, reason in zip(documents, texts, fixed, verdicts) if reason is None]
            # A document whose mojibake the filter repaired is hashed and tokenized as repaired.
            dropped["mojibake_repaired (kept)"] = sum(f is not t for _, t, f in kept)
            documents = [d if f is t else self.quality_filter.repaired_segments(d, f) for d, t, f in kept]
            hashes = np.fromiter((text_hash(f) for _, _, f in kept), dtype=np.uint64, count=len(documents))
        filtered = time.perf_counter()
        ids, lengths, labels = self.encoder.encode(documents, self.with_labels)
        done = time.perf_counter()
        return ChunkResult(chunk.source_index, docs_in, chunk.nbytes, ids, lengths, labels, hashes,
                           +dropped, parsed.replaced_lines,
                           {"convert": converted - started, "quality": filtered - converted, "tokenize": done - filtered})
