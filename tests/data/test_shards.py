"""The shuffle of packed blocks (rankzero/data/shards.py): what it holds in memory while it writes the shards."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from rankzero.data.shards import list_array, write_shuffled_shards

ROWS, LENGTH = 500, 2048


def write_bucket(path, rng) -> np.ndarray:
    """A bucket file as BlockScatter leaves it (many small batches of blocks); returns its blocks."""
    schema = pa.schema([("input_ids", pa.list_(pa.int32())), ("document_lengths", pa.list_(pa.int32()))])
    blocks = rng.integers(0, 32000, (ROWS, LENGTH), dtype=np.int32)
    with pa.ipc.new_stream(str(path), schema) as writer:
        for start in range(0, ROWS, 20):
            writer.write_batch(pa.record_batch([list_array(np.arange(21) * LENGTH, blocks[start:start + 20].ravel()),
                                                list_array(np.arange(21), np.full(20, LENGTH, np.int32))],
                                               schema=schema))
    return blocks


def test_the_shuffle_holds_two_buckets_at_most(tmp_path):
    """Arrow's `take` of a whole chunked bucket held four buckets at once (the prepare's peak at 200 MiB once
    near dedup's freed pages went back); the bucket is joined once and taken a batch at a time instead."""
    rng = np.random.default_rng(0)
    blocks = np.concatenate([write_bucket(tmp_path / f"bucket-{bucket:05d}.arrow", rng) for bucket in range(2)])
    out = tmp_path / "out"
    out.mkdir()
    previous = pa.default_memory_pool()
    pool = pa.proxy_memory_pool(previous)  # counts only what the shuffle allocates
    pa.set_memory_pool(pool)
    try:
        names = write_shuffled_shards(tmp_path, np.array([ROWS, ROWS]), out, np.random.default_rng(1),
                                      {"input_ids": "uint16", "document_lengths": "int32"}, batch_rows=100)
    finally:
        pa.set_memory_pool(previous)
    bucket_bytes = ROWS * LENGTH * 4
    assert pool.max_memory() < 2.5 * bucket_bytes, f"{pool.max_memory() / bucket_bytes:.2f} buckets held at once"
    tables = [pa.ipc.open_stream(pa.OSFile(str(out / name))).read_all() for name in names]
    written = np.concatenate([np.stack(table.column("input_ids").to_pylist()) for table in tables])
    assert written.dtype == np.int64 and len(written) == 2 * ROWS
    assert not np.array_equal(written, blocks), "the blocks should be shuffled"
    assert np.array_equal(written[np.lexsort(written.T[::-1])], blocks[np.lexsort(blocks.T[::-1])])
