"""The Ray engine: the same stage on every CPU of a Ray cluster, published under the same protocol.

    manifest = build_ray(plan, out_dir, on_progress)     # pipeline.build_dataset with --prep_engine ray

The driver (the rank that builds) joins the cluster named by --ray_address or RAY_ADDRESS, or starts
a local one, cuts the sources into tasks (ray_tasks.py) and runs them as Ray Data tasks (a function, not
an actor pool): each worker process builds its tokenizer and Kiwi from paths on its first task and keeps
them for the next, and both passes run on the same pooled workers, so the second starts no process. A
task declares its memory, so Kiwi's ~500 MB caps the tasks per node. Tasks write Arrow files straight
into a work dir on the shared filesystem, `FP.ray-work/` beside the build dir; only counts come back to
the driver.

    --dedup none,           one pass: each task packs its documents into blocks, permutes them, and
    no weights, no          writes one shard plus its unpacked tail (with --validation_split_percentage
    --eval_dataset          it picks its held-out documents by their hashes, and packs them apart)
    --dedup exact or        two passes: tasks stage their documents, hashes (and with near, MinHash
    near, SPEC@WEIGHT or    signatures); the driver finds the exact duplicates over the whole corpus,
    --eval_dataset          the held-out documents, the near-copies (split.py, dedup/near.py, in task
                            order: the local engine's decisions) and the mixing ratios; then each
                            task packs what is left, each split apart

The driver packs the tails (each shorter than a block) into one last shard per split, so the number of
full blocks equals the local engine's, lists the shards in a seeded random order, writes the
save_to_disk metadata (the validation split's in `validation/`) and returns; the handoff writes the
manifest last and publishes. Shuffle trade-off: blocks are
permuted within a task's shard and shards are ordered at random, not one uniform permutation of all
blocks as the local engine does; the Trainer's sampler shuffles uniformly anyway.

The work dir outlives a crashed driver: a rerun with the same fingerprint and task list keeps the
tasks whose meta file exists and runs the rest (`tasks.json` says which list it was made for).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import shutil
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa

from rankzero.data.engines.progress import Progress
from rankzero.data.engines.ray_tasks import Job, plan_tasks, run_tasks
from rankzero.data.engines.ray_work import task_file, task_rows, work_dir, write_npz_atomic
from rankzero.data.engines.tally import SourceStats, Tally
from rankzero.data.pack import make_packer
from rankzero.data.plan import Output, Plan
from rankzero.data.shards import (arrow_array, conform, name_data_files, output_schema, require_blocks,
                                  write_dataset_metadata)
from rankzero.errors import RankzeroError
from rankzero.files import read_json

logger = logging.getLogger(__name__)

KIWI_THREADS_PER_TASK = 2
TASK_MEMORY = {True: 900 << 20, False: 400 << 20}  # with / without Kiwi (its model is ~500 MB)


def build_ray(plan: Plan, out_dir: Path, on_progress: Callable[[dict], None] | None = None) -> dict:
    t_start = time.perf_counter()
    task_bytes = max(1, int(plan.workers.ray_task_mb * (1 << 20)))
    tasks = plan_tasks(plan.sources, task_bytes, plan.source_config.txt_sample_by)
    work = work_dir(out_dir.parent / f"{plan.fingerprint}.ray-work", plan.fingerprint, tasks)
    start = plan.start(work / "evaluation.jsonl")
    output = start.output
    tally = Tally(start.corpus, work / "near", sum(t.nbytes for t in tasks), on_progress)
    stats, progress = tally.stats, tally.progress
    # Dedup, weights and evaluation sources need decisions over the whole corpus (or every source's count).
    two_pass = plan.exact_dedup or any(s.weight is not None or s.evaluation for s in plan.sources)
    t_dedup = 0.0
    t_setup = time.perf_counter()

    with ray_session(plan.workers.ray_address, plan.workers.dataset_num_proc) as cluster:
        t_ray = time.perf_counter()
        threads = KIWI_THREADS_PER_TASK if plan.quality is not None else 1
        job = Job.of(start.spec, start.reading, output, plan.held_out_below, threads, work,
                     "stage" if two_pass else "single")
        first = "stage.json" if two_pass else "pack.json"
        reused = [t for t in tasks if task_file(work, t.index, first).exists()]
        _run_phase(job, [t for t in tasks if t not in reused], cluster, progress, reused)
        t_encode = time.perf_counter()
        # Counted, decided and checked once, whichever way: one-pass tasks packed already and picked their held-out
        # documents themselves; two passes decide here, before anything is packed.
        encoded = _read_metas(work, tasks, first)
        _count_encoded(encoded, stats, held_out_by_tasks=not two_pass)
        if two_pass:
            started = time.perf_counter()
            _decide(work, tasks, encoded, tally, plan.needs_hashes, out_dir / "dedup_samples.jsonl")
            t_dedup = time.perf_counter() - started
        tally.check()
        if two_pass:
            progress.report()
            job = dataclasses.replace(job, phase="pack", ratios={str(i): s.ratio for i, s in enumerate(stats)})
            packing = Progress(progress.total_bytes, on_progress)
            packing.phase = "pack"
            todo = [t for t in tasks if not task_file(work, t.index, "pack.json").exists()]
            _run_phase(job, todo, cluster, packing, [t for t in tasks if t not in todo])
        packed = _read_metas(work, tasks, "pack.json") if two_pass else encoded
        t_stop = time.perf_counter()
    for meta in packed:
        stats[meta["source_index"]].packed(meta["documents_out"], meta["tokens_out"])
    t_pack = time.perf_counter()

    splits = {"training": out_dir, **({"validation": out_dir / "validation"} if output.validation else {})}
    written = {split: _finish_shards(output, work, tasks, packed, target, validation=split == "validation")
               for split, target in splits.items()}
    shutil.rmtree(work)
    t_write = time.perf_counter()
    timings = {"setup_s": t_setup - t_start, "ray_start_s": t_ray - t_setup, "encode_s": t_encode - t_ray,
               "near_dedup_s": t_dedup,
               "pack_s": t_stop - t_encode, "ray_stop_s": t_pack - t_stop, "shuffle_write_s": t_write - t_pack,
               "total_s": t_write - t_start}
    worker_seconds = Counter()
    for meta in encoded:  # in task order: the documents' order, as the local engine adds them
        worker_seconds.update(meta.get("seconds", {}))
        tally.screened.add(meta["source_index"], meta.get("screen"))
        tally.quality_samples.append(meta.get("quality_samples", []))
    extra = {"prep_engine": {"name": "ray", "cluster": cluster.describe, "tasks": len(tasks), "task_bytes": task_bytes,
                             "reused_tasks": len(reused), "passes": 2 if two_pass else 1,
                             **_processes(encoded, packed if two_pass else []),
                             # Exact copies dropped before they were signed and tokenized (ray_work.EarlierTexts):
                             # how many depends on timing; which documents are kept does not.
                             "repeats_dropped_by_tasks": sum(m["dropped"].get("exact_duplicate", 0) for m in encoded),
                             "shuffle": "blocks permuted within each task's shard; shards listed in a seeded "
                                        "random order",
                             "dedup_scope": "global (first one wins in source order)"},
             # Each task sizes its Rust pools to its CPUs, whatever the environment says (stage.py).
             "builder_threads": {"rust_threads_per_task": threads, "cluster": cluster.describe}}
    return tally.manifest(start.engine, out_dir, written["training"], written.get("validation"), timings=timings,
                          worker_seconds=worker_seconds, extra=extra)


# ---------------------------------------------------------------------------------------------
# The cluster


class _Cluster:
    def __init__(self, ray, started_here: bool):
        self.ray = ray
        self.started_here = started_here
        resources = ray.cluster_resources()
        self.cpus = int(resources.get("CPU", 1))
        self.describe = {"address": "local" if started_here else "existing", "nodes": len(ray.nodes()),
                         "cpus": self.cpus, "ray": ray.__version__}


@contextlib.contextmanager
def ray_session(address: str | None, local_cpus: int):
    """Join the cluster at `address` (or RAY_ADDRESS), else start a local one; always leave nothing behind."""
    try:
        import ray
        import ray.data
    except ImportError:
        raise RankzeroError("--prep_engine ray: Ray is not installed (pip install 'rankzero[ray]')") from None
    started_here = False
    if not ray.is_initialized():
        import os

        local = not (address or os.environ.get("RAY_ADDRESS"))
        options = {"num_cpus": local_cpus, "object_store_memory": 256 << 20} if local else {}
        where = "starting a local cluster" if local else f"joining {address or os.environ['RAY_ADDRESS']}"
        print(f"[prepare] ray: {where}", file=sys.stderr, flush=True)
        ray.init(address=address, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False,
                 configure_logging=True, **options)
        started_here = True
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False  # the driver prints rankzero's own progress
    context.print_on_execution_start = False
    logging.getLogger("ray.data").setLevel(logging.ERROR)
    try:
        yield _Cluster(ray, started_here)
    finally:
        if started_here:
            ray.shutdown()  # a local cluster stops with it; on a shared cluster our workers go with the job


def _run_phase(job: Job, todo: list, cluster: _Cluster, progress: Progress, reused: list) -> None:
    """Run `todo` as Ray Data tasks, counting progress as tasks finish; a failing task fails the build."""
    import ray.data

    for task in reused:
        progress.update(0, 0, task.nbytes, 0)
    if not todo:
        return
    work = Path(job.work)
    for stale in work.glob("task-*.error.json"):
        stale.unlink()
    # Tasks, not an actor pool: Ray runs both passes' tasks on the same pooled worker processes, each keeping its
    # stage (ray_tasks.worker_stage), where a pool per pass started its actor processes afresh.
    at_once = max(1, min(len(todo), cluster.cpus // job.threads))
    dataset = ray.data.from_items(task_rows(todo), override_num_blocks=len(todo))
    results = dataset.map_batches(
        run_tasks, fn_kwargs={"job": job}, batch_size=1, compute=ray.data.TaskPoolStrategy(size=at_once),
        num_cpus=job.threads, memory=TASK_MEMORY[job.stage.quality is not None and job.phase != "pack"])
    try:
        for row in results.iter_rows():
            progress.update(int(row["docs"]), int(row["kept"]), int(row["bytes"]), int(row["tokens"]))
    except Exception as error:  # Ray passes on a formatted traceback; the task wrote its own words down
        failures = sorted(work.glob("task-*.error.json"))
        if not failures:
            raise RankzeroError(f"the Ray job failed before any task reported an error: {error}") from error
        failure = read_json(failures[0])
        if failure["user_error"]:
            raise RankzeroError(failure["error"]) from None
        logger.error("Ray task %s (%s from byte %s) failed:\n%s", failure["task"], failure["path"], failure["start"],
                     failure["traceback"])
        raise RankzeroError(f"Ray task {failure['task']} ({failure['path']}) failed: {failure['error']}") from None


# ---------------------------------------------------------------------------------------------
# The driver's share


def _processes(encoded: list[dict], packed: list[dict]) -> dict:
    """How many worker processes ran the tasks, and how many of the pack pass's had not run a stage task: 0 when
    Ray ran both passes on the same pooled workers (ray_tasks.worker_stage), as it should."""
    staged = {m["pid"] for m in encoded if "pid" in m}  # a task reused from an older rankzero's run has none
    packing = {m["pid"] for m in packed if "pid" in m}
    return {"worker_processes": len(staged | packing), "started_for_pack": len(packing - staged)}


def _read_metas(work: Path, tasks: list, what: str) -> list[dict]:
    metas = [read_json(task_file(work, t.index, what)) for t in tasks]
    missing = [t for t, meta in zip(tasks, metas) if meta is None]
    if missing:
        raise RankzeroError(f"{len(missing)} Ray task(s) finished but their files are not in {work} (first: task "
                            f"{missing[0].index}, {missing[0].path}); the cache dir must be on a filesystem that "
                            "every Ray node shares, at the same path")
    return metas


def _count_encoded(metas: list[dict], stats: list[SourceStats], held_out_by_tasks: bool) -> None:
    """Each task's counts into its source's; `held_out_by_tasks`: one pass, where a task split its documents itself."""
    for meta in metas:
        stat = stats[meta["source_index"]]
        stat.add(meta["docs_in"], meta["docs_kept"], meta["bytes_in"], meta["tokens"], meta["dropped"],
                 meta["replaced_lines"], meta["truncated"])
        if "path" in meta:  # a task finished by an older rankzero (a reused work dir) did not record it
            stat.add_file(meta["path"], meta["docs_in"], meta["bytes_in"], meta["dropped"])
        if held_out_by_tasks:
            stat.hold_out(meta["validation_documents"], meta["validation_tokens"], meta["validation_truncated"])


def _decide(work: Path, tasks: list, metas: list[dict], tally: Tally, hashed: bool, samples: Path) -> None:
    """Exact duplicates over the whole corpus and the held-out documents: the tasks' hashes through the local
    engine's decision (split.py) in task order, which is source order, evaluation sources first; then, with
    `--dedup near`, the survivors' signatures through the same ledger (near_ledger.py) in the same order, decided
    once all are in (`samples`: dedup_samples.jsonl). Only hashes and signatures reach the driver, never text.
    Each task's `split.npz` says which of its documents are dropped or held out."""
    stats, ledger = tally.stats, tally.ledger
    splits, survivors_of = [], []  # survivors_of: per task, (task index, the positions it gave the ledger)
    for task, meta in zip(tasks, metas):
        with np.load(task_file(work, task.index, "hashes.npz")) as files:
            hashes, lengths, truncated = files["hashes"], files["lengths"], files["truncated"]
        decision = tally.holdout(task.source_index, hashes if hashed else None, len(lengths))
        lost = ~(decision.train | decision.validation)
        splits.append((lost, decision.validation))
        stat = stats[meta["source_index"]]
        stat.drop(decision.dropped, int(lengths[lost].sum()), int(truncated[lost].sum()))
        stat.hold_out(int(decision.validation.sum()), int(lengths[decision.validation].sum()),
                      int(truncated[decision.validation].sum()))
        tally.progress.removed += decision.dropped.get("exact_duplicate", 0)
        if ledger is not None:
            survivors = ~lost
            with np.load(task_file(work, task.index, "minhash.npz")) as files:
                lines = (task.path, files["lines"][survivors]) if "lines" in files else None  # older tasks: none
                ledger.add(task.source_index, files["signatures"][survivors], files["shingles"][survivors],
                           decision.validation[survivors], lengths[survivors], truncated[survivors], lines)
            survivors_of.append((task.index, np.flatnonzero(survivors)))
    if ledger is not None:
        removed = tally.decide_near(_task_place(work, survivors_of), samples)
        start = 0
        for lost, validation in splits:
            survivors = np.flatnonzero(~lost)
            near = survivors[removed[start:start + len(survivors)]]
            start += len(survivors)
            lost[near] = True
            validation[near] = False
    for task, (lost, validation) in zip(tasks, splits):
        write_npz_atomic(task_file(work, task.index, "split.npz"), drop=np.flatnonzero(lost),
                         validation=np.flatnonzero(validation))


