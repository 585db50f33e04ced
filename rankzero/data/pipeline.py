"""Orchestration: sources → records→text → quality → tokens → blocks → shuffled Arrow shards.

    manifest = build_dataset(data_args, seed, out_dir, fingerprint)   # called by handoff.py

Three stages, each streaming with bounded memory:

A. *Encode* (parallel). The parent cuts sources into chunks; workers parse, convert, filter and
   tokenize each chunk — forked processes when the Kiwi filter makes the work Python-bound (the
   tokenizer and Kiwi are built once in the parent and shared copy-on-write), threads on one Rust
   tokenizer pool otherwise (see `_start_pool`). At most `2 × workers` chunks are in flight, results are
   consumed in submission order (so the output never depends on worker count or timing), exact
   duplicates are dropped globally.
B. *Mix and pack*. Documents are packed into blocks, and each block is scattered to a random
   bucket file. Without weights this happens as stage A's results arrive (when every source's size
   is known: hub sources are staged too). With `SPEC@WEIGHT`, stage A stages each source's
   documents in a file; once per-source token counts are known the
   ratios are exact: a source above its natural share is read again (repeats), below it is
   subsampled (seeded).
C. *Shuffle and publish*. Each bucket (~16 MB) is loaded, permuted and appended to the
   `save_to_disk`-format shards (~256 MB each), so the whole dataset is a uniform seeded shuffle of
   the blocks while memory stays at one bucket, whatever the corpus size.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import json
import logging
import math
import os
import platform
import shutil
import signal
import sys
import time
from collections import Counter, deque
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa

from rankzero.data.pack import Packer, arrow_array, list_array, numpy_view
from rankzero.data.records import ChatRenderer, chunk_documents
from rankzero.data.sources import Source, iter_chunks, resolve_source
from rankzero.data.tokenize import DocumentEncoder, TokenizerInfo, load_tokenizer
from rankzero.errors import RankzeroError

logger = logging.getLogger(__name__)

FORMAT_VERSION = 2  # bump when the output of the same inputs changes
BUCKET_BYTES = 16 << 20  # stage C holds about two buckets: memory does not grow with the corpus ...
MAX_BUCKETS = 512  # ... up to 512 open bucket files (8 GB of blocks); beyond that buckets grow instead
SHARD_BYTES = 256 << 20  # output shard size (several buckets each)
PROGRESS_EVERY_S = 5.0


# ---------------------------------------------------------------------------------------------
# Stage A: the per-chunk work, run in forked workers (or inline with one worker)


@dataclass
class ChunkResult:
    source_index: int
    docs_in: int
    bytes_in: int
    ids: np.ndarray
    lengths: np.ndarray
    labels: np.ndarray | None
    hashes: np.ndarray | None
    dropped: Counter
    replaced_lines: int
    seconds: dict


class ChunkProcessor:
    """Everything a worker needs, built once in the parent before the fork (the Kiwi filter excepted:
    see `_start_pool`)."""

    def __init__(self, data_args, tokenizer: TokenizerInfo):
        self.text_column = data_args.text_column
        self.with_labels = data_args.mode == "sft"
        self.skip_bad_records = data_args.skip_bad_records
        self.on_decode_error = data_args.on_decode_error
        self.renderer = ChatRenderer(tokenizer.chat_template, tokenizer.special_tokens)
        self.encoder = DocumentEncoder(tokenizer)
        self.quality_filter = None

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
            hashes = np.fromiter(
                (int.from_bytes(hashlib.blake2b(f.encode(), digest_size=8).digest(), "little") for _, _, f in kept),
                dtype=np.uint64, count=len(documents))
        filtered = time.perf_counter()
        ids, lengths, labels = self.encoder.encode(documents, self.with_labels)
        done = time.perf_counter()
        return ChunkResult(chunk.source_index, docs_in, chunk.nbytes, ids, lengths, labels, hashes,
                           +dropped, parsed.replaced_lines,
                           {"convert": converted - started, "quality": filtered - converted, "tokenize": done - filtered})


_PROCESSOR: ChunkProcessor | None = None


def _worker_init(quality_config=None, kiwi_threads: int = 0) -> None:
    # The parent may have used the Rust thread pool; a forked child must not (it would deadlock).
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    if quality_config is not None:
        from rankzero.data.quality import QualityFilter

        _PROCESSOR.quality_filter = QualityFilter(quality_config, threads=kiwi_threads)
    # The builder turns SIGTERM into a failure marker; its workers just stop.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # If the builder is killed (SIGKILL), its workers must not keep burning the node's cores.
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass


def _process_in_worker(chunk) -> ChunkResult:
    return _PROCESSOR(chunk)


KIWI_THREADS_PER_PROCESS = 2


def _start_pool(workers: int, quality_config):
    """Where the per-chunk work runs; returns (executor or None for inline, the parent's quality filter).

    Without the Kiwi filter the work is the Rust tokenizer: threads in this process whose
    `encode_batch_fast` calls release the GIL and share one Rust thread pool of `workers` threads,
    while another thread parses the next chunk. That uses 18% less CPU than one single-threaded
    tokenizer per process (bench/RESULTS.md) and ships no data between processes.

    With it, Kiwi dominates. Each process runs Kiwi's own thread pool over a chunk's Korean documents
    (C++, no GIL) while its Python thread turns finished analyses into statistics; processes add
    Python throughput on larger machines: workers // 2 processes of 2 Kiwi threads each. A process
    builds its Kiwi after the fork — a forked Kiwi thread pool hangs. On a 2-core machine that is one
    process: this one, no fork at all.
    """
    if quality_config is None:
        if workers <= 1:
            os.environ.setdefault("RAYON_RS_NUM_THREADS", "1")
            return None, None
        os.environ.setdefault("RAYON_RS_NUM_THREADS", str(workers))  # read once, when the Rust pool starts
        return ThreadPoolExecutor(workers, thread_name_prefix="rankzero-encode"), None
    from rankzero.data.quality import QualityFilter

    processes = workers // KIWI_THREADS_PER_PROCESS
    if processes <= 1:
        os.environ.setdefault("RAYON_RS_NUM_THREADS", str(workers))
        return None, QualityFilter(quality_config, threads=workers)
    import multiprocessing

    return ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("fork"), initializer=_worker_init,
                               initargs=(quality_config, KIWI_THREADS_PER_PROCESS)), None


class _Ready:
    """A finished result with the Future interface, for the inline (one worker) path."""

    def __init__(self, value):
        self._value = value

    def result(self):
        return self._value


# ---------------------------------------------------------------------------------------------
# Progress


class Progress:
    """Prints items done, rate and ETA every few seconds; feeds the heartbeat waiters read."""

    def __init__(self, total_bytes: int | None, on_progress: Callable[[dict], None] | None):
        self.total_bytes = total_bytes
        self.on_progress = on_progress
        self.started = time.monotonic()
        self.last = 0.0
        self.docs = self.kept = self.bytes = self.tokens = 0
        self.stage = "encode"

    def update(self, docs: int, kept: int, nbytes: int, tokens: int) -> None:
        self.docs += docs
        self.kept += kept
        self.bytes += nbytes
        self.tokens += tokens
        now = time.monotonic()
        if now - self.last >= PROGRESS_EVERY_S:
            self.last = now
            self.report()

    def snapshot(self) -> dict:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        rate = self.bytes / elapsed
        eta = (self.total_bytes - self.bytes) / rate if self.total_bytes and rate > 0 else None
        return {"stage": self.stage, "docs": self.docs, "kept": self.kept, "bytes": self.bytes, "tokens": self.tokens,
                "elapsed_s": round(elapsed, 1), "mb_per_s": round(rate / 1e6, 2),
                "docs_per_s": round(self.docs / elapsed, 1), "eta_s": round(eta, 1) if eta is not None else None,
                "percent": round(100 * self.bytes / self.total_bytes, 1) if self.total_bytes else None}

    def report(self) -> None:
        snap = self.snapshot()
        kept = 100 * self.kept / self.docs if self.docs else 100.0
        eta = time.strftime("%H:%M:%S", time.gmtime(snap["eta_s"])) if snap["eta_s"] is not None else "?"
        done = f" ({snap['percent']:.1f}%)" if snap["percent"] is not None else ""
        print(f"[prepare] {snap['stage']}: {self.docs:,} docs, {self.bytes / 1e6:,.1f} MB{done}, "
              f"{snap['docs_per_s']:,.0f} docs/s, {snap['mb_per_s']:.1f} MB/s, kept {kept:.1f}%, "
              f"{self.tokens:,} tokens, ETA {eta}", file=sys.stderr, flush=True)
        if self.on_progress:
            self.on_progress(snap)


# ---------------------------------------------------------------------------------------------
# The build


@dataclass
class SourceStats:
    spec: str
    weight: float | None
    docs_in: int = 0
    docs_kept: int = 0
    bytes_in: int = 0
    tokens: int = 0
    ratio: float = 1.0
    tokens_out: int = 0
    documents_out: int = 0
    dropped: Counter = field(default_factory=Counter)


def build_dataset(data_args, seed: int, out_dir: Path, fingerprint: str, *, sources: list[Source] | None = None,
                  tokenizer: TokenizerInfo | None = None,
                  on_progress: Callable[[dict], None] | None = None) -> dict:
    """Build the dataset into `out_dir` (a private tmp dir) and return the manifest (not yet written)."""
    t_start = time.perf_counter()
    sources = sources or [resolve_source(spec) for spec in data_args.dataset]
    tokenizer = tokenizer or load_tokenizer(data_args.tokenizer_path)
    stats = [SourceStats(s.spec, s.weight) for s in sources]
    quality = quality_config(data_args)
    with_labels = data_args.mode == "sft"
    rng = np.random.default_rng(seed)
    bucket_dir = out_dir / "_buckets"
    t_setup = time.perf_counter()

    sizes = [s.total_bytes() for s in sources]
    progress = Progress(sum(sizes) if all(x is not None for x in sizes) else None, on_progress)
    seconds = Counter()
    # Without weights every document goes out exactly once, so blocks are packed and scattered as the
    # documents arrive (the bucket count is sized from the input bytes, which bound the tokens). With
    # weights the ratios need every source's token count first: documents are staged per source,
    # then read again (stage B).
    direct = all(s.weight is None for s in sources) and progress.total_bytes is not None
    with contextlib.ExitStack() as cleanup:
        if direct:
            scatter = cleanup.enter_context(
                BlockScatter(data_args, _bucket_count(progress.total_bytes, with_labels), bucket_dir, rng))
            sinks = [functools.partial(scatter.add, stat=stat) for stat in stats]
        else:
            staging = out_dir / "_staging"
            staging.mkdir(parents=True, exist_ok=True)
            writers = [cleanup.enter_context(StagedWriter(staging / f"source-{i:03d}.arrow", with_labels))
                       for i in range(len(sources))]
            sinks = [writer.write for writer in writers]
        # Stage A allocates millions of short-lived containers (parsed records, id lists) and makes no
        # reference cycles; the cyclic GC's passes over them cost ~0.3 CPU-s per 50 MiB, for nothing.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            _encode_sources(data_args, sources, tokenizer, quality, stats, sinks, progress, seconds)
        finally:
            if gc_was_enabled:
                gc.enable()
        t_encode = time.perf_counter()

        docs_kept = sum(s.docs_kept for s in stats)
        if docs_kept == 0:
            raise RankzeroError(_nothing_left_message(stats, data_args))
        progress.stage = "pack and shuffle"
        progress.report()  # also tells waiting ranks (via the heartbeat) that encoding is over
        if not direct:
            for writer in writers:
                writer.close()
            _mixing_ratios(stats)
            total_out_tokens = sum(s.tokens * s.ratio for s in stats)
            scatter = cleanup.enter_context(
                BlockScatter(data_args, _bucket_count(total_out_tokens, with_labels), bucket_dir, rng))
            _feed_staged(scatter, [w.path for w in writers], stats, rng)
            shutil.rmtree(staging)
        tail_tokens = scatter.finish()
        bucket_counts = scatter.counts
    t_pack = time.perf_counter()

    sequences = int(sum(bucket_counts))
    if sequences == 0:
        raise RankzeroError(
            f"packing: only {tail_tokens:,} tokens survived, fewer than one block of --max_seq_length "
            f"{data_args.max_seq_length}; add data or lower --max_seq_length")
    shards = _shuffle_buckets(bucket_dir, bucket_counts, out_dir, rng, with_labels, data_args.dataset_writer_batch_size,
                              fingerprint)
    shutil.rmtree(bucket_dir)
    t_write = time.perf_counter()

    tokens_out = int(sum(s.tokens_out for s in stats)) - tail_tokens
    total_bytes = sum(s.bytes_in for s in stats)
    dropped = Counter()
    for s in stats:
        dropped.update(s.dropped)
    timings = {"setup_s": t_setup - t_start, "encode_s": t_encode - t_setup, "pack_s": t_pack - t_encode,
               "shuffle_write_s": t_write - t_pack, "total_s": t_write - t_start,
               "encode_stage_seconds_summed_over_workers": {k: round(v, 3) for k, v in seconds.items()}}
    return {
        "fingerprint": fingerprint,
        "format_version": FORMAT_VERSION,
        "docs_in": sum(s.docs_in for s in stats),
        "docs_kept": docs_kept,
        "dropped": dict(sorted(dropped.items())),
        "tokens": tokens_out,
        "sequences": sequences,
        "shards": shards,
        "max_seq_length": data_args.max_seq_length,
        "packing": data_args.packing,
        "mode": data_args.mode,
        "columns": ["input_ids", "document_lengths"] + (["labels"] if with_labels else []),
        "tail_tokens_dropped": tail_tokens,
        "seed": seed,
        "sources": [_source_manifest(s, tokens_out + tail_tokens) for s in stats],
        "tokenizer": {"path": os.path.abspath(tokenizer.path), "sha256": tokenizer.content_hash,
                      "vocab_size": tokenizer.vocab_size, "eos_id": tokenizer.eos_id, "bos_ids": list(tokenizer.bos_ids)},
        "quality_filter": data_args.quality_filter,
        "quality_settings": quality.to_dict() if quality else None,
        "settings": {"text_column": data_args.text_column, "txt_sample_by": data_args.txt_sample_by,
                     "skip_bad_records": data_args.skip_bad_records, "on_decode_error": data_args.on_decode_error,
                     "num_proc": data_args.dataset_num_proc, "batch_size": data_args.dataset_batch_size,
                     "writer_batch_size": data_args.dataset_writer_batch_size},
        "timings": {k: (round(v, 3) if isinstance(v, float) else v) for k, v in timings.items()},
        "throughput": {"mb_per_s": round(total_bytes / 1e6 / max(timings["total_s"], 1e-9), 2),
                       "tokens_per_s": round(tokens_out / max(timings["total_s"], 1e-9)),
                       "docs_per_s": round(sum(s.docs_in for s in stats) / max(timings["total_s"], 1e-9), 1)},
        "bytes_in": total_bytes,
        "versions": _versions(),
    }


def quality_config(data_args):
    if data_args.quality_filter == "none":
        return None
    from rankzero.data.quality import QualityConfig

    return QualityConfig.from_yaml(data_args.quality_config) if data_args.quality_config else QualityConfig()


def _encode_sources(data_args, sources, tokenizer, quality_config, stats, sinks: list[Callable], progress: Progress,
                    seconds: Counter) -> None:
    """Stage A: every source's documents, tokenized, to `sinks[source_index](ids, lengths, labels)`."""
    global _PROCESSOR
    _PROCESSOR = processor = ChunkProcessor(data_args, tokenizer)
    workers = data_args.dataset_num_proc
    seen: set[int] = set()

    def consume(result: ChunkResult) -> None:
        stat = stats[result.source_index]
        ids, lengths, labels = result.ids, result.lengths, result.labels
        if result.hashes is not None:  # exact duplicates, across chunks and sources, first one wins
            keep = np.ones(len(lengths), dtype=bool)
            for index, digest in enumerate(result.hashes.tolist()):
                if digest in seen:
                    keep[index] = False
                else:
                    seen.add(digest)
            if not keep.all():
                result.dropped["duplicate"] += int((~keep).sum())
                ids, lengths, labels = _select_documents(ids, lengths, labels, keep)
        if len(lengths):
            sinks[result.source_index](ids, lengths, labels)
        stat.docs_in += result.docs_in
        stat.docs_kept += len(lengths)
        stat.bytes_in += result.bytes_in
        stat.tokens += len(ids)
        stat.dropped.update(result.dropped)
        if result.replaced_lines:
            stat.dropped["lines_with_replaced_bytes (kept)"] += result.replaced_lines
        seconds.update(result.seconds)
        progress.update(result.docs_in, len(lengths), result.bytes_in, len(ids))

    chunks = (chunk for index, source in enumerate(sources)
              for chunk in iter_chunks(source, index, data_args.dataset_batch_size, data_args.txt_sample_by))
    # With a process pool the workers build their own filters (see _worker_init); this one stays None.
    pool, processor.quality_filter = _start_pool(workers, quality_config)
    in_flight: deque = deque()
    try:
        for chunk in chunks:
            in_flight.append(pool.submit(_process_in_worker, chunk) if pool else _Ready(processor(chunk)))
            while len(in_flight) > 2 * workers:
                consume(in_flight.popleft().result())
        while in_flight:
            consume(in_flight.popleft().result())
    except BaseException:
        if isinstance(pool, ProcessPoolExecutor):
            # Stop now rather than after the chunks already queued (Python >= 3.14 has
            # pool.terminate_workers(); before it, the worker processes are only reachable privately).
            workers_alive = list((getattr(pool, "_processes", None) or {}).values())
            pool.shutdown(wait=False, cancel_futures=True)
            for process in workers_alive:
                process.terminate()
            pool = None
        raise
    finally:
        if pool:
            pool.shutdown(cancel_futures=True)
        _PROCESSOR = None
    progress.report()


class StagedWriter:
    """Appends tokenized documents (one row each) to an Arrow stream file."""

    def __init__(self, path: Path, with_labels: bool):
        fields = [("input_ids", pa.list_(pa.int32()))] + ([("labels", pa.list_(pa.int32()))] if with_labels else [])
        self.schema = pa.schema(fields)
        self.path = path
        self._writer = pa.ipc.new_stream(str(path), self.schema)

    def write(self, ids: np.ndarray, lengths: np.ndarray, labels: np.ndarray | None) -> None:
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        columns = [list_array(offsets, ids)]
        if labels is not None:
            columns.append(list_array(offsets, labels))
        self._writer.write_batch(pa.RecordBatch.from_arrays(columns, schema=self.schema))

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _read_staged(path: Path):
    """Yield (ids, lengths, labels) per record batch of a staging file, without memory-mapping it."""
    with pa.OSFile(str(path)) as handle:
        for batch in pa.ipc.open_stream(handle):
            column = batch.column("input_ids")
            offsets = numpy_view(column.offsets)
            lengths = np.diff(offsets).astype(np.int64)
            base = offsets[0]
            ids = numpy_view(column.values)[base:offsets[-1]]
            labels = None
            if "labels" in batch.schema.names:
                labels = numpy_view(batch.column("labels").values)[base:offsets[-1]]
            yield ids, lengths, labels


def _select_documents(ids: np.ndarray, lengths: np.ndarray, labels: np.ndarray | None, keep: np.ndarray):
    """The documents where `keep` is true, from flat ids (and labels) and per-document lengths."""
    token_mask = np.repeat(keep, lengths)
    return ids[token_mask], lengths[keep], (labels[token_mask] if labels is not None else None)


def _mixing_ratios(stats: list[SourceStats]) -> None:
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


def _bucket_count(tokens: float, with_labels: bool) -> int:
    """Buckets of about BUCKET_BYTES for this many tokens (int32 ids, and labels in SFT mode)."""
    return min(MAX_BUCKETS, max(1, math.ceil(tokens * 4 * (2 if with_labels else 1) / BUCKET_BYTES)))


class BlockScatter:
    """Stage B: packs documents into blocks and appends each block to a uniformly random bucket file."""

    def __init__(self, data_args, buckets: int, bucket_dir: Path, rng: np.random.Generator):
        bucket_dir.mkdir(parents=True, exist_ok=True)
        self.packer = Packer(data_args.max_seq_length, data_args.packing)
        self.bucket_dir = bucket_dir
        self.rng = rng
        self.writers: list = [None] * buckets
        self.counts = np.zeros(buckets, dtype=np.int64)

    def add(self, ids: np.ndarray, lengths: np.ndarray, labels: np.ndarray | None, stat: SourceStats) -> None:
        stat.tokens_out += int(lengths.sum())
        stat.documents_out += len(lengths)
        blocks = self.packer.add(ids, lengths, labels)
        if blocks is None:
            return
        batch = blocks.to_record_batch()
        buckets = len(self.writers)
        targets = self.rng.integers(0, buckets, len(batch)) if buckets > 1 else np.zeros(len(batch), dtype=np.int64)
        batch = batch.take(arrow_array(np.argsort(targets, kind="stable")))
        start = 0
        for bucket, count in enumerate(np.bincount(targets, minlength=buckets).tolist()):
            if count:
                if self.writers[bucket] is None:
                    path = self.bucket_dir / f"bucket-{bucket:05d}.arrow"
                    self.writers[bucket] = pa.ipc.new_stream(str(path), batch.schema)
                self.writers[bucket].write_batch(batch.slice(start, count))
                self.counts[bucket] += count
                start += count

    def finish(self) -> int:
        """Close the buckets; return the tokens of the final partial block (left out)."""
        self.close()
        return self.packer.finish()

    def close(self) -> None:
        for index, writer in enumerate(self.writers):
            if writer is not None:
                writer.close()
                self.writers[index] = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _feed_staged(scatter: BlockScatter, staged: list[Path], stats: list[SourceStats], rng: np.random.Generator) -> None:
    """Weighted mixing: each source's staged documents, `ratio` times over (the last pass a random subset)."""
    for path, stat in zip(staged, stats):
        passes = math.ceil(stat.ratio - 1e-9)
        for repeat in range(passes):
            keep_share = min(1.0, stat.ratio - repeat)
            for ids, lengths, labels in _read_staged(path):
                if keep_share < 1.0:
                    keep = rng.random(len(lengths)) < keep_share
                    ids, lengths, labels = _select_documents(ids, lengths, labels, keep)
                scatter.add(ids, lengths, labels, stat)
            pa.default_memory_pool().release_unused()


def _shuffle_buckets(bucket_dir: Path, counts: np.ndarray, out_dir: Path, rng: np.random.Generator,
                     with_labels: bool, writer_batch_size: int, fingerprint: str) -> int:
    """Permute each bucket in memory and append it to the output shards (save_to_disk format).

    Blocks went to buckets uniformly at random, so permuting within buckets and concatenating them
    is a uniform shuffle of all blocks (the two-pass external shuffle), with one bucket in memory.
    """
    columns = ["input_ids", "document_lengths"] + (["labels"] if with_labels else [])
    schema = output_schema(columns)
    shard_paths: list[Path] = []
    writer, written = None, 0
    try:
        for bucket, count in enumerate(counts.tolist()):
            if not count:
                continue
            path = bucket_dir / f"bucket-{bucket:05d}.arrow"
            with pa.OSFile(str(path)) as handle:
                table = pa.ipc.open_stream(handle).read_all()
            table = table.take(arrow_array(rng.permutation(len(table)))).select(schema.names)
            if writer is None or written >= SHARD_BYTES:
                if writer is not None:
                    writer.close()
                shard_paths.append(out_dir / f"shard-{len(shard_paths):05d}.arrow")
                writer, written = pa.ipc.new_stream(str(shard_paths[-1]), schema), 0
            writer.write_table(pa.Table.from_arrays(table.columns, schema=schema), max_chunksize=writer_batch_size)
            written += table.nbytes
            del table
            path.unlink()
            pa.default_memory_pool().release_unused()  # Arrow's allocator keeps freed buffers otherwise
    finally:
        if writer is not None:
            writer.close()
    shards = len(shard_paths)
    for index, path in enumerate(shard_paths):
        path.rename(out_dir / f"data-{index:05d}-of-{shards:05d}.arrow")
    _write_dataset_metadata(out_dir, columns, shards, fingerprint)
    return shards


# The save_to_disk format, written with pyarrow alone. `datasets` would write the same files, but
# importing it costs ~0.7 CPU-s (about a tenth of preparing 50 MiB on 2 cores, bench/RESULTS.md)
# and the prepare path uses nothing else from it. tests/test_prepare.py checks these files against
# the ones the installed `datasets` writes, so a format change there fails a test, not a load.
_INT32_LIST_FEATURE = {"feature": {"dtype": "int32", "_type": "Value"}, "_type": "List"}  # datasets >= 4.0


def output_features(columns: list[str]) -> dict:
    """The `datasets.Features` of the output, as datasets serialises them (every column list<int32>)."""
    return {name: _INT32_LIST_FEATURE for name in columns}


def output_schema(columns: list[str]) -> pa.Schema:
    """The shards' Arrow schema, with the features metadata `datasets` reads back."""
    metadata = {"huggingface": json.dumps({"info": {"features": output_features(columns)}})}
    return pa.schema([(name, pa.list_(pa.int32())) for name in columns], metadata=metadata)


def _write_dataset_metadata(out_dir: Path, columns: list[str], shards: int, fingerprint: str) -> None:
    """state.json and dataset_info.json, as `Dataset.save_to_disk` writes them, for our shard list."""
    state = {"_data_files": [{"filename": f"data-{i:05d}-of-{shards:05d}.arrow"} for i in range(shards)],
             "_fingerprint": fingerprint, "_format_columns": None, "_format_kwargs": {}, "_format_type": None,
             "_output_all_columns": False, "_split": None}
    info = {"citation": "", "description": "", "features": output_features(columns), "homepage": "", "license": ""}
    (out_dir / "state.json").write_text(json.dumps(state, indent=2, sort_keys=True))
    (out_dir / "dataset_info.json").write_text(json.dumps(info, indent=2, sort_keys=True))


def _source_manifest(stat: SourceStats, total_tokens_out: int) -> dict:
    entry = {k: v for k, v in asdict(stat).items() if k != "dropped"}
    entry["dropped"] = dict(stat.dropped)
    entry["ratio"] = round(stat.ratio, 6)
    entry["share_of_output_tokens"] = round(stat.tokens_out / total_tokens_out, 6) if total_tokens_out else None
    return entry


def _nothing_left_message(stats: list[SourceStats], data_args) -> str:
    docs_in = sum(s.docs_in for s in stats)
    if docs_in == 0:
        return f"sources: the sources {data_args.dataset} yielded no documents (empty files?)"
    dropped = Counter()
    for s in stats:
        dropped.update(s.dropped)
    stage = "quality filter" if any(r not in ("bad_record", "empty", "duplicate") for r in dropped) else "records→text"
    top = ", ".join(f"{reason}: {count:,}" for reason, count in dropped.most_common(5))
    return f"{stage}: all {docs_in:,} documents were removed ({top}); nothing is left to prepare"


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    from rankzero import malloc

    found = {"python": platform.python_version(), "malloc": malloc.active()}
    for package in ("rankzero", "datasets", "tokenizers", "pyarrow", "numpy", "kiwipiepy"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
    return found
