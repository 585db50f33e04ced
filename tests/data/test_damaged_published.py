"""A published dataset whose shard changed on disk after the build (issue 29): bytes among the token ids, in a
record batch's offsets or in its IPC metadata, in a shard above ALWAYS_HASHED_BYTES (so the cheap check, sizes and
the small files' checksums, cannot see them). Training stops with one line that says the data is damaged and how to
rebuild it — never an IndexError in the embedding or an "Invalid IPC message" traceback."""

from __future__ import annotations

import json
import os
import sys

import pytest

from helpers import REPO, TINY, korean_documents, prepare_cli, prepared_dir, run, write_jsonl
from rankzero.data.published import ALWAYS_HASHED_BYTES

ROWS_PER_STEP = 512  # 16k tokens a step at 32 a row; 30 steps cover the ~13k rows of a 1 MiB shard once


@pytest.fixture(scope="module")
def published(tmp_path_factory, tokenizer_dir):
    """A prepared dataset of one shard a little over ALWAYS_HASHED_BYTES, and the flags that prepared it."""
    directory = tmp_path_factory.mktemp("published")
    corpus = write_jsonl(directory / "ko.jsonl", [{"text": t} for t in korean_documents(6000, seed=4)])
    flags = ["--dataset", corpus, "--tokenizer_path", tokenizer_dir, "--max_seq_length", 32, "--dedup", "none",
             "--cache_dir", directory / "cache"]
    out = prepared_dir(prepare_cli("--tokenize_only", *flags).stdout)
    shard = next(out.glob("data-*.arrow"))
    assert shard.stat().st_size > ALWAYS_HASHED_BYTES
    return out, shard, flags, json.loads((out / "manifest.json").read_text())["sequences"]


def _buffer(shard, batch: int, column: str, buffer: int) -> tuple[int, int]:
    """(file offset, size) of one Arrow buffer of record batch `batch` (1: a list column's offsets, 3: its values)."""
    import pyarrow as pa

    with pa.memory_map(str(shard)) as mapped:
        whole = mapped.read_buffer()  # zero-copy: every buffer read from it points into the mapping
        found = list(pa.ipc.open_stream(whole))[batch].column(column).buffers()[buffer]
        return found.address - whole.address, found.size


def _damage(shard, how: str) -> None:
    """Change bytes of the middle record batch in place, keeping the file's size and mtime (as a bad sector or a
    stray write would: nothing the cheap check looks at)."""
    import pyarrow as pa

    with pa.ipc.open_stream(pa.OSFile(str(shard))) as reader:
        middle = sum(1 for _ in reader) // 2
    stat = shard.stat()
    data = bytearray(shard.read_bytes())
    if how == "token ids":  # 4 KiB of 0xFF among the ids: 64 rows whose ids are 65,535
        start, size = _buffer(shard, middle, "input_ids", 3)
        data[start:start + min(size, 4096)] = b"\xff" * min(size, 4096)
    elif how == "offsets":  # one row a token longer, the next a token shorter: still a valid Arrow array
        start, _ = _buffer(shard, middle, "input_ids", 1)
        second = int.from_bytes(data[start + 4:start + 8], "little")
        data[start + 4:start + 8] = (second + 1).to_bytes(4, "little")
    else:  # the batch's IPC message: the flatbuffer just after the continuation marker before its body
        body, _ = _buffer(shard, middle, "input_ids", 1)
        marker = data.rfind(b"\xff\xff\xff\xff", 0, body)
        data[marker + 8:marker + 40] = bytes(byte ^ 0xFF for byte in data[marker + 8:marker + 40])
    shard.write_bytes(bytes(data))
    os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns))


@pytest.mark.parametrize("how", ["token ids", "offsets", "IPC metadata"])
def test_training_on_a_damaged_shard_stops_with_one_line_saying_how_to_rebuild(tmp_path, published, how):
    out, shard, flags, rows = published
    original = shard.read_bytes()
    try:
        _damage(shard, how)
        steps = -(-rows // ROWS_PER_STEP)  # one epoch: every row, the damaged ones included, reaches the collator
        result = run([sys.executable, REPO / "train.py", *flags, "--output_dir", tmp_path / "run", "--model_config", TINY,
                      "--per_device_train_batch_size", ROWS_PER_STEP, "--max_steps", steps, "--logging_steps", 1000,
                      "--save_strategy", "no", "--report_to", "none", "--dataloader_num_workers", 1], check=False,
                     timeout=600)
        errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
        assert result.returncode == 1 and "Traceback" not in result.stderr and len(errors) == 1, result.stderr[-3000:]
        assert errors[0].startswith(f"error: {out}: the prepared data is damaged ("), errors[0]
        assert "Run again with --verify_data, which checks every byte" in errors[0], errors[0]
        if how == "token ids":  # reported by the collator, in a DataLoader worker, raised by the trainer
            assert "a batch holds token id 65,535, outside the tokenizer's" in errors[0], errors[0]
        elif how == "offsets":
            assert "ids and document lengths adding up to 32" in errors[0], errors[0]
        # What the message advises works: --verify_data sees the damage and rebuilds the same data.
        again = prepare_cli("--tokenize_only", *flags, "--verify_data")
        assert prepared_dir(again.stdout) == out and "does not match its checksum" in again.stderr, again.stderr
        assert shard.read_bytes() == original
    finally:
        shard.write_bytes(original)
