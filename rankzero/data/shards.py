"""Blocks on disk: staging files, the bucket scatter, shuffled output shards, save_to_disk metadata, and the
numpy <-> Arrow views every Arrow file here is written from (pack.py builds its rows with them too).

    with BlockScatter(packer, buckets, bucket_dir, rng) as scatter:    # pack, send each block to a bucket
        scatter.add(ids, lengths, labels)
        tail = scatter.finish()
        written = scatter.write_shards(out_dir, columns, batch_rows, max_seq_length, fingerprint)
    # written: the split's sequences, shards and tail tokens; a split with no row is an error (require_blocks)

The output is `Dataset.save_to_disk`'s format (Arrow IPC stream files plus two JSON files), written
with pyarrow alone: `datasets` would write the same files, but importing it costs ~0.7 CPU-s and the
prepare path uses nothing else from it. tests/data/test_prepare.py checks these files against the ones the
installed `datasets` writes, so a format change there fails a test, not a load.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa

from rankzero.errors import RankzeroError

BUCKET_BYTES = 16 << 20  # the shuffle holds about two buckets: memory does not grow with the corpus ...
MAX_BUCKETS = 512  # ... up to 512 open bucket files (8 GB of blocks); beyond that buckets grow instead
SHARD_BYTES = 256 << 20  # output shard size (several buckets each)


# ---------------------------------------------------------------------------------------------
# numpy <-> Arrow without copies (and without pandas, which pyarrow's own conversions import)


def arrow_array(values: np.ndarray) -> pa.Array:
    """A zero-copy Arrow view of a 1-D numeric numpy array.

    Not `pa.array(values)`: that imports pandas on first use to check for pandas types (~0.4 s,
    more than preparing 2 MB takes), and the prepare path has no pandas in it.
    """
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])


def numpy_view(array: pa.Array) -> np.ndarray:
    """A zero-copy numpy view of a null-free numeric Arrow array (`Array.to_numpy` imports pandas)."""
    if array.null_count:
        raise ValueError("numpy_view: the array has nulls")
    dtype = np.dtype(array.type.to_pandas_dtype())
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * dtype.itemsize)


def list_array(offsets: np.ndarray, values: np.ndarray) -> pa.ListArray:
    """Rows `values[offsets[i]:offsets[i + 1]]` as an Arrow list column (int32 offsets, zero-copy values)."""
    return pa.ListArray.from_arrays(arrow_array(offsets.astype(np.int32)), arrow_array(values))


# ---------------------------------------------------------------------------------------------
# Staged documents (one row per document), for weighted mixing and for two-pass builds


class StagedWriter:
    """Appends tokenized documents (one row each) to an Arrow stream file."""

    def __init__(self, sink: Path | BinaryIO, with_labels: bool):
        fields = [("input_ids", pa.list_(pa.int32()))] + ([("labels", pa.list_(pa.int32()))] if with_labels else [])
        self.schema = pa.schema(fields)
        self.path = sink if isinstance(sink, Path) else None
        self._writer = pa.ipc.new_stream(str(sink) if isinstance(sink, Path) else sink, self.schema)

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


def read_staged(path: Path):
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


# ---------------------------------------------------------------------------------------------
# Pack and scatter, then shuffle each bucket into the output shards


def require_blocks(sequences: int, tail_tokens: int, max_seq_length: int, validation: bool = False) -> None:
    """Every engine's last check before it writes a split's shards: at least one row came out of packing."""
    if sequences == 0 and validation:
        raise RankzeroError(f"validation: only {tail_tokens:,} tokens were held out, fewer than one row of "
                            f"--max_seq_length {max_seq_length}; raise --validation_split_percentage, give more "
                            "data with --eval_dataset, or lower --max_seq_length")
    if sequences == 0:
        raise RankzeroError(f"packing: only {tail_tokens:,} tokens survived, fewer than one block of --max_seq_length "
                            f"{max_seq_length}; add data or lower --max_seq_length")


def bucket_count(tokens: float, with_labels: bool) -> int:
    """Buckets of about BUCKET_BYTES for this many tokens (int32 ids, and labels in SFT mode)."""
    return min(MAX_BUCKETS, max(1, math.ceil(tokens * 4 * (2 if with_labels else 1) / BUCKET_BYTES)))


class BlockScatter:
    """Packs documents into blocks and appends each block to a uniformly random bucket file."""

    def __init__(self, packer, buckets: int, bucket_dir: Path, rng: np.random.Generator):  # a pack.py packer
        bucket_dir.mkdir(parents=True, exist_ok=True)
        self.packer = packer
        self.bucket_dir = bucket_dir
        self.rng = rng
        self.writers: list = [None] * buckets
        self.counts = np.zeros(buckets, dtype=np.int64)
        self.tail_tokens = 0  # left out of the rows, once finished

    def add(self, ids: np.ndarray, lengths: np.ndarray, labels: np.ndarray | None, sources=None) -> None:
        """Pack documents; `sources` (a source per document) only for a pack.SourcePacker."""
        blocks = self.packer.add(ids, lengths, labels) if sources is None else self.packer.add(ids, lengths, labels,
                                                                                               sources)
        if blocks is not None:
            self._scatter(blocks)

    def _scatter(self, blocks) -> None:
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
        """Scatter the rows the end of the stream completes, close the buckets; return the tokens left out."""
        blocks = self.packer.flush()
        if blocks is not None:
            self._scatter(blocks)
        self.close()
        self.tail_tokens = self.packer.finish()
        return self.tail_tokens

    def write_shards(self, out_dir: Path, columns: dict[str, str], batch_rows: int, max_seq_length: int,
                     fingerprint: str, validation: bool = False) -> dict:
        """Once finished: the buckets shuffled into `out_dir`'s shards (write_shuffled_shards, with this scatter's
        random stream) and their save_to_disk metadata, the buckets removed. Returns the split's `sequences`,
        `shards` and `tail_tokens` (left out)."""
        sequences = int(self.counts.sum())
        require_blocks(sequences, self.tail_tokens, max_seq_length, validation)
        names = write_shuffled_shards(self.bucket_dir, self.counts, out_dir, self.rng, columns, batch_rows)
        shutil.rmtree(self.bucket_dir)
        data_files = name_data_files(out_dir, names)
        write_dataset_metadata(out_dir, columns, data_files, fingerprint)
        return {"sequences": sequences, "shards": len(data_files), "tail_tokens": self.tail_tokens}

    def close(self) -> None:
        for index, writer in enumerate(self.writers):
            if writer is not None:
                writer.close()
                self.writers[index] = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def write_shuffled_shards(bucket_dir: Path, counts: np.ndarray, out_dir: Path, rng: np.random.Generator,
                          columns: dict[str, str], batch_rows: int, prefix: str = "shard") -> list[str]:
    """Permute each bucket in memory and append it to output shards; return the shard file names.

    Blocks went to buckets uniformly at random, so permuting within buckets and concatenating them
    is a uniform shuffle of all blocks (the two-pass external shuffle), one bucket at a time: its chunks
    joined into one copy, then taken and written `batch_rows` rows at a time. Arrow's `take` of a
    whole chunked bucket of list rows held ~4 buckets at once (it joins the chunks, then builds the
    permuted copy), the peak of the whole prepare; this way the peak is ~2 buckets, while they are joined.
    """
    schema = output_schema(columns)
    names: list[str] = []
    writer, written = None, 0
    try:
        for bucket, count in enumerate(counts.tolist()):
            if not count:
                continue
            path = bucket_dir / f"bucket-{bucket:05d}.arrow"
            with pa.OSFile(str(path)) as handle:
                table = pa.ipc.open_stream(handle).read_all().combine_chunks()
            order = rng.permutation(len(table))
            if writer is None or written >= SHARD_BYTES:
                if writer is not None:
                    writer.close()
                names.append(f"{prefix}-{len(names):05d}.arrow")
                writer, written = pa.ipc.new_stream(str(out_dir / names[-1]), schema), 0
            for start in range(0, len(order), batch_rows):
                rows = conform(table.take(arrow_array(order[start:start + batch_rows])), schema)
                writer.write_table(rows, max_chunksize=batch_rows)
                written += rows.nbytes
                del rows
            del table
            path.unlink()
            pa.default_memory_pool().release_unused()  # Arrow's allocator keeps freed buffers otherwise
    finally:
        if writer is not None:
            writer.close()
    return names


def name_data_files(out_dir: Path, names: list[str]) -> list[str]:
    """Rename shards to save_to_disk's `data-XXXXX-of-NNNNN.arrow`, in the given order."""
    final = [f"data-{index:05d}-of-{len(names):05d}.arrow" for index in range(len(names))]
    for old, new in zip(names, final):
        (out_dir / old).rename(out_dir / new)
    return final


