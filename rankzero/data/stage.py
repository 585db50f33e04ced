"""The per-chunk stage, the same for every build engine: records → text → quality → tokens.

    spec = plan.start(held_out_file).spec                    # once per build: what every worker needs
    stage = Stage(spec, tokenizer, engine, quality_filter)   # in the builder's process
    stage = Stage.in_worker(spec, threads)                   # in a fresh worker process or Ray worker
    result = stage(chunk, seen, known_lines(verdicts, chunk))   # a ChunkResult: ids, lengths, drops

A worker builds its own tokenizer, engine and Kiwi from the spec (paths and names, never a pickled
tokenizer): nothing with a thread pool crosses a fork (a forked Kiwi pool hangs, and so does
fastokens' Rayon pool), and a Ray worker on another machine has nothing to inherit anyway.

The engine may hand a JSONL chunk what earlier chunks learnt of its raw lines (`known_lines`, a
dedup/exact.LineVerdicts looked up by xxh3-64 of each line's bytes): a line like a kept document's is dropped before
it is parsed, and a line whose quality verdict is known takes it without being judged again (`remember_lines` puts
back what the chunk's result says).

With `--dedup exact` or a validation split every document that survives the filter carries a 64-bit hash
of its text: the engine removes exact duplicates across chunks (dedup/exact.py, first one wins) and picks
the held-out documents by it (split.py) before packing. With `--dedup near` it also carries its MinHash
signature (dedup/minhash.py), from which the engine decides the near-copies over the whole corpus
(dedup/near.py). In SFT (`truncate_to`) a sample longer than a row is cut at its end here, so both engines and
both splits count the same cut samples (`truncated`); a sample left with no token to train on (no answer, or
an answer cut off) is dropped here and counted (`no_trainable_tokens`).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import xxhash

from rankzero.config import StageConfig
from rankzero.data.dedup.minhash import minhash_signatures
from rankzero.data.encode import IGNORE_INDEX, DocumentEncoder, TokenizerInfo, build_engine, load_tokenizer
from rankzero.data.inputs.records import ChatRenderer, chunk_documents
from rankzero.data.pack import select_documents, truncate_documents
from rankzero.data.screen.screening import Screen


@dataclass
class ChunkResult:
    source_index: int
    docs_in: int
    bytes_in: int
    ids: np.ndarray
    lengths: np.ndarray
    labels: np.ndarray | None
    hashes: np.ndarray | None  # uint64 per kept document (with --dedup exact or near, or a validation split)
    signatures: np.ndarray | None  # (documents, 120) uint32 MinHash signatures (--dedup near; dedup/minhash.py)
    shingles: np.ndarray | None  # word 5-grams per document (0: too short to be a near-copy)
    truncated: np.ndarray | None  # bool per kept document: cut to `truncate_to` tokens (SFT)
    dropped: Counter
    screen: dict | None  # what --pii and --decontaminate found (screen/screening.py), None with neither
    replaced_lines: int
    seconds: dict
    quality_samples: list = field(default_factory=list)  # examples of each quality rule's drops (quality/samples.py)
    path: str = ""  # the chunk's file (or dataset)
    lines: np.ndarray | None = None  # each kept document's line (record number) in `path` (--dedup near)
    # Given the chunk's `known` lines, with `skip_kept_lines`: each kept document's raw line (xxh3-64 of its bytes),
    # and whether a later line byte for byte the same may be dropped unparsed (dedup/exact.LineVerdicts): nothing in
    # this document was counted on its way. With the quality filter: (line keys, verdict codes) of the documents it
    # judged here, for the table.
    line_keys: np.ndarray | None = None
    line_stands_in: np.ndarray | None = None
    judged_lines: tuple[np.ndarray, np.ndarray] | None = None


# What sizes (or switches off) the tokenizers' Rust thread pools, each read once, when its pool starts:
# `tokenizers`' Rayon pool (RAYON_RS_NUM_THREADS, else RAYON_NUM_THREADS; TOKENIZERS_PARALLELISM=false makes
# its batches serial), fastokens' BPE pool (FASTOKENS_BPE_THREADS, =1: serial) and the global Rayon pool it
# splits long texts on (RAYON_NUM_THREADS).
RUST_THREAD_VARIABLES = ("RAYON_NUM_THREADS", "RAYON_RS_NUM_THREADS", "FASTOKENS_BPE_THREADS")
PARALLELISM_VARIABLE = "TOKENIZERS_PARALLELISM"


def set_rust_threads(threads: int) -> dict[str, str]:
    """Size the Rust pools of `tokenizers` and fastokens to `threads`, whatever the environment says: values
    exported for the training ranks (optimize_env.sh's cores / GPUs, TOKENIZERS_PARALLELISM=false against
    forked DataLoader workers) are not the builder's budget. Call it before the first encode in the process.
    Returns the values it replaced (the manifest records them)."""
    wanted = {**dict.fromkeys(RUST_THREAD_VARIABLES, str(threads)), PARALLELISM_VARIABLE: "true"}
    replaced = {name: os.environ[name] for name, value in wanted.items() if os.environ.get(name) not in (None, value)}
    os.environ.update(wanted)
    return replaced


@contextlib.contextmanager
def rust_threads(threads: int) -> Iterator[dict[str, str]]:
    """`set_rust_threads` for the length of a build in a process that goes on to train: the training ranks'
    values are back afterwards (the pools keep their size; forked DataLoader workers see the user's setting)."""
    saved = {name: os.environ.get(name) for name in (*RUST_THREAD_VARIABLES, PARALLELISM_VARIABLE)}
    try:
        yield set_rust_threads(threads)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


# What dedup/exact.LineVerdicts holds of a raw JSONL line (0: nothing): a kept document that stands in for its repeats
# (each dropped unparsed as an exact duplicate, `skip_kept_lines`), or the quality filter's verdict on its text: kept,
# or FIRST_RULE + the index in quality.REASONS of the rule that dropped it (the first copy's verdict is every copy's).
STANDS_IN, KEPT, FIRST_RULE = 1, 2, 3


def known_lines(verdicts, chunk) -> tuple[np.ndarray, np.ndarray] | None:
    """A JSONL chunk's `known` for the stage: each raw line's key (xxh3-64 of its bytes) and what `verdicts`
    (dedup/exact.LineVerdicts) holds of it. None without a table, or for other formats."""
    if verdicts is None or chunk.fmt != "jsonl":
        return None
    keys = np.fromiter(map(xxhash.xxh3_64_intdigest, chunk.payload.split(b"\n")), dtype=np.uint64,
                       count=chunk.payload.count(b"\n") + 1)
    return keys, verdicts.look_up(keys)


def remember_lines(verdicts, result: ChunkResult, kept: np.ndarray | None = None) -> None:
    """Put in `verdicts` what the chunk's stage learnt of its lines, in source order: the quality verdicts it reached,
    and, where `kept` (the engine's decision: each of the stage's documents trained on or held out), the documents
    that stand in for their repeats."""
    if result.judged_lines is not None:
        verdicts.add(*result.judged_lines)
    if kept is not None and result.line_keys is not None:
        verdicts.add(result.line_keys[kept & result.line_stands_in], STANDS_IN)


def text_hash(text: str) -> int:
    """A document's identity for exact dedup: xxh3-64 of its UTF-8 bytes (a few times cheaper than blake2b
    here, and the stage hashes every document). eval_overlap.text_hash is the same function."""
    return xxhash.xxh3_64_intdigest(text.encode())


def has_answer(lengths: np.ndarray, labels: np.ndarray, truncated: np.ndarray | None) -> np.ndarray:
    """Per SFT sample: whether any of its own tokens is trained on. The EOS every whole sample ends with is
    always labelled; on its own (a chat with no answer, a prompt that fills the row and cut the answer off)
    it would teach the model to stop after a prompt, and a row of such samples gives loss 0/0."""
    if len(lengths) == 0:
        return np.ones(0, dtype=bool)
    starts = np.cumsum(lengths) - lengths
    trained = np.add.reduceat((labels != IGNORE_INDEX).astype(np.int64), starts)
    ends_with_eos = np.ones(len(lengths), dtype=bool) if truncated is None else ~truncated
    return trained - ends_with_eos > 0


@dataclass(frozen=True)
class StageSpec:
    """The stage as one value: its settings and paths, never a tokenizer or a thread pool, so it pickles to a
    worker process or a Ray task. Built once per build by the plan (`Plan.start`, `Plan.stage_spec`)."""

    config: StageConfig
    engine: str  # the tokenizer engine the builder checked ("fastokens" | "hf")
    quality: object | None  # rankzero.data.quality.QualityConfig; None: no filter
    hashes: bool  # each kept document's text hash: exact dedup and the validation split
    signatures: bool  # each kept document's MinHash signature: --dedup near
    truncate_to: int | None  # SFT: a sample longer than a row is cut at its end
    drop_repeats: bool = False  # exact dedup: a repeat is dropped here, before it is signed and tokenized
    skip_kept_lines: bool = False  # with drop_repeats: a JSONL line byte for byte like a kept one, before it is parsed
    eval_overlap: dict | None = None  # the held-out documents' file (eval_overlap.py), with a split

    @property
    def keys_lines(self) -> bool:
        """Whether the engine keeps a dedup/exact.LineVerdicts and gives each chunk its `known` lines: to skip the
        repeats of kept lines, or to judge each line once (the quality filter)."""
        return self.skip_kept_lines or self.quality is not None


class Stage:
    """Everything the per-chunk work needs; calling it processes one chunk."""

    def __init__(self, spec: StageSpec, tokenizer: TokenizerInfo, engine=None, quality_filter=None):
        self.spec = spec
        self.renderer = ChatRenderer(tokenizer.chat_template, tokenizer.special_tokens)
        self.encoder = DocumentEncoder(tokenizer, engine)
        self.quality_filter = quality_filter
        self.sample_taker = None
        if quality_filter is not None:
            from rankzero.data.quality.samples import SampleTaker

            self.sample_taker = SampleTaker(quality_filter)
        self.screen = Screen.of(spec.config, spec.eval_overlap)

    @classmethod
    def in_worker(cls, spec: StageSpec, threads: int, rust_threads: int | None = None) -> Stage:
        """Build a stage from its spec alone, in the process that will run it: `threads` for Kiwi, and for
        the tokenizer's Rust pools unless `rust_threads` says otherwise."""
        set_rust_threads(rust_threads or threads)
        tokenizer = load_tokenizer(spec.config.tokenizer_path)
        quality_filter = None
        if spec.quality is not None:
            from rankzero.data.quality import QualityFilter

            quality_filter = QualityFilter(spec.quality, threads=threads)
        return cls(spec, tokenizer, build_engine(spec.engine, tokenizer), quality_filter)

    def __call__(self, chunk, seen=None, known=None) -> ChunkResult:
        """Process one chunk. `seen(hashes)`: which texts an earlier chunk (in source order) already had, for
        `drop_repeats`; only the chunk's own repeats are dropped without it. `known` (`known_lines`): each raw line's
        key and what earlier chunks left of it: a line that stands in for its repeats is dropped unparsed, a line
        whose quality verdict is known is not judged again."""
        spec = self.spec
        config = spec.config
        started = time.perf_counter()
        line_keys = line_codes = skip_lines = None
        if known is not None:
            line_keys, line_codes = known
            skip_lines = line_codes == STANDS_IN
        parsed = chunk_documents(chunk, config.text_column, self.renderer, with_masks=config.with_labels,
                                 skip_bad_records=config.skip_bad_records, on_decode_error=config.on_decode_error,
                                 skip_lines=skip_lines)
        documents = parsed.documents
        repeats = int(skip_lines.sum()) if skip_lines is not None else 0
        docs_in = len(documents) + parsed.bad_records + parsed.empty + repeats
        dropped = Counter({"bad_record": parsed.bad_records, "empty": parsed.empty})
        converted = time.perf_counter()
        samples, numbers = [], parsed.numbers
        texts = ["".join(t for t, _ in segments) for segments in documents] if (
            self.quality_filter is not None or spec.hashes or spec.signatures or self.screen) else None
        counted = None  # per document: something in it was counted on its way (a repair, the screen's findings)
        judged_lines = None
        if self.quality_filter is not None:
            verdicts, fixed, judged_lines = self._judge(texts, parsed.numbers, chunk.first_line, line_keys, line_codes)
            dropped.update(reason for reason in verdicts if reason)
            samples = self.sample_taker.take(chunk, parsed.numbers, texts, verdicts)
            if samples and self.screen is not None and self.screen.masker is not None:
                _mask_samples(samples, dict(zip(parsed.numbers, texts)), self.screen.masker)
            numbers = [n for n, reason in zip(numbers, verdicts) if reason is None]
            kept = [(d, t, f) for d, t, f, reason in zip(documents, texts, fixed, verdicts) if reason is None]
            # A document whose mojibake the filter repaired is hashed and tokenized as repaired.
            dropped["mojibake_repaired (kept)"] = sum(f is not t for _, t, f in kept)
            documents = [d if f is t else self.quality_filter.repaired_segments(d, f) for d, t, f in kept]
            texts = [f for _, _, f in kept]
            counted = np.array([f is not t for _, t, f in kept], dtype=bool)
        filtered = time.perf_counter()
        report = None
        if self.screen is not None:
            keep, documents, report = self.screen(documents, texts, self._count_tokens, chunk.source_index)
            dropped.update(report.pop("dropped"))
            counted = report.pop("counted") | (False if counted is None else counted[keep])
            # Dedup and the split decide from the text as read: masking never changes which copy is kept.
            texts = [text for text, kept in zip(texts, keep.tolist()) if kept]
            numbers = [number for number, kept in zip(numbers, keep.tolist()) if kept]
        screened = time.perf_counter()
        if repeats:  # after the screen's reasons, as the repeats it drops below (the manifest keeps this order)
            dropped["exact_duplicate"] += repeats
        lines = np.asarray(numbers, dtype=np.int64) if spec.signatures else None
        hashes = np.fromiter(map(text_hash, texts), dtype=np.uint64, count=len(texts)) if spec.hashes else None
        if spec.drop_repeats and len(hashes):
            first = np.zeros(len(hashes), dtype=bool)
            first[np.unique(hashes, return_index=True)[1]] = True
            if seen is not None:
                first &= ~seen(hashes)
            if not first.all():
                dropped["exact_duplicate"] += int((~first).sum())
                documents = [d for d, keep in zip(documents, first) if keep]
                texts = [t for t, keep in zip(texts, first) if keep]
                numbers = [n for n, keep in zip(numbers, first) if keep]
                counted = None if counted is None else counted[first]
                hashes = hashes[first]
                lines = None if lines is None else lines[first]
        signatures, shingles = minhash_signatures(texts) if spec.signatures else (None, None)
        signed = time.perf_counter()
        ids, lengths, labels = self.encoder.encode(documents, config.with_labels)
        truncated = None
        if spec.truncate_to is not None:
            ids, lengths, labels, truncated = truncate_documents(ids, lengths, labels, spec.truncate_to)
        if labels is not None:
            keep = has_answer(lengths, labels, truncated)
            if not keep.all():
                dropped["no_trainable_tokens"] = int((~keep).sum())
                ids, lengths, labels = select_documents(ids, lengths, labels, keep)
                hashes, signatures, shingles, truncated, lines = (
                    None if values is None else values[keep] for values in (hashes, signatures, shingles, truncated,
                                                                            lines))
        done = time.perf_counter()
        stands_in = None
        if line_keys is not None and spec.skip_kept_lines:  # no labels (drop_repeats): none dropped after the screen
            line_keys = line_keys[np.asarray(numbers, dtype=np.int64) - chunk.first_line]
            stands_in = ~counted if counted is not None else np.ones(len(line_keys), dtype=bool)
        else:
            line_keys = None
        return ChunkResult(chunk.source_index, docs_in, chunk.nbytes, ids, lengths, labels, hashes, signatures,
                           shingles, truncated, +dropped, report, parsed.replaced_lines,
                           {"convert": converted - started, "quality": filtered - converted,
                            "screen": screened - filtered, "minhash": signed - screened, "tokenize": done - signed},
                           samples, chunk.path, lines, line_keys, stands_in, judged_lines)

    def _judge(self, texts: list[str], numbers: list[int], first_line: int, line_keys, line_codes):
        """The quality filter's verdicts and repaired texts, each line's known verdict taken as it is; and the (line
        keys, codes) of the documents judged here (None without `known`)."""
        from rankzero.data.quality import REASONS, UNJUDGED

        if line_keys is None:
            return *self.quality_filter.judge_and_repair(texts), None
        offsets = np.asarray(numbers, dtype=np.int64) - first_line
        codes = line_codes[offsets].tolist()
        meaning = [UNJUDGED, None, None, *REASONS]  # by code: nothing known, STANDS_IN and KEPT (kept), each rule
        verdicts, fixed = self.quality_filter.judge_and_repair(texts, [meaning[code] for code in codes])
        judged = np.array([code == 0 for code in codes], dtype=bool)
        rule = {reason: FIRST_RULE + index for index, reason in enumerate(REASONS)}
        new_codes = np.array([KEPT if verdict is None else rule[verdict] for verdict in verdicts], dtype=np.uint8)
        return verdicts, fixed, (line_keys[offsets][judged], new_codes[judged])

    def _count_tokens(self, documents: list) -> list[int]:
        _, lengths, _ = self.encoder.encode(documents, self.spec.config.with_labels)
        return lengths.tolist()


def _mask_samples(samples: list[dict], text_of_line: dict, masker) -> None:
    """quality_samples.jsonl shows dropped documents: with --pii mask, as masked as the kept ones (the whole
    text is masked, then cut, so no number is cut in half before it is looked at)."""
    for sample in samples:
        sample["text"] = masker.mask(text_of_line[sample["line"]]).text.strip()[:len(sample["text"])]
