"""The local engine's stage A: every source's chunks through the stage, in this process's threads or in spawned
Kiwi worker processes, and the results consumed in submission order into the build's tally and sinks.

    encode_sources(sources, reading, spec, tokenizer, engine, threads, tally, sinks, held_out_sink, seconds)

`threads`: how the builder spends its cores, decided once by the engine (local.builder_threads: workers, Kiwi
processes, Rust pool sizes). At most `2 × workers` chunks are in flight and results are consumed in order, so the output never depends on
worker count, timing or which worker ran a chunk (each chunk knows what the chunks consumed before it learnt of
their raw lines: stage.known_lines). Consuming a result counts it and decides it in source order (exact dedup and
the split: tally.holdout; near dedup: the ledger's signatures), then hands the kept documents to the sink of
their source and the held-out ones to the validation sink. local.py packs, shuffles and writes what comes out.
"""

from __future__ import annotations

import signal
from collections import Counter, deque
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Callable

import numpy as np

from rankzero.data.dedup.exact import LineVerdicts
from rankzero.data.encode import TokenizerInfo
from rankzero.data.engines.tally import Tally
from rankzero.data.inputs.readers import iter_chunks
from rankzero.data.inputs.specs import Source
from rankzero.data.pack import select_documents
from rankzero.data.plan import Reading
from rankzero.data.stage import ChunkResult, Stage, StageSpec, known_lines, remember_lines

KIWI_THREADS_PER_PROCESS = 2


# A worker process's own stage, built by its initializer: a process pool hands its tasks nothing else that
# outlives one call (the builder's own stage never goes here; it is passed where it runs).
_WORKER_STAGE: Stage | None = None


def _worker_init(spec: StageSpec, threads: int, rust_threads: int) -> None:
    global _WORKER_STAGE
    _WORKER_STAGE = Stage.in_worker(spec, threads, rust_threads)
    # The builder turns SIGTERM into a failure marker; its workers just stop.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # If the builder is killed (SIGKILL), its workers must not keep burning the node's cores.
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass


def run_in_worker(chunk, known) -> ChunkResult:
    return _WORKER_STAGE(chunk, None, known)


def start_pool(spec: StageSpec, tokenizer: TokenizerInfo, engine, threads: dict):
    """Where the per-chunk work runs: (executor, or None to run inline; this process's stage, or None when every
    chunk goes to a worker process).

    Without the Kiwi filter the work is the tokenizer: threads in this process whose encode calls
    release the GIL and share one Rust thread pool of every core, while another thread parses the next
    chunk. Nothing is shipped between processes.

    With it, Kiwi dominates. Each process runs Kiwi's own thread pool over a chunk's Korean documents
    (C++, no GIL) while its Python thread turns finished analyses into statistics; processes add
    Python throughput on larger machines: workers // 2 processes of 2 Kiwi threads each, started
    fresh (spawn) and building their own stage, each with a Rust pool of its share of the cores (Kiwi
    and the tokenizer take turns there). On a 2-core machine that is one process: this one.
    """
    workers, processes = threads["workers"], threads["kiwi_processes"]  # no Kiwi processes without the filter
    if processes:
        import multiprocessing

        return ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_init,
                                   initargs=(spec, KIWI_THREADS_PER_PROCESS, threads["rust_threads"])), None
    pool, quality_filter = None, None
    if spec.quality is not None:  # one process, this one: its Kiwi pool gets the workers
        from rankzero.data.quality import QualityFilter

        quality_filter = QualityFilter(spec.quality, threads=workers)
    elif workers > 1:
        pool = ThreadPoolExecutor(workers, thread_name_prefix="rankzero-encode")
    return pool, Stage(spec, tokenizer, engine, quality_filter)


