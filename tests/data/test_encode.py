"""Encoding documents into ids: EOS per document, SFT labels, and the two tokenizer engines (fastokens
must give exactly the HF tokenizer's ids, or not be used at all)."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from conftest import SAMPLE_TEXTS
from helpers import REPO, data_args, korean_documents, prepare, prepare_cli, prepare_then, prepared_dir, write_jsonl
from rankzero.data import encode
from rankzero.data.encode import (IGNORE_INDEX, DocumentEncoder, FastokensEngine, HFEngine, load_tokenizer,
                                  select_engine, split_long)
from rankzero.errors import RankzeroError

needs_fastokens = pytest.mark.skipif(not encode.fastokens_installed(), reason="fastokens is not installed")


@pytest.fixture(scope="module")
def info(tokenizer_dir):
    return load_tokenizer(tokenizer_dir)


@pytest.fixture(scope="module")
def gpt2_style_dir(tmp_path_factory):
    """A plain byte-level BPE with GPT-2's pre-tokenizer (prefix space, its regex), as many hub models have."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    path = tmp_path_factory.mktemp("gpt2_style")
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    backend.decoder = decoders.ByteLevel()
    backend.train_from_iterator(SAMPLE_TEXTS, trainers.BpeTrainer(
        vocab_size=600, special_tokens=["<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    backend.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>", "bos_token": "<s>"}))
    return path


def _both(info, documents, with_labels=False):
    return (DocumentEncoder(info, HFEngine(info)).encode(documents, with_labels),
            DocumentEncoder(info, FastokensEngine(info)).encode(documents, with_labels))


def _assert_same(a, b):
    for got, want in zip(a, b):
        if want is None:
            assert got is None
        else:
            assert got.dtype == want.dtype and np.array_equal(got, want)


@needs_fastokens
@pytest.mark.parametrize("which", ["ours", "gpt2_style"])
def test_engines_agree_on_corpora_and_hard_strings(which, tokenizer_dir, gpt2_style_dir):
    info = load_tokenizer(tokenizer_dir if which == "ours" else gpt2_style_dir)
    sample = (REPO / "data" / "sample")
    texts = [json.loads(line)["text"] for line in (sample / "ko.jsonl").read_text(encoding="utf-8").splitlines()]
    texts += (sample / "en.txt").read_text(encoding="utf-8").splitlines() + korean_documents(300)
    texts += [json.loads(line)["text"] for line in (REPO / "data" / "quality_sample.jsonl").read_text().splitlines()]
    texts += encode._hard_strings(info)
    hf, fast = _both(info, [[(t, True)] for t in texts if t])
    _assert_same(fast, hf)
    assert select_engine(info, "auto", texts).engine.name == "fastokens"


@needs_fastokens
def test_sft_labels_are_identical_on_both_engines(info, tmp_path):
    from rankzero.data.inputs.readers import iter_chunks
    from rankzero.data.inputs.records import ChatRenderer, chunk_documents
    from rankzero.data.inputs.specs import resolve_source

    chat = [json.loads(line) for line in (REPO / "data" / "sample" / "chat.jsonl").read_text().splitlines()]
    path = write_jsonl(tmp_path / "chat.jsonl", chat)
    (chunk,) = iter_chunks(resolve_source(str(path)), 0, batch_size=10_000)
    for renderer in (ChatRenderer(info.chat_template, info.special_tokens), ChatRenderer(None)):
        documents = chunk_documents(chunk, None, renderer, with_masks=True).documents
        hf, fast = _both(info, documents, with_labels=True)
        _assert_same(fast, hf)
        ids, lengths, labels = fast
        assert (labels == IGNORE_INDEX).any() and (labels != IGNORE_INDEX).any()
        assert np.all((labels == IGNORE_INDEX) | (labels == ids))


@needs_fastokens
def test_bos_eos_and_lengths_frame_every_document(info):
    documents = [[("안녕하세요.", True)], [("둘째 ", False), ("문서", True)], [("셋", True)]]
    ids, lengths, labels = DocumentEncoder(info, FastokensEngine(info)).encode(documents, with_labels=True)
    bos, eos = list(info.bos_ids), info.eos_id
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    for document, start, length in zip(documents, starts, lengths):
        expected = bos + [i for text, _ in document for i in info.backend.encode(text, add_special_tokens=False).ids]
        assert ids[start:start + length].tolist() == expected + [eos]
        assert labels[start + length - 1] == eos and labels[start:start + len(bos)].tolist() == [IGNORE_INDEX] * len(bos)


