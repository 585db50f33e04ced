"""The local build engine: one builder process (plus its threads or worker processes) on one machine.

    manifest = build_local(plan, out_dir, on_progress)     # called by pipeline.build_dataset

A. *Encode* (parallel; local_encode.py). This process cuts the sources into chunks; the stage (`stage.py`)
   parses, converts, filters and tokenizes each chunk — in threads sharing one Rust tokenizer pool when the
   work is the tokenizer, in spawned worker processes when the Kiwi filter makes it Python-bound. At most `2 × workers` chunks are in flight and results are consumed in submission
   order, so the output never depends on worker count or timing (each chunk knows what the chunks consumed
   before it learnt of their raw lines: stage.known_lines); exact duplicates are dropped
   globally, first one wins (dedup/exact.py), and held-out documents go to the validation split
   (split.py), staged in a file of their own. With `--dedup near` every surviving document's MinHash
   signature goes to a ledger in the same order (engines/near_ledger.py); once all are encoded, the near-copies
   are decided over the whole corpus (dedup/near.py) and left out when the staged documents are read.
   The counts and these decisions are kept in the build's `Tally` (tally.py), as the Ray engine keeps them.
B. *Mix and pack*. Documents are packed into blocks and each block goes to a random bucket file, as
   stage A's results arrive (when every source's size is known: hub sources are staged too). With
   `SPEC@WEIGHT`, stage A stages each source's documents in a file; once per-source token counts are
   known the ratios are exact: a source above its natural share is read again (repeats), below it is
   subsampled (seeded).
C. *Shuffle*. Each bucket (~16 MB) is loaded, permuted and appended to the output shards (~256 MB),
   so the dataset is a uniform seeded shuffle of the blocks while memory stays at one bucket,
   whatever the corpus size.

The validation split is packed and shuffled the same way into `out_dir/validation/` (its own packers, one
per source, buckets and seeded random stream, so a split leaves the training rows' randomness as it was),
before the training rows are (a split too small for a row stops the build before their shuffle). Weighted
mixing applies to training documents only: each held-out document is taken once.
"""

from __future__ import annotations

import contextlib
import gc
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa

from rankzero.data.engines.local_encode import KIWI_THREADS_PER_PROCESS, encode_sources
from rankzero.data.engines.near_ledger import NearLedger
from rankzero.data.engines.tally import SourceStats, Tally
from rankzero.data.mixing import passes, subsample
from rankzero.data.pack import make_packer, select_documents
from rankzero.data.plan import Output, Plan
from rankzero.data.shards import BlockScatter, StagedWriter, bucket_count, read_staged
from rankzero.data.stage import rust_threads
from rankzero.runtime import usable_cpu_count