def encode_sources(sources: tuple[Source, ...], reading: Reading, spec: StageSpec, tokenizer: TokenizerInfo,
                   engine, threads: dict, tally: Tally, sinks: list[Callable], held_out_sink: Callable | None,
                   seconds: Counter) -> None:
    """Stage A: every source's training documents, read as `reading` says and run through the stage `spec` by
    `workers` (--dataset_num_proc), tokenized, to `sinks[source_index](ids, lengths, labels)`, the held-out ones to
    `held_out_sink(source_index, ids, lengths, labels)`; counted, decided (exact dedup, the split) and, with near
    dedup, their signatures given to the ledger in the tally, in source order."""
    pool, stage = start_pool(spec, tokenizer, engine, threads)
    workers = threads["workers"]
    stats, holdout, ledger, screened, progress = tally.stats, tally.holdout, tally.ledger, tally.screened, tally.progress

    def consume(result: ChunkResult) -> None:
        stat = stats[result.source_index]
        stat.add_file(result.path, result.docs_in, result.bytes_in, result.dropped)  # the stage's drops only
        decision = holdout(result.source_index, result.hashes, len(result.lengths))
        result.dropped.update(decision.dropped)
        ids, lengths, labels = _select(result, decision.train)
        held_documents = held_tokens = 0
        if decision.validation.any():
            held = _select(result, decision.validation)
            held_out_sink(result.source_index, *held)
            held_documents, held_tokens = len(held[1]), len(held[0])
        truncated = result.truncated if result.truncated is not None else np.zeros(len(result.lengths), dtype=bool)
        kept, tokens = len(lengths) + held_documents, len(ids) + held_tokens
        stat.add(result.docs_in, kept, result.bytes_in, tokens, result.dropped, result.replaced_lines,
                 int(truncated[decision.train | decision.validation].sum()))
        stat.hold_out(held_documents, held_tokens, int(truncated[decision.validation].sum()))
        if len(lengths):
            sinks[result.source_index](ids, lengths, labels)
        if verdicts is not None:
            remember_lines(verdicts, result, decision.train | decision.validation)
        if ledger is not None:
            survivors = decision.train | decision.validation
            ledger.add(result.source_index, result.signatures[survivors], result.shingles[survivors],
                       decision.validation[survivors], result.lengths[survivors], truncated[survivors],
                       (result.path, result.lines[survivors]))
        seconds.update(result.seconds)
        if result.quality_samples:
            tally.quality_samples.append(result.quality_samples)
        screened.add(result.source_index, result.screen)
        progress.update(result.docs_in, kept, result.bytes_in, tokens, result.dropped.get("exact_duplicate", 0))

    chunks = (chunk for index, source in enumerate(sources)
              for chunk in iter_chunks(source, index, reading.batch_size, reading.txt_sample_by,
                                       reading.max_document_bytes))
    # Threads run the builder's own stage, skipping the texts that consumed chunks already kept (consumed in
    # source order, so those are earlier); worker processes run their own (run_in_worker).
    seen = holdout.duplicates.seen if holdout.duplicates is not None else None
    # What consumed chunks learnt of their raw lines: the lines of kept documents, whose repeats are dropped unparsed,
    # and the quality verdicts. This process's stage looks a chunk's lines up when it runs, knowing every chunk
    # consumed by then; in a thread pool (never with the filter) the only code is STANDS_IN, so a look-up racing an
    # add can miss a key but not read another's code. Worker processes get them as each chunk is sent.
    verdicts = LineVerdicts() if spec.keys_lines else None
    assert stage is None or pool is None or spec.quality is None
    if stage is not None:
        run, known = (lambda chunk: stage(chunk, seen, known_lines(verdicts, chunk))), (lambda chunk: ())
    else:
        run, known = run_in_worker, (lambda chunk: (known_lines(verdicts, chunk),))
    in_flight: deque = deque()
    try:
        for chunk in chunks:
            if pool:
                in_flight.append(pool.submit(run, chunk, *known(chunk)))
            else:  # one worker: the chunk runs here and is consumed at once, so the next one knows its lines
                done = Future()
                done.set_result(run(chunk))
                in_flight.append(done)
            while len(in_flight) > (2 * workers if pool else 0):
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
    progress.report()


def _select(result: ChunkResult, keep: np.ndarray):
    """(ids, lengths, labels) of the chunk's documents where `keep` is true (no copy when all are)."""
    if keep.all():
        return result.ids, result.lengths, result.labels
    return select_documents(result.ids, result.lengths, result.labels, keep)