@needs_fastokens
def test_a_tokenizer_fastokens_cannot_run_falls_back_with_one_warning(tmp_path, caplog):
    """SentencePiece-style Metaspace pre-tokenization is not implemented by fastokens 0.3."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    backend = Tokenizer(models.BPE(unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Metaspace()
    backend.train_from_iterator(SAMPLE_TEXTS, trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "</s>"]))
    backend.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>"}))
    info = load_tokenizer(tmp_path)
    with caplog.at_level(logging.WARNING, logger="rankzero.data.encode"):
        choice = select_engine(info, "auto", ["한국어 문장."])
    assert choice.engine.name == "hf" and "cannot run this tokenizer" in choice.fallback_reason
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1 and "Metaspace" in caplog.text
    with pytest.raises(RankzeroError, match="--tokenizer_engine fastokens: it cannot run this tokenizer"):
        select_engine(info, "fastokens", [])


@needs_fastokens
def test_any_difference_falls_back_or_is_an_error(info, monkeypatch):
    real = FastokensEngine.encode

    def off_by_one_on_emoji(self, texts):
        ids, lengths = real(self, texts)
        if any("🏳" in text for text in texts):
            ids = ids.copy()
            ids[0] += 1
        return ids, lengths

    monkeypatch.setattr(FastokensEngine, "encode", off_by_one_on_emoji)
    choice = select_engine(info, "auto", [])
    assert choice.engine.name == "hf" and "ids differ" in choice.fallback_reason
    with pytest.raises(RankzeroError, match="ids differ from the HF tokenizer's"):
        select_engine(info, "fastokens", [])
    # A difference only in the corpus sample is caught too.
    monkeypatch.setattr(encode, "HARD_STRINGS", ())
    monkeypatch.setattr(encode, "_hard_strings", lambda info: [])
    assert select_engine(info, "auto", ["평범한 문장"]).engine.name == "fastokens"
    assert select_engine(info, "auto", ["🏳️ 깃발"]).engine.name == "hf"


@needs_fastokens
def test_forced_engine_without_the_package_is_an_argument_error(tmp_path, tokenizer_dir, monkeypatch):
    from rankzero import config
    from rankzero.config import StageConfig

    monkeypatch.setattr(encode, "fastokens_installed", lambda: False)
    monkeypatch.setattr(config, "_installed", lambda package: package != "fastokens")
    with pytest.raises(ValueError, match="--tokenizer_engine fastokens: the fastokens package is not installed"):
        StageConfig(tokenizer_path=str(tokenizer_dir), tokenizer_engine="fastokens")
    info = load_tokenizer(tokenizer_dir)
    assert select_engine(info, "auto", []).fallback_reason == "fastokens is not installed"


@needs_fastokens
def test_prepared_data_is_identical_on_both_engines_and_shares_one_fingerprint(tmp_path, tokenizer_dir):
    import datasets

    corpus = write_jsonl(tmp_path / "ko.jsonl", [{"text": t} for t in korean_documents(300)])
    outputs = {}
    for engine in ("fastokens", "hf"):
        result = prepare_cli("--dataset", corpus, "--tokenizer_path", tokenizer_dir, "--max_seq_length", 64,
                             "--cache_dir", tmp_path / engine, "--tokenizer_engine", engine)
        outputs[engine] = prepared_dir(result.stdout)
    assert outputs["fastokens"].name == outputs["hf"].name  # the engine is not in the fingerprint
    fast, hf = (datasets.load_from_disk(str(outputs[e])) for e in ("fastokens", "hf"))
    assert fast["input_ids"] == hf["input_ids"] and fast["document_lengths"] == hf["document_lengths"]
    for engine, out in outputs.items():
        recorded = json.loads((out / "manifest.json").read_text())["tokenizer_engine"]
        assert recorded["name"] == engine and recorded["version"] and recorded["requested"] == engine


# ------------------------------------------------------------------------------------ long documents


@needs_fastokens
@pytest.mark.parametrize("which", ["ours", "gpt2_style"])
def test_long_documents_encode_in_pieces_to_the_same_ids(which, tokenizer_dir, gpt2_style_dir, monkeypatch):
    info = load_tokenizer(tokenizer_dir if which == "ours" else gpt2_style_dir)
    long_text = "\n\n".join(korean_documents(400, seed=5)) + " tail words 끝."
    monkeypatch.setattr(encode, "PIECE_CHARS", 2000)
    monkeypatch.setattr(encode, "CALL_CHARS", 5000)
    for engine in (HFEngine(info), FastokensEngine(info)):
        cut = encode.split_point(engine)
        assert cut is encode._CUTS[0 if which == "ours" else 1]  # GPT-2's prefix space: cut before spaces only
        pieces = split_long(long_text, 2000, cut)
        assert len(pieces) > 10 and "".join(pieces) == long_text and max(map(len, pieces)) <= 2000
        documents = [[("짧은 문서", True)], [(long_text, True)], [("또 짧은 문서", True)]]
        ids, lengths, _ = DocumentEncoder(info, engine).encode(documents)
        whole = info.backend.encode_batch_fast(["짧은 문서", long_text, "또 짧은 문서"], add_special_tokens=False)
        expected = [i for e in whole for i in list(info.bos_ids) + e.ids + [info.eos_id]]
        assert ids.tolist() == expected and lengths.sum() == len(ids)


@needs_fastokens
def test_a_blob_without_boundaries_is_cut_hard():
    assert split_long("x" * 5000, 2000) == ["x" * 2000, "x" * 2000, "x" * 1000]


@needs_fastokens
def test_a_20_megabyte_line_prepares_in_bounded_memory(tmp_path, tokenizer_dir):
    """Memory per input byte of one huge document stays small (it was ~115 bytes per byte)."""
    corpus = tmp_path / "long.jsonl"
    paragraphs = korean_documents(2000, seed=9)
    text = "\n\n".join(paragraphs * (20 * 2**20 // len("\n\n".join(paragraphs).encode()) + 1))
    with open(corpus, "w", encoding="utf-8") as handle:
        handle.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
        handle.write(json.dumps({"text": "짧은 문서 하나."}, ensure_ascii=False) + "\n")
    line_bytes = corpus.stat().st_size
    # VmHWM, not ru_maxrss: a forked child's ru_maxrss starts at its parent's (pytest's) size.
    result = prepare_then(["--dataset", corpus, "--tokenizer_path", tokenizer_dir, "--max_seq_length", 2048,
                           "--cache_dir", tmp_path / "cache"],
                          "print('PEAK_KB', [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0])\n",
                          timeout=600)
    peak = int(result.stdout.strip().splitlines()[-1].split()[1]) * 1024
    manifest = json.loads((prepared_dir(result.stdout.rsplit("\n", 2)[0]) / "manifest.json").read_text())
    assert manifest["docs_kept"] == 2
    assert peak < 250e6 + 12 * line_bytes, f"peak RSS {peak / 1e6:.0f} MB for a {line_bytes / 1e6:.0f} MB line"


# ------------------------------------------------------------------------------------ worker processes


@needs_fastokens
def test_kiwi_worker_processes_build_their_own_engine(tmp_path, tokenizer_dir):
    """With 4 workers the Kiwi filter runs in 2 spawned processes; the output equals the inline build."""
    import datasets

    sample = [json.loads(line) for line in (REPO / "data" / "quality_sample.jsonl").read_text().splitlines()]
    corpus = write_jsonl(tmp_path / "mixed.jsonl", [{"text": r["text"]} for r in sample])
    outputs = []
    for workers in (1, 4):
        args = data_args(tokenizer_dir, tmp_path / f"c{workers}", [corpus], quality_filter="ko",
                         dataset_num_proc=workers, dataset_batch_size=40)
        outputs.append(prepare(args, seed=0))
    first, second = (datasets.load_from_disk(str(out)) for out in outputs)
    assert first["input_ids"] == second["input_ids"]
    manifests = [json.loads((out / "manifest.json").read_text()) for out in outputs]
    assert manifests[0]["dropped"] == manifests[1]["dropped"]
    assert manifests[1]["tokenizer_engine"]["name"] == "fastokens"


# -------------------------------------------------------------------------------- documents → ids


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