def build_local(plan: Plan, out_dir: Path, on_progress: Callable[[dict], None] | None = None) -> dict:
    """Build the dataset into `out_dir` (a private tmp dir) and return the manifest (not yet written)."""
    t_start = time.perf_counter()
    staging = out_dir / "_staging"
    staging.mkdir(parents=True)
    threads = builder_threads(plan.workers.dataset_num_proc, plan.quality is not None)
    with contextlib.ExitStack() as cleanup:
        # The builder's threads are its own decision, made before anything here encodes (the engine check does):
        # the tokenizers' Rust pools get every core this process may run on, whatever the environment exported
        # for the training ranks (RAYON_NUM_THREADS = cores / GPUs, say), which are back once the rows are packed.
        threads["replaced_environment"] = cleanup.enter_context(rust_threads(threads["rust_threads"]))
        start = plan.start(staging / "evaluation.jsonl")
        output = start.output
        rng = np.random.default_rng(output.seed)
        bucket_dir = out_dir / "_buckets"
        packer = make_packer(output.packing, whole_samples=output.whole_samples)
        t_setup = time.perf_counter()

        sizes = [s.total_bytes() for s in plan.sources]
        total_bytes = sum(sizes) if all(x is not None for x in sizes) else None
        tally = Tally(start.corpus, staging / "near", total_bytes, on_progress)
        stats, progress, ledger = tally.stats, tally.progress, tally.ledger
        seconds = Counter()
        # Without weights every document goes out exactly once, so blocks are packed and scattered as the
        # documents arrive (the bucket count is sized from the input bytes, which bound the tokens). With
        # weights the ratios need every source's token count first: documents are staged per source,
        # then read again (stage B).
        # Near dedup decides over the whole corpus once it is encoded: documents are staged until then too.
        direct = (all(s.weight is None for s in plan.sources) and progress.total_bytes is not None
                  and not plan.near_dedup)
        if direct:
            scatter = cleanup.enter_context(
                BlockScatter(packer, bucket_count(progress.total_bytes, output.whole_samples), bucket_dir, rng))
            sinks = [_counting_sink(scatter, stat) for stat in stats]
        else:
            writers = [cleanup.enter_context(StagedWriter(staging / f"source-{i:03d}.arrow", output.whole_samples))
                       for i in range(len(plan.sources))]
            sinks = [writer.write for writer in writers]
        held_out, held_sources = None, []  # the held-out documents, and (source, documents) per batch of them
        if output.validation:
            held_out = cleanup.enter_context(StagedWriter(staging / "validation.arrow", output.whole_samples))

        def hold(source: int, ids: np.ndarray, lengths: np.ndarray, labels: np.ndarray | None) -> None:
            held_sources.append((source, len(lengths)))
            held_out.write(ids, lengths, labels)
        # Stage A allocates millions of short-lived containers (parsed records, id lists) and makes no
        # reference cycles; the cyclic GC's passes over them cost CPU time for nothing.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            encode_sources(plan.sources, start.reading, start.spec, plan.tokenizer, start.engine.engine, threads,
                           tally, sinks, hold if held_out else None, seconds)
        finally:
            if gc_was_enabled:
                gc.enable()
        t_encode = time.perf_counter()
        if ledger is not None:
            for writer in writers + ([held_out] if held_out else []):
                writer.close()
            tally.decide_near(_staged_place(ledger, staging), out_dir / "dedup_samples.jsonl")
        t_dedup = time.perf_counter()

        tally.check()
        progress.phase = "pack and shuffle"
        progress.report()  # also tells waiting ranks (via the heartbeat) that encoding is over
        # The validation split first: one too small for a row stops the build before the training rows' shuffle.
        validation = None
        if held_out is not None:
            held_out.close()
            validation = _write_validation(output, held_out.path, held_sources, sum(s.validation_tokens for s in stats),
                                           out_dir, ledger.validation_keep() if ledger else None)
        t_validation = time.perf_counter()
        if not direct:
            for writer in writers:
                writer.close()
            total_out_tokens = sum(s.tokens * s.ratio for s in stats if not s.evaluation)
            scatter = cleanup.enter_context(
                BlockScatter(packer, bucket_count(total_out_tokens, output.whole_samples), bucket_dir, rng))
            _feed_staged(scatter, [w.path for w in writers], stats, rng, ledger)
            for writer in writers:  # free their disk before the shards are written
                writer.path.unlink()
        scatter.finish()
    t_pack = time.perf_counter()

    training = scatter.write_shards(out_dir, output.columns, output.writer_batch_size, output.packing.max_seq_length,
                                    output.fingerprint)
    shutil.rmtree(staging, ignore_errors=True)
    t_write = time.perf_counter()

    timings = {"setup_s": t_setup - t_start, "encode_s": t_encode - t_setup, "near_dedup_s": t_dedup - t_encode,
               "pack_s": t_pack - t_validation,
               "shuffle_write_s": t_write - t_pack, "validation_s": t_validation - t_dedup,
               "total_s": t_write - t_start}
    return tally.manifest(start.engine, out_dir, training, validation, timings=timings, worker_seconds=seconds,
                          extra={"builder_threads": threads})


