"""The Ray engine's tasks: how the sources are cut into tasks, and what one task does on a Ray worker.

    tasks = plan_tasks(sources, 64 << 20, "line") # on the driver: byte ranges of line files, whole files else
    work = work_dir(path, fingerprint, tasks)      # on the driver: the shared work dir (ray_work.py)
    run_tasks({"index": [...], ...}, job)         # on a worker (Ray Data's map function): runs tasks, writes
                                                  # their files into the work dir

A task is one byte range of a line-oriented file (cut at line starts, ~`--ray_task_mb` each) or one
whole record file (parquet, csv, JSON array, arrow) or saved dataset. It writes its outputs into the
shared work dir, each file under a temporary name renamed when complete and its JSON meta last, so a
retried task overwrites instead of duplicating and a rerun after a driver crash can tell which tasks
are done. With exact dedup a stage task drops, before signing and tokenizing them, the repeats of texts it or
an earlier task that is done already staged (ray_work.EarlierTexts); the driver drops the rest. Phases (see
ray_engine.py):

    single   stage → pack → one shard of blocks (permuted) + the unpacked tail      (no dedup, no weights)
    stage    stage → staged documents + their hashes (+ MinHash signatures)          (dedup or weights)
    pack     staged documents − duplicates, × the mixing ratio → pack → shard + tail

With a validation split every task packs its held-out documents too, into a `validation-shard.arrow` and
a `validation-tail.npz` of their own (taken once: mixing is for training documents; a task reads one source, and
its validation rows carry that source in `document_sources`). In one pass the
task picks them by the hash rule itself (split.py: it depends on the text alone); in two passes the
driver decides, in task order, with the `--eval_dataset` sources first, and writes `split.npz`.

A task gets a `Job`: the stage's spec, the packing config and the few numbers it uses — never the
command line.
"""

from __future__ import annotations

import os
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from rankzero.config import PackingConfig
from rankzero.data.dedup.exact import LineVerdicts
from rankzero.data.dedup.minhash import PERMUTATIONS
from rankzero.data.engines.ray_work import EarlierTexts, task_file, write_npz_atomic
from rankzero.data.inputs.files import (RECORD_FORMATS, compression_of, file_format, line_ranges, lines_before,
                                        text_bytes)
from rankzero.data.inputs.readers import iter_chunks, iter_file_chunks
from rankzero.data.inputs.specs import Source
from rankzero.data.mixing import passes, subsample
from rankzero.data.pack import make_packer, select_documents
from rankzero.data.plan import Output, Reading
from rankzero.data.screen.screening import combine
from rankzero.data.shards import StagedWriter, arrow_array, conform, output_schema, read_staged
from rankzero.data.split import held_out
from rankzero.data.stage import Stage, StageSpec, known_lines, remember_lines
from rankzero.errors import RankzeroError
from rankzero.files import write_atomic, write_json_atomic

@dataclass(frozen=True)
class Task:
    index: int
    source_index: int
    kind: str  # "files" | "saved"
    path: str
    start: int  # byte range of a line file; 0, -1 for a whole file
    end: int
    nbytes: int


def plan_tasks(sources, task_bytes: int, txt_sample_by: str = "line") -> list[Task]:
    """Every source cut into tasks, in source and file order (which is also the dedup order). `task_bytes`
    (--ray_task_mb, 64 MiB): a task's share of a line file, large enough to amortise a task (~1 s of work),
    small enough to balance the load and to bound a task's memory."""
    tasks: list[Task] = []
    for source_index, source in enumerate(sources):
        if source.kind == "hub":
            raise RankzeroError(f"--dataset {source.spec}: --prep_engine ray reads files every node can see; "
                                "download the hub dataset to the shared filesystem first, or use --prep_engine local")
        if source.kind == "saved":
            tasks.append(Task(len(tasks), source_index, "saved", source.location, 0, -1, source.total_bytes()))
            continue
        for path in source.files:
            fmt = file_format(path, txt_sample_by)
            # A record file, a whole-file document and a stream cannot be cut in ranges.
            if fmt in RECORD_FORMATS.values() or fmt == "txt-document" or compression_of(path):
                tasks.append(Task(len(tasks), source_index, "files", path, 0, -1, text_bytes(path)))
                continue
            for start, end in line_ranges(path, task_bytes, paragraphs=fmt == "txt-paragraph"):
                tasks.append(Task(len(tasks), source_index, "files", path, start, end, end - start))
    return tasks


# ---------------------------------------------------------------------------------------------
# The worker


