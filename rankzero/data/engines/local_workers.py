"""Where the local engine's per-chunk work runs: threads of this process, or spawned Kiwi worker processes.

    threads = builder_threads(workers, filtering)             # cores, workers, Kiwi processes, Rust pool sizes
    pool, stage = start_pool(spec, tokenizer, engine, workers)   # (executor or None, this process's stage or None)
    pool.submit(run_in_worker, chunk, known)                  # a worker process's chunk, on its own stage

local.py decides what is sent and consumes the results in order; this module only sizes and starts the
workers, so the output never depends on which of them ran a chunk.
"""

from __future__ import annotations

import signal
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

from rankzero.data.encode import TokenizerInfo
from rankzero.data.stage import ChunkResult, Stage, StageSpec
from rankzero.runtime import usable_cpu_count

KIWI_THREADS_PER_PROCESS = 2


def builder_threads(workers: int, filtering: bool) -> dict:
    """How the builder spends the cores it is given (its CPU affinity: taskset, Slurm's --cpus-per-task):
    `workers` (--dataset_num_proc) threads encoding chunks (or, with the Kiwi filter, `filtering`, workers // 2
    processes of 2 Kiwi threads each), and Rust tokenizer pools that together span every core (one shared by the
    threads, or one per Kiwi process)."""
    cores, processes = usable_cpu_count(), _kiwi_processes(workers, filtering)
    return {"cores": cores, "workers": workers, "kiwi_processes": processes,
            "rust_threads": max(1, cores // processes) if processes else cores}


def _kiwi_processes(workers: int, filtering: bool) -> int:
    """Worker processes of the Kiwi filter (0: none, the filter runs in the builder or is off)."""
    processes = workers // KIWI_THREADS_PER_PROCESS
    return processes if filtering and processes > 1 else 0


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


def start_pool(spec: StageSpec, tokenizer: TokenizerInfo, engine, workers: int):
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
    processes = _kiwi_processes(workers, spec.quality is not None)  # 0 without the filter
    if processes:
        import multiprocessing

        spawn, rust_pool = multiprocessing.get_context("spawn"), builder_threads(workers, True)["rust_threads"]
        return ProcessPoolExecutor(processes, mp_context=spawn, initializer=_worker_init,
                                   initargs=(spec, KIWI_THREADS_PER_PROCESS, rust_pool)), None
    pool, quality_filter = None, None
    if spec.quality is not None:  # one process, this one: its Kiwi pool gets the workers
        from rankzero.data.quality import QualityFilter

        quality_filter = QualityFilter(spec.quality, threads=workers)
    elif workers > 1:
        pool = ThreadPoolExecutor(workers, thread_name_prefix="rankzero-encode")
    return pool, Stage(spec, tokenizer, engine, quality_filter)