def builder_threads(workers: int, filtering: bool) -> dict:
    """How the builder spends the cores it is given (its CPU affinity: taskset, Slurm's --cpus-per-task):
    `workers` (--dataset_num_proc) threads encoding chunks (or, with the Kiwi filter, `filtering`, workers // 2
    processes of 2 Kiwi threads each: local_encode.start_pool), and Rust tokenizer pools that together span every
    core (one shared by the threads, or one per Kiwi process)."""
    processes = workers // KIWI_THREADS_PER_PROCESS
    processes = processes if filtering and processes > 1 else 0  # else the filter runs in the builder, or is off
    cores = usable_cpu_count()
    return {"cores": cores, "workers": workers, "kiwi_processes": processes,
            "rust_threads": max(1, cores // processes) if processes else cores}


def _write_validation(output: Output, staged: Path, held_sources: list[tuple[int, int]], tokens: int, out_dir: Path,
                      keep: np.ndarray | None) -> dict:
    """The held-out documents (`tokens` in all, less the near-copies `keep` leaves out; `held_sources`: (source,
    documents) per batch staged), packed as the training rows are but each source on its own, shuffled into
    `out_dir/validation/`; returns the rows' sequences, shards and tail tokens left out."""
    # A random stream of its own: with or without a split, the training rows draw the same numbers.
    rng = np.random.default_rng([output.seed, 5])
    bucket_dir, target = out_dir / "_validation_buckets", out_dir / "validation"
    packer = make_packer(output.packing, output.whole_samples, per_source=True)
    sources = np.repeat(*np.array(held_sources, dtype=np.int64).reshape(-1, 2).T)
    with BlockScatter(packer, bucket_count(tokens, output.whole_samples), bucket_dir, rng) as scatter:
        for ids, lengths, labels, document_sources in _kept_documents(read_staged(staged), keep, sources):
            scatter.add(ids, lengths, labels, document_sources)
        scatter.finish()
        target.mkdir()
        return scatter.write_shards(target, output.validation_columns, output.writer_batch_size,
                                    output.packing.max_seq_length, f"{output.fingerprint}-validation", validation=True)


def _staged_place(ledger: NearLedger, staging: Path) -> Callable[[int], tuple[Path, int]]:
    """Where this engine staged a document of the ledger (by number): (staged file, position in it), one file per
    source for training documents, one for all held-out ones; for dedup_samples.jsonl."""
    def where(number: int) -> tuple[Path, int]:
        source, held, position = ledger.locate(number)
        return (staging / "validation.arrow" if held else staging / f"source-{source:03d}.arrow"), position

    return where


def _counting_sink(scatter: BlockScatter, stat: SourceStats) -> Callable:
    def add(ids: np.ndarray, lengths: np.ndarray, labels: np.ndarray | None) -> None:
        stat.packed(len(lengths), int(lengths.sum()))
        scatter.add(ids, lengths, labels)

    return add


# ---------------------------------------------------------------------------------------------
# Stage B with weights


def _feed_staged(scatter: BlockScatter, staged: list[Path], stats: list[SourceStats], rng: np.random.Generator,
                 ledger: NearLedger | None) -> None:
    """Weighted mixing: each source's staged documents (less the near-copies the ledger removed), `ratio` times over
    (the last pass a random subset)."""
    for index, (path, stat) in enumerate(zip(staged, stats)):
        source_keep = ledger.training_keep(index) if ledger is not None else None
        sink = _counting_sink(scatter, stat)
        for share in passes(stat.ratio):
            for ids, lengths, labels, _ in _kept_documents(read_staged(path), source_keep):
                sink(*subsample(ids, lengths, labels, share, rng))
            pa.default_memory_pool().release_unused()


def _kept_documents(batches, keep: np.ndarray | None, sources: np.ndarray | None = None):
    """(ids, lengths, labels, sources) batches of staged documents less those `keep` (a bool per document, over all
    the batches in order: the ledger's training_keep or validation_keep) leaves out; everything when `keep` is None.
    `sources`: a source per document, in the same order (None: None in every batch)."""
    offset = 0
    for ids, lengths, labels in batches:
        mine = slice(offset, offset + len(lengths))
        offset += len(lengths)
        batch_sources = sources[mine] if sources is not None else None
        if keep is not None and not keep[mine].all():
            ids, lengths, labels = select_documents(ids, lengths, labels, keep[mine])
            batch_sources = batch_sources[keep[mine]] if sources is not None else None
        yield ids, lengths, labels, batch_sources
