"""Sources and records: specs, walks and globs, chunk readers, records → text, and the inputs
rankzero does not trust (links, hidden files, surrogates, byte-order marks, structs, binary columns)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import REPO, data_args, korean_documents, prepare, write_jsonl
from rankzero.data.encode import load_tokenizer
from rankzero.data.inputs.readers import iter_chunks, iter_texts
from rankzero.data.inputs.records import ChatRenderer, chunk_documents
from rankzero.data.inputs.specs import resolve_source
from rankzero.errors import RankzeroError


def test_spec_weight_hub_and_paths(tmp_path):
    corpus = write_jsonl(tmp_path / "a.jsonl", [{"text": "x"}])
    source = resolve_source(f"{corpus}@2.5")
    assert (source.kind, source.weight, source.files) == ("files", 2.5, (str(corpus),))
    hub = resolve_source("HAERAE-HUB/KOREAN-WEBTEXT:default#abc123@0.5")
    assert (hub.kind, hub.location, hub.hub_config, hub.hub_revision, hub.weight) == (
        "hub", "HAERAE-HUB/KOREAN-WEBTEXT", "default", "abc123", 0.5)
    with pytest.raises(RankzeroError, match="no such file"):
        resolve_source(str(tmp_path / "missing.jsonl"))
    with pytest.raises(RankzeroError, match="matches no files"):
        resolve_source(str(tmp_path / "*.parquet"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(RankzeroError, match="holds no"):
        resolve_source(str(tmp_path / "empty"))
    with pytest.raises(RankzeroError, match="weight"):
        resolve_source(f"{corpus}@0")


def test_directories_globs_and_every_format(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "corpus"
    (root / "sub").mkdir(parents=True)
    write_jsonl(root / "a.jsonl", [{"text": "jsonl 문서"}])
    (root / "b.json").write_text(json.dumps([{"text": "json array"}]), encoding="utf-8")
    (root / "sub" / "c.txt").write_text("txt line one\n\ntxt line two\n", encoding="utf-8")
    (root / "d.csv").write_text('text,id\n"csv, quoted ""doc""",1\n', encoding="utf-8")
    pq.write_table(pa.table({"text": ["parquet doc"]}), root / "e.parquet")
    (root / "notes.md").write_text("ignored: not a supported type")
    texts = list(iter_texts([str(root)]))
    assert sorted(texts) == sorted(["jsonl 문서", "json array", 'csv, quoted "doc"', "parquet doc",
                                    "txt line one", "txt line two"])
    assert list(iter_texts([str(root / "sub" / "*.txt")], txt_sample_by="document")) == [
        "txt line one\n\ntxt line two\n"]
    assert list(iter_texts([str(root / "sub" / "c.txt")], txt_sample_by="paragraph")) == ["txt line one", "txt line two"]


def test_saved_dataset_source(tmp_path):
    import datasets

    datasets.Dataset.from_dict({"content": ["저장된 데이터셋", "두 번째"]}).save_to_disk(str(tmp_path / "saved"))
    assert resolve_source(str(tmp_path / "saved")).kind == "saved"
    assert list(iter_texts([str(tmp_path / "saved")])) == ["저장된 데이터셋", "두 번째"]


def test_line_chunks_keep_line_numbers_and_offsets(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"".join(json.dumps({"text": f"doc {i}"}).encode() + b"\n" for i in range(10)))
    chunks = list(iter_chunks(resolve_source(str(path)), 0, batch_size=4))
    assert [c.first_line for c in chunks] == [1, 5, 9]
    assert sum(c.nbytes for c in chunks) == path.stat().st_size
    raw = path.read_bytes()
    assert all(raw[c.byte_offset:c.byte_offset + c.nbytes] == c.payload for c in chunks)


