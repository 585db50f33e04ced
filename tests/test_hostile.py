"""Hostile but realistic inputs (issue 15): one test per case. The numbers in the test names are the
issue's. Cases that need several processes, signals or a shared cache are in tests/test_handoff.py."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from datautil import REPO, data_args, korean_documents, prepare_cli, prepared_dir, write_jsonl
from rankzero.data.published import ALWAYS_HASHED_BYTES
from rankzero.data.handoff import prepare_or_wait
from rankzero.data.plan import compute_fingerprint, fingerprint_inputs
from rankzero.data.records import ChatRenderer, chunk_documents
from rankzero.data.readers import iter_chunks, iter_texts
from rankzero.data.specs import resolve_source
from rankzero.data.encode import load_tokenizer
from rankzero.errors import RankzeroError
from rankzero.runtime import Runtime

SINGLE = Runtime(0, 1, 0, 1, 0, "test-host")


@pytest.fixture
def corpus(tmp_path):
    return write_jsonl(tmp_path / "ko.jsonl", [{"text": t} for t in korean_documents(400)])


def _rows(directory: Path) -> list:
    """Every row's ids, read without memory-mapping (a test rewrites shards in place: a live map would SIGBUS)."""
    import pyarrow as pa

    rows = []
    for entry in json.loads((directory / "state.json").read_text())["_data_files"]:
        with pa.OSFile(str(directory / entry["filename"])) as handle:
            rows += pa.ipc.open_stream(handle).read_all().column("input_ids").to_pylist()
    return rows


def _fingerprint(args) -> str:
    sources = [resolve_source(spec) for spec in args.dataset]
    return compute_fingerprint(fingerprint_inputs(args, 0, sources, load_tokenizer(args.tokenizer_path)))


# ------------------------------------------------------------------ 2. planted / foreign datasets


def test_2_a_dataset_planted_under_the_expected_fingerprint_is_never_used(tmp_path, tokenizer_dir, corpus):
    other = write_jsonl(tmp_path / "other.jsonl", [{"text": t} for t in korean_documents(300, seed=5)])
    cache = tmp_path / "cache"
    foreign = prepare_or_wait(data_args(tokenizer_dir, cache, [other]), SINGLE, 0)
    expected = _fingerprint(data_args(tokenizer_dir, cache, [corpus]))
    planted = cache / expected
    shutil.copytree(foreign, planted)  # a copy of real data, under the name this run looks for
    args = data_args(tokenizer_dir, cache, [corpus])
    with pytest.raises(RankzeroError, match=rf"{planted}: its manifest.json is for fingerprint '{foreign.name}'"):
        prepare_or_wait(args, SINGLE, 0)
    # A forger who also fixes the fingerprint is caught by the inputs the manifest records.
    manifest = json.loads((planted / "manifest.json").read_text())
    manifest["fingerprint"] = expected
    (planted / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RankzeroError, match=r"built from other inputs \(sources differ"):
        prepare_or_wait(args, SINGLE, 0)
    assert json.loads((planted / "manifest.json").read_text()) == manifest, "not rankzero's to remove either"


# ------------------------------------------------------------------ 3, 4. damaged published dirs