@dataclass(frozen=True)
class Job:
    """What every task of one phase needs; small and picklable (the stage's spec, paths and settings, no
    tokenizer). Built once per build (`Job.of`); the pack phase is the same job with its ratios."""

    stage: StageSpec
    threads: int  # CPUs per task: Kiwi's threads, and the tokenizer's Rust pool
    work: str
    phase: str  # "single" | "stage" | "pack"
    batch_size: int
    txt_sample_by: str
    packing: PackingConfig
    writer_batch_size: int
    seed: int
    columns: dict  # output column → Arrow value type (Plan.columns)
    validation_columns: dict  # the validation split's (Plan.validation_columns)
    validation: bool  # a validation split is made
    held_out_below: int | None  # "single": the hash threshold of --validation_split_percentage
    max_document_bytes: int  # --max_document_mb
    ratios: dict | None = None  # source index → mixing ratio, for "pack"

    @classmethod
    def of(cls, stage: StageSpec, reading: Reading, output: Output, held_out_below: int | None, threads: int,
           work: Path, phase: str) -> Job:
        """`reading`, `output`: the plan's (Plan.reading, Plan.output); `held_out_below`: Plan.held_out_below."""
        return cls(stage=stage, threads=threads, work=str(work), phase=phase, batch_size=reading.batch_size,
                   txt_sample_by=reading.txt_sample_by, packing=output.packing,
                   writer_batch_size=output.writer_batch_size, seed=output.seed, columns=output.columns,
                   validation_columns=output.validation_columns, validation=output.validation,
                   held_out_below=held_out_below, max_document_bytes=reading.max_document_bytes)


# The stage this worker process built last: (spec, threads, stage). Ray Data runs the tasks as plain Ray tasks, and
# Ray hands every task of the build to the same few pooled worker processes, the stage pass's and the pack pass's
# alike; so the tokenizer (and Kiwi) load once per process and build, and the pack pass starts no process (an actor
# pool per pass started its processes afresh: ~1 CPU-s each, importing Ray, Ray Data and rankzero). One entry, so a
# worker never holds an older build's stage.
_built: tuple | None = None


def worker_stage(spec: StageSpec, threads: int) -> Stage:
    """The stage of `spec`, built in this process on its first task and kept for the next."""
    global _built
    if _built is None or _built[:2] != (spec, threads):
        _built = None  # the old stage (Kiwi's ~500 MB) goes before the new one loads
        _built = (spec, threads, Stage.in_worker(spec, threads))
    return _built[2]


def run_tasks(batch: dict, job: Job) -> dict:
    """Ray Data's map function: run the batch's tasks (ray_engine.py gives one per call) on this worker."""
    global _built
    if job.phase == "pack":
        _built = None  # packing needs no stage: free its memory (the pack pass declares less)
    return TaskRunner(job, None if job.phase == "pack" else worker_stage(job.stage, job.threads))(batch)


