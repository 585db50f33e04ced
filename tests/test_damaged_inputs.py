"""Inputs that are cut short, corrupted or hostile (issue 29): each is one error line naming the file, never a
silently shorter corpus, a traceback or memory exhausted. Real files, and `train.py` in a subprocess where
what the user sees is the point."""

from __future__ import annotations

import json
import random

import pytest

from helpers import korean_documents, prepare_cli, write_jsonl
from rankzero.data.compressed import zstd_problem


def _failed_cleanly(result, *expected: str) -> str:
    """The one error line of a failed `train.py` run, checked: exit 1, no traceback, every `expected` in it."""
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert result.returncode == 1 and "Traceback" not in result.stderr and len(errors) == 1, result.stderr[-3000:]
    for text in expected:
        assert text in errors[0], errors[0]
    return errors[0]


# ------------------------------------------------------------------ a .zst file cut short (item 1)


def _zstd_frames(*parts: bytes, checksum: bool = True, content_size: bool = True) -> bytes:
    import zstandard

    compressor = zstandard.ZstdCompressor(write_checksum=checksum, write_content_size=content_size)
    return b"".join(compressor.compress(part) for part in parts)


@pytest.mark.parametrize("kind", ["txt", "jsonl"])
@pytest.mark.parametrize("kept", [0.5, 0.9])
def test_a_zst_input_cut_short_is_an_error_naming_it_and_nothing_is_published(tmp_path, tokenizer_dir, kind, kept):
    texts = korean_documents(3000, seed=3)
    lines = [json.dumps({"text": t}, ensure_ascii=False) if kind == "jsonl" else t for t in texts]
    whole = _zstd_frames("\n".join(lines).encode() + b"\n")
    path = tmp_path / f"corpus.{kind}.zst"
    path.write_bytes(whole[: int(len(whole) * kept)])
    cache = tmp_path / "cache"
    result = prepare_cli("--dataset", path, "--tokenizer_path", tokenizer_dir, "--cache_dir", cache,
                         "--max_seq_length", 64, "--dedup", "none", check=False)
    _failed_cleanly(result, f"{path}: the .zst stream is damaged: it ends inside the frame that starts at byte 0")
    assert not [p for p in cache.iterdir() if p.is_dir()], "nothing published"


def test_the_zst_frame_walk_flags_every_cut_but_at_a_frame_boundary(tmp_path):
    """Cut a file of four frames (with and without checksum or content size, one skippable) at every byte: the
    walk finds it whole exactly where a frame ends, as `zstd -d` would."""
    skippable = (0x184D2A53).to_bytes(4, "little") + (5).to_bytes(4, "little") + b"12345"
    frames = [_zstd_frames("첫 번째 프레임의 글입니다.\n".encode() * 40), skippable,
              _zstd_frames(b"second frame\n" * 30, checksum=False), _zstd_frames(b"", content_size=False)]
    data = b"".join(frames)
    boundaries = {sum(map(len, frames[:i])) for i in range(1, len(frames) + 1)}
    path = tmp_path / "cut.txt.zst"
    for cut in range(1, len(data) + 1):
        path.write_bytes(data[:cut])
        assert (zstd_problem(str(path)) is None) == (cut in boundaries), cut


def test_the_zst_frame_walk_reads_large_multi_block_frames_and_refuses_trailing_bytes(tmp_path):
    rng = random.Random(0)
    text = "\n".join(" ".join(rng.choice(korean_documents(50)).split()[:rng.randint(3, 40)]) for _ in range(20000))
    data = _zstd_frames(text.encode(), text[::-1].encode(), content_size=False)  # ~1 MB each: many 128 KiB blocks
    path = tmp_path / "big.jsonl.zst"
    path.write_bytes(data)
    assert zstd_problem(str(path)) is None
    for cut in rng.sample(range(1, len(data)), 50):
        path.write_bytes(data[:cut])
        assert zstd_problem(str(path)), cut
    path.write_bytes(data + b"\0\0\0\0\0")
    assert zstd_problem(str(path)) == f"byte {len(data):,} of {len(data) + 5:,} starts no zstd frame"