def _cut_first_shard_at_a_batch_boundary(directory: Path) -> int:
    """Rewrite the first shard as a valid Arrow stream holding its first half of record batches."""
    import pyarrow as pa

    shard = sorted(directory.glob("data-*.arrow"))[0]
    with pa.OSFile(str(shard)) as handle:
        reader = pa.ipc.open_stream(handle)
        schema, batches = reader.schema, list(reader)
    assert len(batches) >= 4, "use a smaller --dataset_writer_batch_size"
    kept = batches[: len(batches) // 2]
    with pa.OSFile(str(shard), "wb") as handle, pa.ipc.new_stream(handle, schema) as writer:
        for batch in kept:
            writer.write_batch(batch)
    return sum(len(b) for b in kept) - sum(len(b) for b in batches)


@pytest.mark.parametrize("damage", ["cut at a batch boundary", "shard deleted", "manifest deleted", "byte flipped"])
def test_3_4_a_damaged_dataset_is_rebuilt_never_served(tmp_path, tokenizer_dir, corpus, damage):
    if damage == "byte flipped":  # a shard above ALWAYS_HASHED_BYTES (smaller files are always checksummed)
        corpus = write_jsonl(tmp_path / "big.jsonl", [{"text": t} for t in korean_documents(2000)])
    common = ["--dataset", corpus, "--tokenizer_path", tokenizer_dir, "--max_seq_length", 32, "--cache_dir",
              tmp_path / "cache", "--dataset_writer_batch_size", 10]
    out = prepared_dir(prepare_cli(*common).stdout)
    rows = _rows(out)
    if damage == "cut at a batch boundary":
        assert _cut_first_shard_at_a_batch_boundary(out) < 0
        expected = r"data-00000-of-00001.arrow is [\d,]+ bytes, its manifest says [\d,]+ \(cut short"
    elif damage == "shard deleted":
        next(out.glob("data-*.arrow")).unlink()
        expected = "data-00000-of-00001.arrow is missing"
    elif damage == "manifest deleted":
        (out / "manifest.json").unlink()
        expected = "no readable manifest.json"
    else:  # same size, same mtime: only --verify_data's checksums see it
        shard = next(out.glob("data-*.arrow"))
        stat = shard.stat()
        with open(shard, "r+b") as handle:
            handle.seek(stat.st_size // 2)
            byte = handle.read(1)
            handle.seek(stat.st_size // 2)
            handle.write(bytes([byte[0] ^ 0xFF]))
        os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        assert stat.st_size > ALWAYS_HASHED_BYTES
        cheap = prepare_cli(*common)  # the cheap checks cannot see it ...
        assert prepared_dir(cheap.stdout) == out and "damaged" not in cheap.stderr
        common.append("--verify_data")  # ... the checksums do
        expected = "data-00000-of-00001.arrow does not match its checksum"
    for attempt in range(2):  # rebuilt once, then served from the cache (not "forever", as before)
        result = prepare_cli(*common)
        assert prepared_dir(result.stdout) == out
        if attempt == 0:
            assert "is damaged (" in result.stderr and "removed, building it again" in result.stderr, result.stderr
            import re

            assert re.search(expected, result.stderr), result.stderr
            assert result.stderr.count("[prepare] published") == 1
        else:
            assert "damaged" not in result.stderr and "[prepare] published" not in result.stderr
    assert _rows(out) == rows
    assert not list((tmp_path / "cache").glob("*.damaged-*")) and not list((tmp_path / "cache").glob("*.tmp-*"))


def test_3_training_refuses_fewer_rows_than_the_manifest_promises(tmp_path, tokenizer_dir, corpus):
    from rankzero.train.run import load_prepared

    out = prepare_or_wait(data_args(tokenizer_dir, tmp_path / "cache", [corpus]), SINGLE, 0)
    assert len(load_prepared(out, "pretrain")) == json.loads((out / "manifest.json").read_text())["sequences"]
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["sequences"] += 7
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RankzeroError, match=rf"{out}: {manifest['sequences'] - 7:,} rows loaded, its manifest.json "
                                            rf"promises {manifest['sequences']:,}"):
        load_prepared(out, "pretrain")


# ------------------------------------------------------------------ 5, 8. walks and globs


def _resolve_in_child(spec: str, timeout: float = 60) -> list[str]:
    """resolve_source in a fresh process with a deadline: a regression hangs that process, not the test run."""
    code = ("import json, sys; from rankzero.data.specs import resolve_source; "
            "print(json.dumps(list(resolve_source(sys.argv[1]).files)))")
    result = subprocess.run([sys.executable, "-c", code, spec], capture_output=True, text=True, timeout=timeout,
                            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_5_symlink_loops_do_not_hang_globs_or_directory_walks(tmp_path):
    root = tmp_path / "corpus"
    (root / "a" / "b").mkdir(parents=True)
    for path in (root / "top.jsonl", root / "a" / "mid.jsonl", root / "a" / "b" / "deep.jsonl"):
        write_jsonl(path, [{"text": path.name}])
    (root / "a" / "b" / "loop").symlink_to(root, target_is_directory=True)
    (root / "a" / "self").symlink_to(root / "a", target_is_directory=True)
    (root / "linked.jsonl").symlink_to(root / "a" / "mid.jsonl")  # a link to a file is read like a file
    expected = sorted(str(root / p) for p in ("top.jsonl", "linked.jsonl", "a/mid.jsonl", "a/b/deep.jsonl"))
    started = time.monotonic()
    assert _resolve_in_child(f"{root}/**/*.jsonl") == expected
    assert _resolve_in_child(str(root)) == expected
    assert _resolve_in_child(f"{root}/*/*.jsonl") == [str(root / "a" / "mid.jsonl")]
    assert time.monotonic() - started < 30
    # A symlinked directory named as the spec itself is read.
    assert resolve_source(str(root / "a" / "self")).files == (str(root / "a" / "self" / "b" / "deep.jsonl"),
                                                                str(root / "a" / "self" / "mid.jsonl"))


def test_8_hidden_files_and_dirs_are_skipped_unless_named(tmp_path, caplog):
    root = tmp_path / "corpus"
    (root / ".ipynb_checkpoints").mkdir(parents=True)
    (root / ".git").mkdir()
    write_jsonl(root / "a.jsonl", [{"text": "보이는 문서"}])
    write_jsonl(root / ".ipynb_checkpoints" / "a-checkpoint.jsonl", [{"text": "보이는 문서"}])
    (root / ".git" / "config.json").write_text('{"core": {"bare": false}}')
    write_jsonl(root / ".hidden.jsonl", [{"text": "숨은 파일"}])
    assert list(iter_texts([str(root)])) == ["보이는 문서"]
    assert list(iter_texts([f"{root}/**/*.jsonl"])) == ["보이는 문서"]
    assert list(iter_texts([f"{root}/*"])) == ["보이는 문서"]
    assert list(iter_texts([f"{root}/.ipynb_checkpoints/*.jsonl"])) == ["보이는 문서"]  # named: read
    assert list(iter_texts([f"{root}/.*.jsonl"])) == ["숨은 파일"]
    assert list(iter_texts([str(root / ".hidden.jsonl")])) == ["숨은 파일"]


# ------------------------------------------------------------------ 6, 7, 9. text the tokenizer cannot take


def _parse(path: Path, **kwargs):
    out = None
    for chunk in iter_chunks(resolve_source(str(path)), 0, batch_size=100):
        out = chunk_documents(chunk, kwargs.pop("text_column", None), ChatRenderer(None), **kwargs)
    return out


def test_6_lone_surrogates_name_file_and_line_and_both_flags_get_past_them(tmp_path, tokenizer_dir):
    path = tmp_path / "s.jsonl"
    lines = ['{"text": "첫 문서"}', '{"text": "이모지 \\ud83d\\ude00 쌍은 괜찮다"}', '{"text": "외톨이 \\ud800 서로게이트"}',
             '{"text": "끝"}']
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(RankzeroError, match=r"s.jsonl:3: the text holds a lone UTF-16 surrogate .*--on_decode_error "
                                            r"replace .*--skip_bad_records"):
        _parse(path)
    skipped = _parse(path, skip_bad_records=True)
    assert [d[0][0] for d in skipped.documents] == ["첫 문서", "이모지 😀 쌍은 괜찮다", "끝"] and skipped.bad_records == 1
    replaced = _parse(path, on_decode_error="replace")
    assert replaced.documents[2][0][0] == "외톨이 \ufffd 서로게이트" and replaced.replaced_lines == 1
    # End to end: the Rust tokenizer takes what is left, and the manifest counts it.
    for flag, key in (({"on_decode_error": "replace"}, "lines_with_replaced_bytes (kept)"),
                      ({"skip_bad_records": True}, "bad_record")):
        out = prepare_or_wait(data_args(tokenizer_dir, tmp_path / "cache", [path], max_seq_length=4, **flag), SINGLE, 0)
        assert json.loads((out / "manifest.json").read_text())["dropped"] == {key: 1}


def test_7_a_byte_order_mark_is_not_text(tmp_path):
    bom = "\ufeff"
    (tmp_path / "a.jsonl").write_text(bom + '{"text": "첫 줄"}\n{"text": "둘째 줄"}\n', encoding="utf-8")
    (tmp_path / "b.csv").write_text(bom + "text,id\n씨에스브이,1\n", encoding="utf-8")
    (tmp_path / "c.txt").write_text(bom + "텍스트 한 줄\n", encoding="utf-8")
    (tmp_path / "d.json").write_text(bom + '[{"text": "제이슨 배열"}]', encoding="utf-8")
    (tmp_path / "e.txt").write_text(bom + "문서 전체\n", encoding="utf-8")
    assert list(iter_texts([str(tmp_path / n) for n in ("a.jsonl", "b.csv", "c.txt", "d.json")])) == [
        "첫 줄", "둘째 줄", "씨에스브이", "텍스트 한 줄", "제이슨 배열"]
    assert list(iter_texts([str(tmp_path / "e.txt")], txt_sample_by="document")) == ["문서 전체\n"]
    assert list(iter_texts([str(tmp_path / "c.txt")], txt_sample_by="paragraph")) == ["텍스트 한 줄"]


def test_9_struct_columns_are_an_error_listing_fields_and_binary_columns_are_decoded(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    struct = tmp_path / "struct.parquet"
    pq.write_table(pa.table({"text": [{"title": "제목", "body": "본문 하나"}, {"title": "둘", "body": "본문 둘"}]}), struct)
    with pytest.raises(RankzeroError, match=r"struct.parquet: record 1: column 'text' is a struct with fields "
                                            r"\['body', 'title'\]: .*--text_column text.FIELD"):
        list(iter_texts([str(struct)]))
    assert list(iter_texts([str(struct)], text_column="text.body")) == ["본문 하나", "본문 둘"]
    write_jsonl(tmp_path / "nested.jsonl", [{"meta": {"content": "중첩된 글"}}])
    assert list(iter_texts([str(tmp_path / "nested.jsonl")], text_column="meta.content")) == ["중첩된 글"]

    binary = tmp_path / "binary.parquet"
    pq.write_table(pa.table({"text": pa.array(["바이너리 글".encode(), b"bad \xff byte"], pa.binary())}), binary)
    with pytest.raises(RankzeroError, match=r"binary.parquet: record 2: binary column 'text' is not UTF-8 \(byte 4\)"):
        _parse(binary)
    replaced = _parse(binary, on_decode_error="replace")
    assert [d[0][0] for d in replaced.documents] == ["바이너리 글", "bad \ufffd byte"] and replaced.replaced_lines == 1
    assert _parse(binary, skip_bad_records=True).bad_records == 1


# ------------------------------------------------------------------ 11. a full disk


def _in_small_tmpfs(size: str, mount_point: Path, command: list) -> list:
    """`command` in a private mount namespace with a tmpfs of `size` at mount_point (nothing to clean up)."""
    script = 'mount -t tmpfs -o size="$1" tmpfs "$2" && shift 2 && exec "$@"'
    return ["unshare", "-rm", "sh", "-c", script, "sh", size, str(mount_point), *map(str, command)]


def _can_mount_tmpfs(tmp_path: Path) -> bool:
    target = tmp_path / "probe-mount"
    target.mkdir()
    try:
        return subprocess.run(_in_small_tmpfs("1m", target, ["true"]), capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.parametrize("when", ["before the build", "mid-build"])
def test_11_a_full_disk_is_one_line_naming_the_cache_free_space_and_need(tmp_path, tokenizer_dir, when):
    if shutil.which("unshare") is None or not _can_mount_tmpfs(tmp_path):
        pytest.skip("needs a private mount namespace (unshare -rm) for a tiny tmpfs")
    # Estimated need: ~4/3 of the input. Below half of it the build is refused; above it may start.
    documents = 6000 if when == "before the build" else 4000
    corpus = write_jsonl(tmp_path / "ko.jsonl", [{"text": t} for t in korean_documents(documents)])
    cache = tmp_path / "cache"
    cache.mkdir()
    size = "1m" if when == "before the build" else "2m"
    command = [sys.executable, REPO / "train.py", "--tokenize_only", "--dataset", corpus, "--tokenizer_path",
               tokenizer_dir, "--max_seq_length", 64, "--cache_dir", cache]
    result = subprocess.run(_in_small_tmpfs(size, cache, command), capture_output=True, text=True, timeout=300,
                            cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 1 and "Traceback" not in result.stderr and len(errors) == 1, result.stderr
    if when == "before the build":
        assert f"error: --cache_dir {cache}: 1.0 MB free, and this build needs about " in errors[0], errors[0]
        assert "[prepare] encode" not in result.stderr  # refused before any work
    else:
        assert f"error: --cache_dir {cache}: no space left on the device while preparing (2.1 MB were free when " \
               "the build started; this build needs about " in errors[0], errors[0]
        assert "the partial build was removed" in errors[0]


def test_11_the_space_check_and_enospc_detection_without_a_tmpfs(tmp_path, monkeypatch, caplog):
    # The processes above need `unshare`; this checks the same decisions everywhere, on faked disk usage.
    import collections
    import errno

    from rankzero import files
    from rankzero.data import published
    from rankzero.errors import RankzeroError

    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(published.shutil, "disk_usage", lambda path: usage(10**9, 0, 3 * 10**6))
    with pytest.raises(RankzeroError, match=rf"--cache_dir {tmp_path}: 3.0 MB free, and this build needs about "):
        published.check_free_space(tmp_path, 10 * 10**6)  # below a third of the need: refused
    with caplog.at_level("WARNING"):
        assert published.check_free_space(tmp_path, 6 * 10**6) == 3 * 10**6  # might fit: a warning, no error
    assert "it may not fit" in caplog.text
    assert published.check_free_space(tmp_path, None) == 3 * 10**6  # a hub source: size unknown, no verdict

    assert files.out_of_space(OSError(errno.ENOSPC, "No space left on device"))
    assert files.out_of_space(OSError("IOError: No space left on device"))  # pyarrow: no errno, by message
    try:
        try:
            raise OSError(errno.EDQUOT, "Disk quota exceeded")
        except OSError as quota:
            raise RuntimeError("writing a shard failed") from quota
    except RuntimeError as chained:
        assert files.out_of_space(chained)
    assert not files.out_of_space(OSError(errno.EACCES, "Permission denied")) and not files.out_of_space(None)


# ------------------------------------------------------------------ 12. arguments


def test_12_flags_and_recipe_keys_match_exactly_never_by_prefix(tmp_path, tokenizer_dir):
    from rankzero.args import parse_args

    base = ["--dataset", "x.jsonl", "--tokenizer_path", str(tokenizer_dir), "--output_dir", str(tmp_path / "out"),
            "--model_config", str(REPO / "configs" / "model_config_tiny.json")]
    with pytest.raises(ValueError, match=r"unknown flag --learning_rat \(did you mean --learning_rate\?\)"):
        parse_args([*base, "--learning_rat", "1e-3"])
    with pytest.raises(ValueError, match=r"unknown flag --max_seq_len \(did you mean --max_seq_length\?\)"):
        parse_args(["--tokenize_only", "--dataset", "x.jsonl", "--tokenizer_path", "/tmp", "--max_seq_len", "64"])
    recipe = tmp_path / "r.yaml"
    recipe.write_text("warmup_step: 10\nlearning_rate: 1.0e-3\n")
    with pytest.raises(ValueError, match=r"recipe .*r.yaml: unknown key 'warmup_step' \(did you mean warmup_steps\?\)"):
        parse_args([str(recipe), *base])
    assert parse_args([*base, "--learning_rate", "1e-3"]).training.learning_rate == 1e-3


@pytest.mark.parametrize("weight", ["abc", "inf", "nan", "0", "-1", "1e999"])
def test_12_a_bad_weight_is_an_error_naming_the_spec(tmp_path, tokenizer_dir, corpus, weight):
    from rankzero.args import parse_args

    spec = f"{corpus}@{weight}"
    with pytest.raises(ValueError, match=rf"--dataset {spec}: the weight after '@' must be"):
        parse_args(["--tokenize_only", "--dataset", spec, "--tokenizer_path", str(tokenizer_dir)])


def test_12_an_at_sign_inside_a_path_is_not_a_weight(tmp_path):
    (tmp_path / "user@host").mkdir()
    path = write_jsonl(tmp_path / "user@host" / "a.jsonl", [{"text": "x"}])
    assert resolve_source(str(path)).weight is None
    assert resolve_source(f"{path}@2").weight == 2.0


@pytest.mark.parametrize("spec", ["data/samplee", "./corpus", "corpora/ko/train", "missing_dir/"])
def test_12_a_missing_local_path_is_no_such_file_at_once(spec):
    started = time.monotonic()
    with pytest.raises(RankzeroError, match="no such file or directory"):
        resolve_source(spec)
    assert time.monotonic() - started < 1.0  # no hub lookup
    if spec == "data/samplee":
        with pytest.raises(RankzeroError, match=r"did you mean data/sample\?"):
            resolve_source(spec)


def test_12_bad_training_numbers_name_their_flag_before_anything_is_written(tmp_path, tokenizer_dir, corpus):
    output = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, REPO / "train.py", "--dataset", corpus, "--tokenizer_path", tokenizer_dir, "--model_config",
         REPO / "configs" / "model_config_tiny.json", "--output_dir", output, "--cache_dir", tmp_path / "cache",
         "--per_device_train_batch_size", "0", "--learning_rate", "nan", "--gradient_accumulation_steps", "0"],
        capture_output=True, text=True, timeout=300, cwd=REPO)
    assert result.returncode == 1, result.stderr[-3000:]
    for problem in ("--per_device_train_batch_size 0: must be at least 1", "--learning_rate nan: must be a finite",
                    "--gradient_accumulation_steps 0: must be at least 1"):
        assert problem in result.stderr, result.stderr[-3000:]
    assert not output.exists() and not (tmp_path / "cache").exists()


def test_12_a_block_longer_than_the_model_positions(tmp_path, tokenizer_dir, caplog):
    from rankzero.args import parse_args

    config = json.loads((REPO / "configs" / "model_config_tiny.json").read_text())
    config["max_position_embeddings"] = 128
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    argv = ["--dataset", "x.jsonl", "--tokenizer_path", str(tokenizer_dir), "--output_dir", str(tmp_path / "out"),
            "--max_seq_length", "256"]
    with pytest.raises(ValueError, match=r"--max_seq_length 256: longer than the model's max_position_embeddings 128"):
        parse_args([*argv, "--model_config", str(path)])
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"max_position_embeddings 128 \(.*checkpoint/config.json\)"):
        parse_args([*argv, "--pretrained_model", str(checkpoint)])
    config["rope_parameters"] = {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0}
    path.write_text(json.dumps(config))
    with caplog.at_level(logging.WARNING):
        assert parse_args([*argv, "--model_config", str(path)]).data.max_seq_length == 256
    assert "allowed because its RoPE scaling (yarn, factor 4.0) extends the positions" in caplog.text
    assert parse_args([*argv[:-2], "--max_seq_length", "128", "--model_config", str(path)])


# ------------------------------------------------------------------ content sampling in the fingerprint


def test_content_sampling_notices_an_edit_that_keeps_size_and_mtime(tmp_path, tokenizer_dir):
    big = write_jsonl(tmp_path / "big.jsonl", [{"text": t} for t in korean_documents(6000)])
    assert big.stat().st_size > 3 << 20  # larger than the two sampled MiB
    fingerprints = {mode: _fingerprint(data_args(tokenizer_dir, tmp_path, [big], fingerprint_content=mode))
                    for mode in ("stat", "sample", "full")}
    assert len(set(fingerprints.values())) == 3  # the mode is part of the identity

    def edit(offset: int) -> None:
        stat = big.stat()
        with open(big, "r+b") as handle:
            handle.seek(offset)
            digit = handle.read(1)
            assert digit.isdigit()
            handle.seek(offset)
            handle.write(b"7" if digit != b"7" else b"8")
        os.utime(big, ns=(stat.st_atime_ns, stat.st_mtime_ns))

    raw, mark = big.read_bytes(), "(문서 ".encode()  # each document ends with "(문서 N)"
    head, middle = raw.index(mark) + len(mark), raw.index(mark, len(raw) // 2) + len(mark)
    edit(head)  # inside the first MiB
    after = {mode: _fingerprint(data_args(tokenizer_dir, tmp_path, [big], fingerprint_content=mode))
             for mode in ("stat", "sample", "full")}
    assert after["stat"] == fingerprints["stat"], "size and mtime kept: the stat identity cannot see it"
    assert after["sample"] != fingerprints["sample"] and after["full"] != fingerprints["full"]
    edit(middle)  # between the sampled ends: only the full hash sees it
    again = {mode: _fingerprint(data_args(tokenizer_dir, tmp_path, [big], fingerprint_content=mode))
             for mode in ("sample", "full")}
    assert again["sample"] == after["sample"] and again["full"] != after["full"]