class TaskRunner:
    """One phase's tasks, run with the stage this worker process built (`worker_stage`; none to pack)."""

    def __init__(self, job: Job, stage: Stage | None):
        self.job = job
        self.work = Path(job.work)
        self.stage = stage

    def __call__(self, batch: dict) -> dict:
        done = {"index": [], "docs": [], "kept": [], "bytes": [], "tokens": []}
        for row in range(len(batch["index"])):
            task = Task(**{name: _plain(batch[name][row]) for name in Task.__dataclass_fields__})
            try:
                meta = self.run(task)
            except Exception as error:
                # Ray hands the driver only a formatted traceback; the task's own words go in a file.
                user = isinstance(error, RankzeroError)
                write_json_atomic(task_file(self.work, task.index, "error.json"), {
                    "error": str(error) if user else f"{type(error).__name__}: {error}", "user_error": user,
                    "task": task.index, "path": task.path, "start": task.start,
                    "traceback": traceback.format_exc()})
                raise
            done["index"].append(task.index)
            done["docs"].append(meta.get("docs_in", 0))
            done["kept"].append(meta.get("docs_kept", 0))
            done["bytes"].append(task.nbytes)
            done["tokens"].append(meta.get("tokens", 0))
        return done

    def run(self, task: Task) -> dict:
        if self.job.phase == "pack":
            return self._pack(task, *self._staged_documents(task))
        if self.job.phase == "stage":  # a retry's files must not pass as done while it rewrites them (EarlierTexts)
            task_file(self.work, task.index, "stage.json").unlink(missing_ok=True)
        documents, meta = self._encode(task)
        meta["pid"] = os.getpid()  # the manifest counts the worker processes the build ran in
        if self.job.phase == "stage":
            return self._stage_files(task, documents, meta)
        training, held = self._split(documents, meta)
        return self._pack(task, training, held, meta)

    def _split(self, documents: list, meta: dict) -> tuple[list, list]:
        """One pass: the held-out documents by the hash rule (no dedup, no --eval_dataset here); counts in meta
        (`docs_kept`, `tokens`, `truncated` of both splits, as `SourceStats.add` takes them; `validation_*` of
        the held-out ones)."""
        training, held = [], []
        meta.update(docs_kept=0, tokens=0, truncated=0, validation_documents=0, validation_tokens=0,
                    validation_truncated=0)
        for ids, lengths, labels, hashes, truncated, _ in documents:
            meta["docs_kept"] += len(lengths)
            meta["tokens"] += len(ids)
            truncated = truncated if truncated is not None else np.zeros(len(lengths), dtype=bool)
            meta["truncated"] += int(truncated.sum())
            if not self.job.validation:
                training.append((ids, lengths, labels))
                continue
            validation = held_out(hashes, self.job.held_out_below)
            training.append(select_documents(ids, lengths, labels, ~validation))
            held.append(select_documents(ids, lengths, labels, validation))
            meta["validation_documents"] += int(validation.sum())
            meta["validation_tokens"] += len(held[-1][0])
            meta["validation_truncated"] += int(truncated[validation].sum())
        return training, held

    def _encode(self, task: Task):
        """Run the stage over the task's chunks: a list of (ids, lengths, labels, hashes, truncated, (signatures,
        shingles, lines)) and counts."""
        source = Source(task.path, task.kind, task.path)
        job = self.job
        if task.kind == "saved":
            chunks = iter_chunks(source, task.source_index, job.batch_size)
        else:
            chunks = iter_file_chunks(task.path, task.source_index, job.batch_size, job.txt_sample_by, task.start,
                                      None if task.end < 0 else task.end, job.max_document_bytes)
        documents, dropped, seconds, screened = [], Counter(), Counter(), []
        meta = {"index": task.index, "source_index": task.source_index, "docs_in": 0, "bytes_in": 0, "replaced_lines": 0,
                "quality_samples": [], "path": task.path}
        # The task's chunks run in source order: a text an earlier one kept is a repeat (stage.py drops it unsigned),
        # and so is a text an earlier task staged.
        earlier = EarlierTexts(self.work, task.index) if job.stage.drop_repeats else None
        # The quality verdicts of the task's lines so far: a line byte for byte like one is not judged again. (Its
        # kept lines are not skipped unparsed: which copy is kept is the driver's decision.)
        verdicts = LineVerdicts() if job.stage.quality is not None else None
        for chunk in chunks:
            try:
                result = self.stage(chunk, earlier.seen if earlier is not None else None, known_lines(verdicts, chunk))
                if earlier is not None:
                    earlier.keep(result.hashes)
                if verdicts is not None:
                    remember_lines(verdicts, result)
            except RankzeroError:
                if task.start > 0:  # say where in the file, not where in the task's range
                    chunk.first_line += lines_before(task.path, task.start)
                    self.stage(chunk)  # raises again, with the file's own line numbers
                raise
            documents.append((result.ids, result.lengths, result.labels, result.hashes, result.truncated,
                              (result.signatures, result.shingles, result.lines)))
            dropped.update(result.dropped)
            seconds.update(result.seconds)
            screened.append(result.screen)
            meta["docs_in"] += result.docs_in
            meta["bytes_in"] += result.bytes_in
            meta["replaced_lines"] += result.replaced_lines
            meta["quality_samples"] += result.quality_samples
        if meta["quality_samples"] and task.start > 0:  # the file's line numbers, not the task range's
            before = lines_before(task.path, task.start)
            for sample in meta["quality_samples"]:
                sample["line"] += before
        meta.update(dropped=dict(dropped), seconds=dict(seconds), screen=combine(screened))
        return documents, meta

    def _stage_files(self, task: Task, documents: list, meta: dict) -> dict:
        with_labels = self.job.stage.config.with_labels
        path = task_file(self.work, task.index, "stage.arrow")

        def write(handle):
            with StagedWriter(handle, with_labels) as writer:
                for ids, lengths, labels, *_ in documents:
                    writer.write(ids, lengths, labels)

        write_atomic(path, write)
        hashes = [h for _, _, _, h, *_ in documents if h is not None]
        lengths = [lengths for _, lengths, *_ in documents]
        truncated = [np.zeros(len(lengths), bool) if cut is None else cut for _, lengths, _, _, cut, _ in documents]
        if self.job.stage.signatures:  # only signatures and counts: the driver decides the near-copies from these
            signed = [signed for *_, signed in documents]
            # The file's line of each document (dedup_samples.jsonl), not the line within the task's range.
            lines = np.concatenate([n for *_, n in signed]) if signed else np.empty(0, np.int64)
            write_npz_atomic(task_file(self.work, task.index, "minhash.npz"),
                             lines=lines + (lines_before(task.path, task.start) if task.start > 0 else 0),
                             signatures=np.concatenate([s for s, *_ in signed]) if signed else
                             np.empty((0, PERMUTATIONS), np.uint32),
                             shingles=np.concatenate([c for _, c, _ in signed]) if signed else np.empty(0, np.int64))
        write_npz_atomic(task_file(self.work, task.index, "hashes.npz"),
                         hashes=np.concatenate(hashes) if hashes else np.empty(0, np.uint64),
                         lengths=np.concatenate(lengths) if lengths else np.empty(0, np.int64),
                         truncated=np.concatenate(truncated) if truncated else np.empty(0, bool))
        meta.update(docs_kept=sum(len(lengths) for _, lengths, *_ in documents),
                    tokens=sum(len(ids) for ids, *_ in documents), truncated=int(sum(cut.sum() for cut in truncated)))
        write_json_atomic(task_file(self.work, task.index, "stage.json"), meta)
        return meta

    def _staged_documents(self, task: Task) -> tuple[list, list]:
        """The task's staged documents less those dropped (split.npz, from the driver): (training documents
        with the source's mixing ratio applied, held-out documents once)."""
        split_path = task_file(self.work, task.index, "split.npz")
        drop = validation = np.empty(0, np.int64)
        if split_path.exists():
            with np.load(split_path) as split:
                drop, validation = split["drop"], split["validation"]
        ratio = (self.job.ratios or {}).get(str(task.source_index), 1.0)
        staged = list(read_staged(task_file(self.work, task.index, "stage.arrow")))
        documents, held, offset = [], [], 0
        for ids, lengths, labels in staged:
            train = np.ones(len(lengths), dtype=bool)
            train[_inside(drop, offset, len(lengths))] = False
            to_validation = np.zeros(len(lengths), dtype=bool)
            to_validation[_inside(validation, offset, len(lengths))] = True
            offset += len(lengths)
            documents.append(select_documents(ids, lengths, labels, train & ~to_validation))
            if to_validation.any():
                held.append(select_documents(ids, lengths, labels, to_validation))
        # Mixing: ceil(ratio) passes over the task's documents, the last a seeded random subset.
        rng = np.random.default_rng([self.job.seed, task.index, 1])
        return [subsample(ids, lengths, labels, share, rng) for share in passes(ratio)
                for ids, lengths, labels in documents], held

    def _pack(self, task: Task, documents: list, held: list, meta: dict | None = None) -> dict:
        """Pack the task's documents (and its held-out ones apart), permute the rows, write each split's shard
        and unpacked tail."""
        meta = dict(meta or {"index": task.index, "source_index": task.source_index, "pid": os.getpid()})
        rows, tokens_out, documents_out = self._pack_split(task, documents, "")
        meta.update(rows=rows, tokens_out=tokens_out, documents_out=documents_out)
        if self.job.validation:
            meta["validation_rows"] = self._pack_split(task, held, "validation-")[0]
        write_json_atomic(task_file(self.work, task.index, "pack.json"), meta)
        return meta

    def _pack_split(self, task: Task, documents: list, prefix: str) -> tuple[int, int, int]:
        packer = make_packer(self.job.packing, whole_samples=self.job.stage.config.with_labels)
        batches, tokens_out, documents_out = [], 0, 0
        for ids, lengths, labels in documents:
            tokens_out += int(lengths.sum())
            documents_out += len(lengths)
            blocks = packer.add(ids, lengths, labels)
            if blocks is not None:
                batches.append((blocks.from_source(task.source_index) if prefix else blocks).to_record_batch())
        schema = output_schema(self.job.validation_columns if prefix else self.job.columns)
        rows = sum(len(b) for b in batches)
        if rows:
            table = pa.Table.from_batches(batches)
            order = np.random.default_rng([self.job.seed, task.index, 2 if not prefix else 3]).permutation(rows)
            table = conform(table.take(arrow_array(order)), schema)

            def write(handle):
                with pa.ipc.new_stream(handle, schema) as writer:
                    writer.write_table(table, max_chunksize=self.job.writer_batch_size)

            write_atomic(task_file(self.work, task.index, f"{prefix}shard.arrow"), write)
        tail_ids, tail_lengths, tail_labels = packer.remainder()
        write_npz_atomic(task_file(self.work, task.index, f"{prefix}tail.npz"), ids=tail_ids, lengths=tail_lengths,
                         labels=tail_labels)
        return rows, tokens_out, documents_out


def _inside(indices: np.ndarray, offset: int, count: int) -> np.ndarray:
    """The task-wide document indices that fall in this batch, as indices into it."""
    return indices[(indices >= offset) & (indices < offset + count)] - offset


def _plain(value):
    """numpy scalars from a Ray Data batch as Python values."""
    return value.item() if hasattr(value, "item") else value
