"""Inputs that are cut short, corrupted or hostile (issue 29): each is one error line naming the file, never a
silently shorter corpus, a traceback or memory exhausted. Real files, and `train.py` in a subprocess where
what the user sees is the point."""

from __future__ import annotations

import json
import random

import pytest

from helpers import korean_documents, prepare_cli, prepared_dir, write_jsonl
from rankzero.data.inputs.files import zstd_problem


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


# ------------------------------------------------------------------ a compression bomb (item 7)


def _gzip_bomb(path, head: list[str], line_mib: int):
    """`head` lines, then one line of `line_mib` MiB with no line break, as a .gz of a few hundred KB: one gzip member
    per MiB, concatenated (which gzip reads as one stream), so making it costs nothing."""
    import gzip

    member = gzip.compress(("가나다라마바사 " * 100_000).encode()[: 1 << 20], compresslevel=9)
    path.write_bytes(gzip.compress("".join(f"{line}\n" for line in head).encode()) + member * line_mib)
    return path


# train.py run so that it reports its own peak: the kernel's high-water mark of its memory (VmHWM) as it exits. Not
# wait4's ru_maxrss, which a child forked from pytest starts at pytest's size (the kernel carries it across exec).
PEAK_REPORTER = """
import atexit, runpy, sys
from bench._measure import peak_rss
peak_file, sys.argv = sys.argv[1], sys.argv[2:]
def report():
    with open(peak_file, "w") as out:
        out.write(str(peak_rss() // 1024))
atexit.register(report)
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _peak_rss_mib(argv: list, tmp_path) -> tuple[int, str, float]:
    """Run `train.py ARGV` under a 3 GiB address-space limit (as the issue's reporter did); its exit status, stderr
    and peak RSS in MiB (its own high-water mark, reported as it exits)."""
    import resource
    import subprocess
    import sys

    from helpers import REPO, quiet_env

    def limit_memory():
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    peak = tmp_path / "peak_kib.txt"
    done = subprocess.run([sys.executable, "-c", PEAK_REPORTER, str(peak), str(REPO / "train.py"), *map(str, argv)], cwd=REPO,
                          env=quiet_env(RANKZERO_MALLOC="system"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, preexec_fn=limit_memory)
    return done.returncode, done.stderr, int(peak.read_text()) / 1024


def test_a_compression_bomb_is_an_error_at_its_line_and_memory_stays_bounded(tmp_path, tokenizer_dir):
    """A 2.6 MB .txt.gz holding one 1 GiB line: held whole, its decoding, parsing and tokenizing would take ~20 GB
    (a MemoryError traceback under the limit); read at most --max_document_mb (64 MiB) of it, the prepare's peak
    stays within that of the same prepare of three short lines."""
    head = ["서울의 아침은 조용했다.", "오늘은 비가 내렸다.", "도서관에서 책을 읽었다."]
    bomb = _gzip_bomb(tmp_path / "bomb.txt.gz", head, 1024)
    assert bomb.stat().st_size < 3 << 20
    plain = tmp_path / "plain.txt"
    plain.write_text("\n".join(head) + "\n", encoding="utf-8")
    flags = ["--tokenizer_path", tokenizer_dir, "--max_seq_length", 8, "--dedup", "none"]
    code, err, baseline = _peak_rss_mib(["--tokenize_only", "--dataset", plain, "--cache_dir", tmp_path / "c1", *flags],
                                        tmp_path)
    assert code == 0, err[-3000:]
    code, err, peak = _peak_rss_mib(["--tokenize_only", "--dataset", bomb, "--cache_dir", tmp_path / "c2", *flags],
                                    tmp_path)
    assert code == 1 and "Traceback" not in err, err[-3000:]
    assert f"error: {bomb}:4: a line is longer than 67,108,864 bytes (--max_document_mb 64): " in err, err[-3000:]
    assert peak < baseline + 160, (baseline, peak)  # the 64 MiB read, and one copy of it


def _chunks(path, limit: int, txt_sample_by: str = "line", start: int = 0, end=None) -> list:
    from rankzero.data.inputs.readers import iter_file_chunks

    return list(iter_file_chunks(str(path), 0, 1000, txt_sample_by, start, end, max_document_bytes=limit))


def test_the_document_limit_is_exact_and_names_the_line_in_every_text_shape(tmp_path):
    from rankzero.errors import RankzeroError

    path = tmp_path / "a.txt"
    path.write_bytes(b"short\n" + b"x" * 99 + b"\n" + b"tail\n")  # line 2 is 100 bytes with its line break
    assert b"".join(c.payload for c in _chunks(path, 100)) == path.read_bytes()
    with pytest.raises(RankzeroError, match=rf"^{path}:2: a line is longer than 99 bytes \(--max_document_mb 9.44\d*e-05\): "):
        _chunks(path, 99)
    start = len(b"short\n")  # a range of the file, as a Ray task reads it: the file's own line number
    with pytest.raises(RankzeroError, match=rf"^{path}:2: a line"):
        _chunks(path, 99, start=start)
    path.write_bytes(b"one\n\n" + b"abcdefghi\n" * 10 + b"\nlast\n")  # a paragraph of 100 bytes from line 3
    assert len(_chunks(path, 100, "paragraph")) == 1
    with pytest.raises(RankzeroError, match=rf"^{path}:3: a paragraph is longer"):
        _chunks(path, 99, "paragraph")
    with pytest.raises(RankzeroError, match=rf"^{path}: the file \(one document with --txt_sample_by document\) is "
                                            "longer"):
        _chunks(path, path.stat().st_size - 1, "document")
    assert _chunks(path, path.stat().st_size, "document")[0].payload == path.read_bytes()


def test_a_chunk_is_cut_by_bytes_whatever_the_batch_size(tmp_path, monkeypatch):
    import rankzero.data.inputs.readers as readers

    monkeypatch.setattr(readers, "CHUNK_BYTES", 1000)
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"".join(json.dumps({"text": "가" * (i % 90)}).encode() + b"\n" for i in range(500)))
    chunks = _chunks(path, 1 << 20)
    assert b"".join(c.payload for c in chunks) == path.read_bytes()
    assert all(c.nbytes < 1000 + 600 for c in chunks) and len(chunks) > 10  # a line is at most ~550 bytes
    assert [c.first_line for c in chunks] == [1] + [1 + sum(c.payload.count(b"\n") for c in chunks[:i])
                                                    for i in range(1, len(chunks))]


def test_a_long_csv_field_is_read_and_one_past_the_limit_names_its_line(tmp_path, tokenizer_dir):
    """The csv module stops at 128 KiB a field with a traceback (`_csv.Error: field larger than field limit`)."""
    long = "서울의 아침은 조용했다. " * 20_000  # ~330 KB
    path = tmp_path / "articles.csv"
    path.write_text(f'text\n"짧은 글"\n"{long}"\n"끝"\n', encoding="utf-8")
    assert [r["text"] for c in _chunks(path, 1 << 20) for r in c.payload] == ["짧은 글", long, "끝"]
    result = prepare_cli("--dataset", path, "--tokenizer_path", tokenizer_dir, "--cache_dir", tmp_path / "cache",
                         "--max_document_mb", 0.25, check=False)
    _failed_cleanly(result, f"{path}:3: malformed CSV (field larger than field limit (262144)); fix the file, or "
                            "raise --max_document_mb")


# ------------------------------------------------------------------ damaged columnar inputs (item 8)


def _columnar_files(directory) -> dict:
    """The same 6,000 records as Parquet (row groups of 1,000, snappy pages), an Arrow IPC file and an Arrow stream."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"text": korean_documents(6000, seed=8)})
    paths = {"parquet": directory / "c.parquet", "arrow file": directory / "c.arrow",
             "arrow stream": directory / "s.arrow"}
    pq.write_table(table, paths["parquet"], row_group_size=1000)
    for kind, new in (("arrow file", pa.ipc.new_file), ("arrow stream", pa.ipc.new_stream)):
        with pa.OSFile(str(paths[kind]), "wb") as sink, new(sink, table.schema) as writer:
            for batch in table.to_batches(max_chunksize=1000):
                writer.write_batch(batch)
    return paths


@pytest.mark.parametrize("damage", ["cut at half", "64 bytes inverted at half"])
@pytest.mark.parametrize("kind", ["parquet", "arrow file", "arrow stream"])
def test_a_damaged_parquet_or_arrow_input_is_an_error_naming_it(tmp_path, kind, damage):
    from rankzero.data.inputs.readers import iter_texts
    from rankzero.errors import RankzeroError

    path = _columnar_files(tmp_path)[kind]
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    if damage == "cut at half":
        del data[middle:]
    else:
        data[middle:middle + 64] = bytes(byte ^ 0xFF for byte in data[middle:middle + 64])
    path.write_bytes(bytes(data))
    label = "Parquet" if kind == "parquet" else "Arrow"
    try:
        texts = list(iter_texts([str(path)]))
    except RankzeroError as error:
        assert str(error).startswith(f"{path}: cannot be read as {label} ("), error
        assert str(error).endswith("file; re-download or re-write it") and "\n" not in str(error), error
    else:  # inverted bytes that land inside one text and stay valid UTF-8 change it, and nothing can tell
        assert damage != "cut at half" and len(texts) == 6000 and texts != korean_documents(6000, seed=8)


@pytest.mark.parametrize("damage", ["arrow cut at half", "arrow deleted", "arrow overwritten", "state.json cut",
                                    "dataset_info.json wrong types"])
def test_a_damaged_save_to_disk_input_is_an_error_naming_its_directory(tmp_path, damage):
    """Each of these was a traceback from inside datasets or pyarrow (OSError, FileNotFoundError, ArrowInvalid,
    JSONDecodeError, TypeError)."""
    import datasets

    from rankzero.data.inputs.readers import iter_texts
    from rankzero.errors import RankzeroError

    saved = tmp_path / "saved"
    datasets.Dataset.from_dict({"text": korean_documents(3000, seed=9)}).save_to_disk(str(saved))
    [arrow] = saved.glob("*.arrow")
    if damage == "arrow cut at half":
        arrow.write_bytes(arrow.read_bytes()[:arrow.stat().st_size // 2])
    elif damage == "arrow deleted":
        arrow.unlink()
    elif damage == "arrow overwritten":
        with open(arrow, "r+b") as handle:
            handle.write(bytes(100))
    elif damage == "state.json cut":
        (saved / "state.json").write_text("{")
    else:
        (saved / "dataset_info.json").write_text('{"features": 3}')
    with pytest.raises(RankzeroError) as error:
        list(iter_texts([str(saved)]))
    assert str(error.value).startswith(f"{saved}: cannot be read as a save_to_disk dataset (")
    assert str(error.value).endswith("cut short, missing or damaged; save it again") and "\n" not in str(error.value)


def test_a_parquet_page_that_does_not_decompress_is_one_line_not_a_traceback(tmp_path, tokenizer_dir):
    path = _columnar_files(tmp_path)["parquet"]
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 64] = bytes(byte ^ 0xFF for byte in data[middle:middle + 64])
    path.write_bytes(bytes(data))
    result = prepare_cli("--dataset", path, "--tokenizer_path", tokenizer_dir, "--cache_dir", tmp_path / "cache",
                         check=False)
    _failed_cleanly(result, f"{path}: cannot be read as Parquet (Corrupt snappy compressed data.)")


# ------------------------------------------------------------------ what a directory holds that is not read (item 11)


def test_other_spellings_of_compressed_files_are_read_and_what_is_not_read_is_listed(tmp_path, tokenizer_dir):
    import gzip
    import os
    import tarfile

    import zstandard

    texts = korean_documents(240, seed=11)
    parts = ["".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts[i::4]).encode() for i in range(4)]
    plain, packed = tmp_path / "plain", tmp_path / "packed"
    plain.mkdir(), packed.mkdir()
    for index, part in enumerate(parts):
        (plain / f"{index}.jsonl").write_bytes(part)
    (packed / "0.jsonl.zstd").write_bytes(zstandard.ZstdCompressor().compress(parts[0]))  # `zstd` writes .zst
    (packed / "1.jsonl.gzip").write_bytes(gzip.compress(parts[1]))
    (packed / "2.JSONL").write_bytes(parts[2])
    (packed / "3.JSONL.GZ").write_bytes(gzip.compress(parts[3]))
    with tarfile.open(packed / "more.tar.gz", "w:gz") as archive:
        archive.add(plain / "0.jsonl", arcname="0.jsonl")
    (packed / "README.md").write_text("notes", encoding="utf-8")
    flags = ["--tokenizer_path", tokenizer_dir, "--max_seq_length", 32, "--dedup", "none"]
    outputs = {}
    for directory in (plain, packed):
        result = prepare_cli("--dataset", directory, "--cache_dir", tmp_path / f"cache-{directory.name}", *flags)
        manifest = json.loads((prepared_dir(result.stdout) / "manifest.json").read_text())
        outputs[directory.name] = (manifest["docs_in"], manifest["tokens"], result.stderr)
    assert outputs["packed"][:2] == outputs["plain"][:2] == (240, outputs["plain"][1])
    warnings = [line for line in outputs["packed"][2].splitlines() if "are not read" in line]
    assert len(warnings) == 1, outputs["packed"][2]
    assert warnings[0].endswith(f"--dataset {packed}: 2 file(s) below it are not read: {packed / 'README.md'} (type "
                                f"'.md' is not read); {packed / 'more.tar.gz'} (an archive: unpack it)"), warnings[0]
    assert "are not read" not in outputs["plain"][2]
    fifo = tmp_path / "corpus.jsonl"
    os.mkfifo(fifo)
    result = prepare_cli("--dataset", fifo, "--cache_dir", tmp_path / "cache", *flags, check=False)
    line = _failed_cleanly(result, f"--dataset {fifo}: {fifo} is a FIFO (named pipe): rankzero reads regular files")
    assert "did you mean" not in line


# ------------------------------------------------------------------ a compressed file of 0 bytes (issue 47, item 8)


@pytest.mark.parametrize("name", ["part-2.jsonl.gz", "part-2.jsonl.zst", "part-2.txt.bz2", "part-2.json.xz"])
def test_a_compressed_file_of_0_bytes_is_damaged_not_empty(tmp_path, tokenizer_dir, name):
    """gzip -t, zstd -t, bzip2 -t and xz -t all call it damaged (a download that never wrote a byte); read as empty
    text, a directory source would lose that part of the corpus without a word."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    write_jsonl(corpus / "part-1.jsonl", [{"text": text} for text in korean_documents(40, seed=2)])
    empty = corpus / name
    empty.write_bytes(b"")
    cache = tmp_path / "cache"
    result = prepare_cli("--dataset", corpus, "--tokenizer_path", tokenizer_dir, "--cache_dir", cache,
                         "--max_seq_length", 32, "--dedup", "none", check=False)
    suffix = "." + name.rsplit(".", 1)[1]
    _failed_cleanly(result, f"{empty}: 0 bytes, which is no {suffix} stream (an interrupted download or copy?)")
    assert not [p for p in cache.iterdir() if p.is_dir()], "nothing published"
