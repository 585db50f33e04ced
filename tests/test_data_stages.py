"""Unit tests of each preparation stage: sources, records→text, tokens, blocks."""

from __future__ import annotations

import json

import numpy as np
import pytest

from datautil import write_jsonl
from rankzero.data.pack import Packer
from rankzero.data.records import ChatRenderer, chunk_documents
from rankzero.data.readers import iter_chunks, iter_texts
from rankzero.data.specs import resolve_source
from rankzero.data.encode import IGNORE_INDEX, DocumentEncoder, load_tokenizer
from rankzero.errors import RankzeroError

# --------------------------------------------------------------------------------------- sources


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


# ---------------------------------------------------------------------------------- records→text


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


def test_non_string_fields_are_converted(tmp_path):
    out = _documents(tmp_path, [{"text": ["first", "second"]}, {"text": 42}, {"text": None}])
    assert ["".join(t for t, _ in d) for d in out.documents] == ["first\nsecond", "42"]
    assert out.empty == 1  # an object in the text column is an error: tests/test_hostile.py


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


# ------------------------------------------------------------------------------------------ tokens


def test_every_document_ends_with_eos_and_ids_match_the_tokenizer(tokenizer_dir):
    from tokenizers import Tokenizer

    info = load_tokenizer(tokenizer_dir)
    reference = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    texts = ["안녕하세요 여러분.", "Hello, world!", "코드: x = 1"]
    ids, lengths, labels = DocumentEncoder(info).encode([[(t, True)] for t in texts])
    assert labels is None and ids.dtype == np.int32 and lengths.sum() == len(ids)
    start = 0
    for text, length in zip(texts, lengths):
        expected = list(info.bos_ids) + reference.encode(text, add_special_tokens=False).ids + [info.eos_id]
        assert ids[start:start + length].tolist() == expected
        start += length


def test_sft_labels_mask_context_tokens(tokenizer_dir):
    info = load_tokenizer(tokenizer_dir)
    ids, lengths, labels = DocumentEncoder(info).encode([[("질문 ", False), ("답변", True)]], with_labels=True)
    context = len(info.backend.encode("질문 ", add_special_tokens=False).ids) + len(info.bos_ids)
    assert (labels[:context] == IGNORE_INDEX).all()
    assert (labels[context:] == ids[context:]).all() and labels[-1] == info.eos_id


def test_a_slow_only_tokenizer_is_an_error(tmp_path):
    (tmp_path / "tokenizer_config.json").write_text('{"eos_token": "</s>"}')
    with pytest.raises(RankzeroError, match="tokenizer_path"):
        load_tokenizer(tmp_path)


# ------------------------------------------------------------------------------------------ blocks


def _random_stream(rng, batches):
    for _ in range(batches):
        lengths = rng.integers(1, 40, size=rng.integers(0, 12))
        yield rng.integers(0, 1000, int(lengths.sum())).astype(np.int32), lengths.astype(np.int64)


@pytest.mark.parametrize("length", [2, 7, 64])
def test_packing_is_exact_and_loses_nothing(length):
    rng = np.random.default_rng(length)
    packer, rows, boundaries, fed, doc_lengths = Packer(length), [], [], [], []
    for ids, lengths in _random_stream(rng, 60):
        fed.append(ids)
        doc_lengths += lengths.tolist()
        blocks = packer.add(ids, lengths)
        if blocks is not None:
            rows += blocks.input_ids.to_pylist()
            boundaries += blocks.document_lengths.to_pylist()
    tail = packer.finish()
    stream = np.concatenate(fed)
    assert all(len(row) == length for row in rows)
    assert len(rows) * length + tail == len(stream) and 0 <= tail < length
    assert np.array_equal(np.concatenate(rows), stream[:len(rows) * length])
    # document_lengths are the document pieces, in order: cutting the stream at document ends and
    # block edges gives exactly these pieces.
    ends = set(np.cumsum(doc_lengths).tolist()) | set(range(0, len(rows) * length + 1, length))
    cuts = sorted(e for e in ends if e <= len(rows) * length)
    assert [p for row in boundaries for p in row] == np.diff(cuts).tolist()
    assert all(sum(row) == length for row in boundaries)


def test_packing_carries_labels_with_the_ids():
    packer = Packer(5)
    ids = np.arange(12, dtype=np.int32)
    labels = np.where(ids % 2 == 0, ids, IGNORE_INDEX).astype(np.int32)
    blocks = packer.add(ids, np.array([4, 8]), labels)
    assert blocks.labels.to_pylist() == [labels[:5].tolist(), labels[5:10].tolist()]


def test_without_packing_documents_are_split_never_truncated():
    rng = np.random.default_rng(1)
    packer, rows, boundaries, fed = Packer(8, packing=False), [], [], []
    for ids, lengths in _random_stream(rng, 30):
        fed.append(ids)
        blocks = packer.add(ids, lengths)
        if blocks is not None:
            rows += blocks.input_ids.to_pylist()
            boundaries += blocks.document_lengths.to_pylist()
    assert packer.finish() == 0
    assert np.array_equal(np.concatenate(rows), np.concatenate(fed))
    assert all(1 <= len(row) <= 8 for row in rows) and boundaries == [[len(row)] for row in rows]