def _resolve_in_child(spec: str, timeout: float = 60) -> list[str]:
    """resolve_source in a fresh process with a deadline: a regression hangs that process, not the test run."""
    code = ("import json, sys; from rankzero.data.inputs.specs import resolve_source; "
            "print(json.dumps(list(resolve_source(sys.argv[1]).files)))")
    result = subprocess.run([sys.executable, "-c", code, spec], capture_output=True, text=True, timeout=timeout,
                            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_symlink_loops_do_not_hang_globs_or_directory_walks(tmp_path):
    root = tmp_path / "corpus"
    (root / "a" / "b").mkdir(parents=True)
    for path in (root / "top.jsonl", root / "a" / "mid.jsonl", root / "a" / "b" / "deep.jsonl"):
        write_jsonl(path, [{"text": path.name}])
    (root / "a" / "b" / "loop").symlink_to(root, target_is_directory=True)
    (root / "a" / "self").symlink_to(root / "a", target_is_directory=True)
    (root / "linked.jsonl").symlink_to(root / "a" / "mid.jsonl")  # a link to a file is read like a file
    expected = sorted(str(root / p) for p in ("top.jsonl", "linked.jsonl", "a/mid.jsonl", "a/b/deep.jsonl"))
    # A loop followed forever would hang: each child has a timeout (a hang guard, not a speed test).
    assert _resolve_in_child(f"{root}/**/*.jsonl") == expected
    assert _resolve_in_child(str(root)) == expected
    assert _resolve_in_child(f"{root}/*/*.jsonl") == [str(root / "a" / "mid.jsonl")]
    # A symlinked directory named as the spec itself is read.
    assert resolve_source(str(root / "a" / "self")).files == (str(root / "a" / "self" / "b" / "deep.jsonl"),
                                                                str(root / "a" / "self" / "mid.jsonl"))


def test_fifos_and_dangling_links_in_a_directory_or_glob_are_named_not_skipped_silently(tmp_path, caplog):
    """A FIFO inside a dataset directory was left out without a word (opening it would block the reader)."""
    root = tmp_path / "corpus"
    root.mkdir()
    write_jsonl(root / "a.jsonl", [{"text": "읽는 문서"}])
    os.mkfifo(root / "b.jsonl")
    (root / "c.jsonl").symlink_to(root / "gone.jsonl")
    unread = f"{root / 'b.jsonl'} (a FIFO (named pipe)); {root / 'c.jsonl'} (a symlink to {root / 'gone.jsonl'}"
    for spec in (str(root), f"{root}/*.jsonl", f"{root}/**/*.jsonl"):
        caplog.clear()
        assert resolve_source(spec).files == (str(root / "a.jsonl"),)
        assert unread in caplog.text, (spec, caplog.text)
    (root / "a.jsonl").unlink()
    for spec in (str(root), f"{root}/*.jsonl"):
        with pytest.raises(RankzeroError) as error:
            resolve_source(spec)
        assert unread in str(error.value)


def test_hidden_files_and_dirs_are_skipped_unless_named(tmp_path, caplog):
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


def test_an_at_sign_inside_a_path_is_not_a_weight(tmp_path):
    (tmp_path / "user@host").mkdir()
    path = write_jsonl(tmp_path / "user@host" / "a.jsonl", [{"text": "x"}])
    assert resolve_source(str(path)).weight is None
    assert resolve_source(f"{path}@2").weight == 2.0


@pytest.mark.parametrize("spec", ["data/samplee", "./corpus", "corpora/ko/train", "missing_dir/"])
def test_a_missing_local_path_is_no_such_file_at_once(spec, monkeypatch):
    import socket

    class NetworkUsed(BaseException):  # not an Exception: no retry loop can swallow it
        pass

    def refuse(*args, **kwargs):
        raise NetworkUsed(f"a local path looked up on the network: {args}")

    # At once = no hub lookup: any connection or name lookup fails the test.
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    with pytest.raises(RankzeroError, match="no such file or directory"):
        resolve_source(spec)
    if spec == "data/samplee":
        with pytest.raises(RankzeroError, match=r"did you mean data/sample\?"):
            resolve_source(spec)


# -------------------------------------------------------------------------------- records → text


def _documents(tmp_path, records, renderer=None, **kwargs):
    path = write_jsonl(tmp_path / "r.jsonl", records)
    (chunk,) = iter_chunks(resolve_source(str(path)), 0, batch_size=1000)
    return chunk_documents(chunk, kwargs.pop("text_column", None), renderer or ChatRenderer(None), **kwargs)


def test_instruction_records_keep_the_instruction(tmp_path):
    out = _documents(tmp_path, [{"instruction": "다음 문장을 번역하세요.", "input": "Hello", "output": "안녕하세요"}])
    text = "".join(t for t, _ in out.documents[0])
    assert "다음 문장을 번역하세요." in text and "Hello" in text and "안녕하세요" in text
    assert text.index("번역") < text.index("Hello") < text.index("안녕하세요")


@pytest.mark.parametrize("record, expected", [
    ({"prompt": "질문?", "response": "답."}, ["질문?", "답."]),
    ({"question": "왜?", "answer": "그래서."}, ["왜?", "그래서."]),
    ({"prompt": "옛날 옛적에", "completion": " 호랑이가 살았다."}, ["옛날 옛적에", " 호랑이가 살았다."]),
    ({"messages": [{"role": "user", "content": "안녕"}, {"role": "assistant", "content": "반가워요"}]}, ["안녕", "반가워요"]),
    ({"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]}, ["hi", "hello"]),
])
def test_schemas_render_every_part_with_roles(tmp_path, record, expected):
    out = _documents(tmp_path, [record])
    text = "".join(t for t, _ in out.documents[0])
    assert all(part in text for part in expected)
    if "messages" in record or "conversations" in record:
        assert "### User:" in text and "### Assistant:" in text


def test_chat_template_is_used_when_the_tokenizer_has_one(tmp_path, tokenizer_dir):
    from transformers import AutoTokenizer

    info = load_tokenizer(tokenizer_dir)
    assert info.chat_template
    messages = [{"role": "user", "content": "안녕"}, {"role": "assistant", "content": "반가워요"}]
    out = _documents(tmp_path, [{"messages": messages}], ChatRenderer(info.chat_template, info.special_tokens))
    expected = AutoTokenizer.from_pretrained(str(tokenizer_dir)).apply_chat_template(messages, tokenize=False)
    assert "".join(t for t, _ in out.documents[0]) == expected


def test_sft_masks_mark_only_assistant_turns(tmp_path, tokenizer_dir):
    info = load_tokenizer(tokenizer_dir)
    messages = [{"role": "system", "content": "시스템"}, {"role": "user", "content": "질문"},
                {"role": "assistant", "content": "첫 답"}, {"role": "user", "content": "또 질문"},
                {"role": "assistant", "content": "둘째 답"}]
    for renderer in (ChatRenderer(info.chat_template, info.special_tokens), ChatRenderer(None)):
        out = _documents(tmp_path, [{"messages": messages}], renderer, with_masks=True)
        trained = "".join(t for t, trainable in out.documents[0] if trainable)
        context = "".join(t for t, trainable in out.documents[0] if not trainable)
        assert "첫 답" in trained and "둘째 답" in trained
        assert "질문" in context and "시스템" in context and "질문" not in trained


def test_lists_of_parts_are_joined_and_null_is_empty(tmp_path):
    out = _documents(tmp_path, [{"text": ["first", "second"]}, {"text": None}])
    assert ["".join(t for t, _ in d) for d in out.documents] == ["first\nsecond"]
    assert out.empty == 1


def test_a_text_that_is_a_number_or_boolean_is_an_error_naming_the_line_or_skipped(tmp_path):
    path = tmp_path / "r.jsonl"
    values = ["true", "12345", "NaN", "1.5", "[1, 2]", '["앞", null]', '["앞", ["뒤"]]']
    path.write_text('{"text": "좋은 문장"}\n' + "".join(f'{{"text": {v}}}\n' for v in values), encoding="utf-8")
    (chunk,) = iter_chunks(resolve_source(str(path)), 0, batch_size=100)
    with pytest.raises(RankzeroError, match=r"r.jsonl:2: column 'text' holds true \(bool\), not text"):
        chunk_documents(chunk, None, ChatRenderer(None))
    out = chunk_documents(chunk, None, ChatRenderer(None), skip_bad_records=True)
    assert ["".join(t for t, _ in d) for d in out.documents] == ["좋은 문장"] and out.bad_records == len(values)
    for value in values[3:]:  # each one alone stops the prepare at its line
        path.write_text(f'{{"text": {value}}}\n', encoding="utf-8")
        (chunk,) = iter_chunks(resolve_source(str(path)), 0, batch_size=100)
        with pytest.raises(RankzeroError, match=r"r.jsonl:1: column 'text' holds (1.5|a list with (1|null|\[\"뒤\"\]))"):
            chunk_documents(chunk, None, ChatRenderer(None))


ALTERNATING = ("{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
               "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
               "{% endif %}<|{{ message['role'] }}|>{{ message['content'] }}{% endfor %}")


def test_a_chat_template_that_raises_is_a_record_error_naming_the_line_or_skipped(tmp_path):
    good = [{"role": "user", "content": "질문"}, {"role": "assistant", "content": "답"}]
    bad = [{"role": "user", "content": "질문"}, {"role": "user", "content": "또 질문"}]
    records = [{"messages": good}, {"messages": bad}, {"messages": good}]
    renderer = ChatRenderer(ALTERNATING)
    with pytest.raises(RankzeroError, match=r"r.jsonl:2: the tokenizer's chat template refused this conversation: "
                                            r"Conversation roles must alternate"):
        _documents(tmp_path, records, renderer)
    out = _documents(tmp_path, records, renderer, skip_bad_records=True)
    assert len(out.documents) == 2 and out.bad_records == 1


def test_a_tokenizer_whose_chat_template_raises_stops_the_prepare_at_the_line_or_counts_a_bad_record(
        tmp_path, tokenizer_dir):
    """As Llama's and Gemma's templates do: raise_exception('... must alternate ...') on two user turns."""
    import shutil

    tokenizer = tmp_path / "tokenizer"
    shutil.copytree(tokenizer_dir, tokenizer)
    config = json.loads((tokenizer / "tokenizer_config.json").read_text())
    (tokenizer / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": ALTERNATING}))
    good = [{"role": "user", "content": "질문"}, {"role": "assistant", "content": "서울은 대한민국의 수도이다."}]
    records = [{"messages": good}] * 40
    records.insert(6, {"messages": [{"role": "user", "content": "질문"}, {"role": "user", "content": "또 질문"}]})
    corpus = write_jsonl(tmp_path / "chat.jsonl", records)
    with pytest.raises(RankzeroError, match=r"chat.jsonl:7: the tokenizer's chat template refused this conversation: "
                                            r"Conversation roles must alternate user/assistant.* --skip_bad_records"):
        prepare(data_args(tokenizer, tmp_path / "cache", [corpus], dedup="none"))
    out = prepare(data_args(tokenizer, tmp_path / "cache", [corpus], dedup="none", skip_bad_records=True))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["dropped"] == {"bad_record": 1} and manifest["docs_kept"] == 40


# ------------------------------------------------------------------ compressed inputs


def _compress(path: Path, suffix: str, data: bytes | None = None) -> Path:
    import bz2
    import gzip
    import lzma

    import zstandard

    data = path.read_bytes() if data is None else data
    target = path.with_name(path.name + suffix)
    compress = {".gz": lambda b: gzip.compress(b, compresslevel=1), ".bz2": bz2.compress, ".xz": lzma.compress,
                ".zst": zstandard.ZstdCompressor().compress}[suffix]
    target.write_bytes(compress(data))
    return target


@pytest.mark.parametrize("suffix", [".gz", ".zst", ".bz2", ".xz"])
def test_compressed_files_give_the_same_ids_as_the_file_uncompressed(tmp_path, tokenizer_dir, suffix):
    import datasets

    texts = korean_documents(300, seed=5)
    (tmp_path / "plain").mkdir()
    plain = write_jsonl(tmp_path / "plain" / "corpus.jsonl", [{"text": t} for t in texts])
    array = tmp_path / "plain" / "records.json"
    array.write_text(json.dumps([{"text": t} for t in texts[:50]], ensure_ascii=False), encoding="utf-8")
    lines = tmp_path / "plain" / "lines.txt"
    lines.write_text("\n".join(texts[50:120]) + "\n", encoding="utf-8")
    packed = tmp_path / "packed"
    packed.mkdir()
    for path in (plain, array, lines):
        _compress(path, suffix).rename(packed / (path.name + suffix))
    outputs = [prepare(data_args(tokenizer_dir, tmp_path / "cache", [directory], max_seq_length=64), seed=0)
               for directory in (tmp_path / "plain", packed)]
    assert outputs[0] != outputs[1]  # the compressed bytes are what the fingerprint covers
    rows = [datasets.load_from_disk(str(out))["input_ids"] for out in outputs]
    assert rows[0] == rows[1] and len(rows[0]) > 10
    manifests = [json.loads((out / "manifest.json").read_text()) for out in outputs]
    assert manifests[0]["docs_in"] == manifests[1]["docs_in"] == 300 + 50 + 70


def test_a_compressed_parquet_or_an_unknown_compressed_type_is_refused_by_name(tmp_path):
    (tmp_path / "a.parquet.gz").write_bytes(b"x")
    (tmp_path / "notes.gz").write_bytes(b"x")
    with pytest.raises(RankzeroError, match=r"a.parquet.gz: a compressed .parquet file cannot be read as a stream"):
        resolve_source(str(tmp_path / "a.parquet.gz"))
    with pytest.raises(RankzeroError, match=r"notes.gz has an unsupported type"):
        resolve_source(str(tmp_path / "notes.gz"))


def test_a_damaged_compressed_stream_names_the_file(tmp_path):
    path = _compress(write_jsonl(tmp_path / "c.jsonl", [{"text": t} for t in korean_documents(2000)]), ".gz")
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(RankzeroError, match=r"c.jsonl.gz: the .gz stream is damaged"):
        list(iter_chunks(resolve_source(str(path)), 0, batch_size=100))


def test_a_compressed_input_cut_short_after_the_plan_is_named_as_changed_not_damaged(tmp_path, tokenizer_dir):
    """A copy still running when the build reads the file: the stream ends early, and the cause is the change."""
    from helpers import plan_of, single_rank
    from rankzero.data.handoff import prepare_or_wait

    path = _compress(write_jsonl(tmp_path / "c.jsonl", [{"text": t} for t in korean_documents(2000)]), ".gz")
    args = data_args(tokenizer_dir, tmp_path / "cache", [path])
    plan = plan_of(args)  # the fingerprint is taken here, from the whole file
    whole = path.stat().st_size
    path.write_bytes(path.read_bytes()[: whole // 2])
    with pytest.raises(RankzeroError, match=rf"input files changed while they were being prepared: \S*c.jsonl.gz went "
                                            rf"from {whole:,} to {whole // 2:,} bytes.* \(the build stopped on: "
                                            r"\S*c.jsonl.gz: the .gz stream is damaged"):
        prepare_or_wait(plan, args.cache, single_rank())
    assert not [p for p in (tmp_path / "cache").iterdir() if p.is_dir()], "nothing published"


@pytest.mark.parametrize("suffix", [".gz", ".zst"])
def test_compressed_files_are_read_as_streams(tmp_path, suffix):
    """Reading every chunk of a file with 4x the text takes no more memory: nothing holds the whole file."""
    line = json.dumps({"text": "서울의 아침은 조용했다. " * 20}, ensure_ascii=False).encode() + b"\n"
    peaks = []
    for copies in (50_000, 200_000):  # ~33 MB and ~130 MB of text
        path = _compress(tmp_path / f"x{copies}.jsonl", suffix, line * copies)
        # The process's own high-water mark (VmHWM, reset before reading), not ru_maxrss: a child started from
        # pytest inherits pytest's, which would hide any growth here.
        code = ("from rankzero.data.inputs.readers import iter_chunks\n"
                "from rankzero.data.inputs.specs import resolve_source\n"
                "from bench._measure import peak_rss, reset_peak_rss, rss\n"
                "reset_peak_rss()\n"
                "before = rss()\n"
                f"lines = sum(chunk.payload.count(b'\\n') for chunk in iter_chunks(resolve_source({str(path)!r}), 0, 1000))\n"
                f"assert lines == {copies}, lines\n"
                "print((peak_rss() - before) // 1024)")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
        assert done.returncode == 0, done.stderr
        peaks.append(int(done.stdout) / 1024)  # MiB
    assert peaks[1] < peaks[0] + 40, peaks  # the whole 4x file would add ~100 MiB


def test_unknown_schema_is_one_error_listing_the_columns(tmp_path):
    with pytest.raises(RankzeroError, match=r"r.jsonl: line 1: cannot tell .* \['body', 'id'\].*--text_column"):
        _documents(tmp_path, [{"id": 1, "body": "x"}] * 3)
    with pytest.raises(RankzeroError, match=r"no column 'missing'"):
        _documents(tmp_path, [{"text": "x"}], text_column="missing")


def test_malformed_json_names_file_and_line_or_is_skipped(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": "ok"}\n{"text": "ok"}\n{"text": broken\n{"text": "ok"}\n', encoding="utf-8")
    (chunk,) = iter_chunks(resolve_source(str(path)), 0, batch_size=100)
    with pytest.raises(RankzeroError, match=r"bad.jsonl:3: malformed JSON"):
        chunk_documents(chunk, None, ChatRenderer(None))
    out = chunk_documents(chunk, None, ChatRenderer(None), skip_bad_records=True)
    assert (len(out.documents), out.bad_records) == (3, 1)


def test_undecodable_bytes_name_file_line_and_offset_or_are_replaced(tmp_path):
    path = tmp_path / "latin1.jsonl"
    good = '{"text": "좋은 줄"}\n'.encode()
    path.write_bytes(good + b'{"text": "caf\xe9"}\n')
    (chunk,) = iter_chunks(resolve_source(str(path)), 0, batch_size=100)
    with pytest.raises(RankzeroError, match=rf"latin1.jsonl:2: undecodable bytes at byte offset {len(good) + 13}"):
        chunk_documents(chunk, None, ChatRenderer(None))
    out = chunk_documents(chunk, None, ChatRenderer(None), on_decode_error="replace")
    assert out.replaced_lines == 1 and out.documents[1][0][0] == "caf\ufffd"


def _parse(path: Path, **kwargs):
    out = None
    for chunk in iter_chunks(resolve_source(str(path)), 0, batch_size=100):
        out = chunk_documents(chunk, kwargs.pop("text_column", None), ChatRenderer(None), **kwargs)
    return out


def test_lone_surrogates_name_file_and_line_and_both_flags_get_past_them(tmp_path, tokenizer_dir):
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
        out = prepare(data_args(tokenizer_dir, tmp_path / "cache", [path], max_seq_length=4, **flag), seed=0)
        assert json.loads((out / "manifest.json").read_text())["dropped"] == {key: 1}


def test_a_byte_order_mark_is_not_text(tmp_path):
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


def test_struct_columns_are_an_error_listing_fields_and_binary_columns_are_decoded(tmp_path):
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


@pytest.mark.parametrize("read_chars", [1, 7, 4096])
def test_a_json_array_is_read_one_record_at_a_time_as_json_load_reads_it(tmp_path, monkeypatch, read_chars):
    """Every cut of the text between reads (a piece of 1 character cuts it everywhere) gives json.load's records."""
    import rankzero.data.inputs.json_array as json_array

    monkeypatch.setattr(json_array, "READ_CHARS", read_chars)
    records = [{"text": f"문서 {i} \"따옴표\", 괄호] }} {{ \\ \u00e9 \U0001F600", "meta": {"n": [i, -1.5e3, None, True]}}
               for i in range(40)]
    body = "\ufeff  [\n" + ",\n ".join(json.dumps(r, ensure_ascii=i % 2 == 0) for i, r in enumerate(records)) + "\n]\n"
    path = tmp_path / "a.json"
    path.write_text(body, encoding="utf-8")
    assert [r for _, r in json_array.json_array_records(str(path), 1 << 20)] == json.loads(body.lstrip("\ufeff"))
    (tmp_path / "empty.json").write_text(" [ ] ")
    assert list(json_array.json_array_records(str(tmp_path / "empty.json"), 1 << 20)) == []


@pytest.mark.parametrize("body, said", [
    ('[{"text": "a"},\n{"text": "b"\n{"text": "c"}]', r"x.json:3: malformed JSON \(Expecting ',' delimiter, column 1"),
    ('[{"text": "a"},\n{"text": "b"}', r"x.json:2: malformed JSON \(the array is not closed"),
    ('[{"text": "a"}]\n[{"text": "b"}]', r"x.json:2: malformed JSON \(more data after the array"),
    ('{"text": "a"}', r"x.json:1: malformed JSON \(expected one array in the file, '\[' first"),
    ('[{"text": "a"},\n "b"]', r"x.json:2: item 2 of the JSON array is str, expected an object"),
    ('[{"text": "a"},\n{"text": "' + "가" * 2000 + '"}]', r"x.json:2: a record \(item 2 of the JSON array\) is longer than "
                                                          r"4,096 bytes \(--max_document_mb"),
])
def test_a_bad_json_array_is_an_error_at_its_line(tmp_path, monkeypatch, body, said):
    import rankzero.data.inputs.json_array as json_array

    monkeypatch.setattr(json_array, "READ_CHARS", 64)
    path = tmp_path / "x.json"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(RankzeroError, match=said):
        list(json_array.json_array_records(str(path), 4096))


def test_a_json_array_bomb_stops_at_the_document_limit_not_in_memory(tmp_path):
    """A .json.gz of 0.2 MB inflating to one 200 MB record was read whole by json.load."""
    import gzip

    from rankzero.data.inputs.json_array import json_array_records

    path = tmp_path / "bomb.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write('[{"text": "ok"}, {"text": "')
        for _ in range(200):
            handle.write("a" * (1 << 20))
        handle.write('"}]')
    records = json_array_records(str(path), 4 << 20)
    assert next(records) == (1, {"text": "ok"})
    with pytest.raises(RankzeroError, match=r"bomb.json.gz:1: a record \(item 2 of the JSON array\) is longer than "
                                            r"4,194,304 bytes"):
        next(records)