# ---------------------------------------------------------------------------------------------
# The save_to_disk format

def output_features(columns: dict[str, str]) -> dict:
    """The `datasets.Features` of the output, as datasets (>= 4.0) serialises them: each column a list of
    its value type."""
    return {name: {"feature": {"dtype": dtype, "_type": "Value"}, "_type": "List"} for name, dtype in columns.items()}


def output_schema(columns: dict[str, str]) -> pa.Schema:
    """The shards' Arrow schema, with the features metadata `datasets` reads back."""
    metadata = {"huggingface": json.dumps({"info": {"features": output_features(columns)}})}
    return pa.schema([(name, pa.list_(pa.type_for_alias(dtype))) for name, dtype in columns.items()], metadata=metadata)


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """The table's columns in the schema's order and types (int32 ids narrowed to uint16 here: the packer
    and the staging files keep int32). A safe cast: an id that does not fit is an error, never wrapped."""
    return table.select(schema.names).cast(schema, safe=True)


def write_dataset_metadata(out_dir: Path, columns: dict[str, str], data_files: list[str], fingerprint: str) -> None:
    """state.json and dataset_info.json, as `Dataset.save_to_disk` writes them, for these data files."""
    state = {"_data_files": [{"filename": name} for name in data_files],
             "_fingerprint": fingerprint, "_format_columns": None, "_format_kwargs": {}, "_format_type": None,
             "_output_all_columns": False, "_split": None}
    info = {"citation": "", "description": "", "features": output_features(columns), "homepage": "", "license": ""}
    (out_dir / "state.json").write_text(json.dumps(state, indent=2, sort_keys=True))
    (out_dir / "dataset_info.json").write_text(json.dumps(info, indent=2, sort_keys=True))