def _task_place(work: Path, survivors_of: list[tuple]) -> Callable[[int], tuple[Path, int]]:
    """Where this engine staged a document of the ledger (by number): (the task's stage.arrow, which holds all the
    task's documents that passed the filter, position in it); `survivors_of`: (task, positions it gave the
    ledger), in ledger order. For dedup_samples.jsonl."""
    firsts = np.cumsum([0] + [len(positions) for _, positions in survivors_of])

    def where(number: int) -> tuple[Path, int]:
        entry = int(np.searchsorted(firsts, number, side="right")) - 1
        task, positions = survivors_of[entry]
        return task_file(work, task, "stage.arrow"), int(positions[number - firsts[entry]])

    return where


def _finish_shards(output: Output, work: Path, tasks: list, packed: list[dict], out_dir: Path,
                   validation: bool = False) -> dict:
    """Move the tasks' shards of one split into `out_dir`, pack their tails into one last shard, list the shards in
    a seeded random order and write the save_to_disk metadata; return the split's `sequences`, `shards` and
    `tail_tokens` left out."""
    prefix, rows = ("validation-", "validation_rows") if validation else ("", "rows")
    out_dir.mkdir(exist_ok=True)
    names, sequences = [], 0
    for task, meta in zip(tasks, packed):
        if meta[rows]:
            name = f"task-{task.index:06d}.arrow"
            task_file(work, task.index, f"{prefix}shard.arrow").rename(out_dir / name)
            names.append(name)
            sequences += meta[rows]
    # Each source's tails packed on their own in the validation split: a validation row holds one source.
    packer = make_packer(output.packing, output.whole_samples, per_source=validation)
    columns = output.validation_columns if validation else output.columns
    batches = []
    for task in tasks:
        with np.load(task_file(work, task.index, f"{prefix}tail.npz")) as tail:
            if len(tail["ids"]):
                labels = tail["labels"] if "labels" in tail else None
                sources = [np.full(len(tail["lengths"]), task.source_index)] if validation else []
                blocks = packer.add(tail["ids"], tail["lengths"], labels, *sources)
                if blocks is not None:
                    batches.append(blocks.to_record_batch())
    blocks = packer.flush()
    if blocks is not None:
        batches.append(blocks.to_record_batch())
    tail_tokens = packer.finish()
    if batches:
        schema = output_schema(columns)
        table = pa.Table.from_batches(batches)
        rng = np.random.default_rng([output.seed, 6 if validation else 4])
        table = conform(table.take(arrow_array(rng.permutation(len(table)))), schema)
        with pa.ipc.new_stream(str(out_dir / "tails.arrow"), schema) as writer:
            writer.write_table(table, max_chunksize=output.writer_batch_size)
        names.append("tails.arrow")
        sequences += len(table)
    require_blocks(sequences, tail_tokens, output.packing.max_seq_length, validation=validation)
    order = np.random.default_rng([output.seed, 7 if validation else 3]).permutation(len(names))
    data_files = name_data_files(out_dir, [names[i] for i in order])
    write_dataset_metadata(out_dir, columns, data_files, f"{output.fingerprint}-validation" if validation
                           else output.fingerprint)
    return {"sequences": sequences, "shards": len(data_files), "tail_tokens": tail_tokens}
