"""Tokenizer training: lossless round trips, the saved HF dir, Korean pre-tokenization, extension, CLI."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CODE_SNIPPETS, ENGLISH_PARAGRAPHS, KOREAN_PARAGRAPHS, SAMPLE_TEXTS

REPO = Path(__file__).resolve().parents[1]

ROUND_TRIP_TEXTS = {
    "korean": KOREAN_PARAGRAPHS[2],
    "korean_unseen": "뷁 똠방각하 숡 햏 — 훈민정음 ᄒᆞᆫ글 (옛한글, 조합형 자모) 및 ㄱㄴㄷ ㅏㅑㅓ",
    "english": ENGLISH_PARAGRAPHS[1] + " DON'T we'll I'd",
    "code": CODE_SNIPPETS[0] + CODE_SNIPPETS[1] + "x = {'a': [1, 2.5e-3]}  # 주석\n",
    "emoji": "좋아요 👍🏽👨‍👩‍👧‍👦 🇰🇷 ❤️ 😀",
    "mixed_scripts": "서울Seoul東京Tokyo Москва القاهرة ①②③ ｆｕｌｌｗｉｄｔｈ ﬁ x² Ⅳ",
    "odd_whitespace": "  lead\ttab\t\tend  \r\nCRLF\r\n\r\n\n  nbsp\u00a0here zero\u200bwidth \u3000ideographic\u2028sep  ",
    "numbers": "2024년 3월 1일, 1,234,567원 (약 0.5%) 010-1234-5678",
    "special_strings": "<|im_start|>user\n안녕<|im_end|></s><s><pad><unk>",
    "empty": "",
    "single_space": " ",
}


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tokenizer_dir))


def test_saved_dir_is_an_hf_fast_tokenizer(tokenizer_dir, tokenizer):
    from rankzero.tokenizer_trainer import SPECIAL_TOKENS

    assert (tokenizer_dir / "tokenizer.json").is_file()
    assert tokenizer.is_fast
    assert len(tokenizer) == 1000
    assert (tokenizer.bos_token, tokenizer.eos_token, tokenizer.pad_token, tokenizer.unk_token) == (
        "<s>", "</s>", "<pad>", "<unk>")
    assert [tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS] == list(range(len(SPECIAL_TOKENS)))
    config = json.loads((tokenizer_dir / "tokenizer_config.json").read_text())
    assert config["clean_up_tokenization_spaces"] is False
    assert "chat_template" in config
    state = json.loads((tokenizer_dir / "tokenizer.json").read_text())
    assert state["normalizer"] is None  # nothing lossy before the bytes


def test_chat_template(tokenizer):
    messages = [{"role": "user", "content": "안녕하세요?"}, {"role": "assistant", "content": "네, 반갑습니다."}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == ("<|im_start|>user\n안녕하세요?<|im_end|>\n<|im_start|>assistant\n네, 반갑습니다.<|im_end|>\n"
                    "<|im_start|>assistant\n")
    ids = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]
    assert ids.count(tokenizer.convert_tokens_to_ids("<|im_start|>")) == 2
    assert tokenizer.decode(ids) == text[: -len("<|im_start|>assistant\n")]


def test_encoding_adds_no_special_tokens(tokenizer):
    ids = tokenizer.encode("안녕", add_special_tokens=True)
    assert tokenizer.bos_token_id not in ids and tokenizer.eos_token_id not in ids


@pytest.mark.parametrize("kind", sorted(ROUND_TRIP_TEXTS))
def test_round_trip(tokenizer, kind):
    text = ROUND_TRIP_TEXTS[kind]
    for add_special_tokens in (False, True):
        ids = tokenizer.encode(text, add_special_tokens=add_special_tokens)
        assert tokenizer.decode(ids, skip_special_tokens=False) == text
    backend = tokenizer.backend_tokenizer
    assert backend.decode(backend.encode(text).ids, skip_special_tokens=False) == text
    if kind != "special_strings":  # a literal "<unk>" in the text is the special token, by design
        assert tokenizer.unk_token_id not in tokenizer.encode(text)


def test_round_trip_random_unicode(tokenizer):
    """Random code points from every plane (no surrogates) survive, also when batched."""
    rng = random.Random(0)
    ranges = [(0x0, 0x7F), (0x80, 0x7FF), (0x800, 0xD7FF), (0xE000, 0xFFFF), (0x10000, 0x10FFFF), (0xAC00, 0xD7A3)]
    texts = []
    for _ in range(200):
        chars = []
        for _ in range(rng.randint(0, 40)):
            low, high = rng.choice(ranges)
            chars.append(chr(rng.randint(low, high)))
        texts.append("".join(chars))
    encodings = tokenizer.backend_tokenizer.encode_batch_fast(texts, add_special_tokens=False)
    decoded = tokenizer.batch_decode([e.ids for e in encodings], skip_special_tokens=False)
    assert decoded == texts


def test_nothing_is_normalized(tokenizer):
    for text in ["①", "ｆｕｌｌ", "ﬁ", "Ⅳ", "ᄒᆞᆫ", "한"]:  # NFKC/NFD would change each of these
        assert tokenizer.decode(tokenizer.encode(text)) == text


def test_pretokenization_is_korean_and_code_aware(tokenizer):
    pieces = [p for p, _ in tokenizer.backend_tokenizer.pre_tokenizer.pre_tokenize_str(
        "2024년 한국어abc는, x==y 했다. (주)")]
    # ByteLevel maps bytes to printable chars; decode each piece back to read it.
    from tokenizers import decoders

    words = [decoders.ByteLevel().decode([p]) for p in pieces]
    # Digits split, scripts apart, one sentence mark may close a Hangul run ("는," "했다."), other
    # punctuation stands apart, code operators stay together.
    assert words == ["2", "0", "2", "4", "년", " 한국어", "abc", "는,", " x", "==", "y", " 했다.", " (", "주", ")"]


def test_digits_are_single_tokens(tokenizer):
    tokens = tokenizer.tokenize("1234567890")
    assert tokens == list("1234567890")


def test_small_vocab_is_an_error(tmp_path):
    from rankzero.tokenizer_trainer import train_tokenizer

    with pytest.raises(ValueError, match="--vocab_size 100 is too small"):
        train_tokenizer(["abc"], 100, tmp_path / "tok")


# --- extension with --base_tokenizer ---------------------------------------------------------

@pytest.fixture(scope="module")
def english_base(tmp_path_factory):
    from rankzero.tokenizer_trainer import train_tokenizer

    path = tmp_path_factory.mktemp("english_base")
    train_tokenizer((ENGLISH_PARAGRAPHS + CODE_SNIPPETS) * 3, 500, path)
    return path


@pytest.fixture(scope="module")
def extended(english_base, tmp_path_factory):
    from rankzero.tokenizer_trainer import train_tokenizer

    path = tmp_path_factory.mktemp("extended")
    train_tokenizer(KOREAN_PARAGRAPHS * 3, 1200, path, base_tokenizer=english_base)
    return path


def test_extension_keeps_every_old_id(english_base, extended):
    from transformers import AutoTokenizer

    base = AutoTokenizer.from_pretrained(str(english_base))
    new = AutoTokenizer.from_pretrained(str(extended))
    assert new.is_fast
    assert len(new) == 1200
    old_vocab, new_vocab = base.get_vocab(), new.get_vocab()
    assert {token: new_vocab.get(token) for token in old_vocab} == old_vocab
    assert sorted(set(new_vocab.values())) == list(range(1200))  # new ids fill the space after the old ones
    assert (new.eos_token_id, new.pad_token_id) == (base.eos_token_id, base.pad_token_id)
    # Korean-only extension data: English text still encodes to exactly the same ids.
    for text in ENGLISH_PARAGRAPHS + CODE_SNIPPETS:
        assert new.encode(text) == base.encode(text)


def test_extension_round_trips_and_improves_korean(english_base, extended):
    from transformers import AutoTokenizer

    from rankzero.tokenizer_trainer import chars_per_token

    base = AutoTokenizer.from_pretrained(str(english_base))
    new = AutoTokenizer.from_pretrained(str(extended))
    for text in ROUND_TRIP_TEXTS.values():
        assert new.decode(new.encode(text), skip_special_tokens=False) == text
    before, after = chars_per_token(base, KOREAN_PARAGRAPHS), chars_per_token(new, KOREAN_PARAGRAPHS)
    assert after > 2 * before, (before, after)


def test_extension_merges_fire_in_the_order_training_assumed(english_base):
    """Every new merge must be reachable: the extended model segments each training word exactly as
    the merge learner did (a merge whose halves are never formed would be dead vocabulary)."""
    from collections import Counter

    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    from rankzero.tokenizer_trainer import _learn_merges

    base = AutoTokenizer.from_pretrained(str(english_base))
    state = json.loads(base.backend_tokenizer.to_str())
    counts = Counter(p for text in KOREAN_PARAGRAPHS * 3
                     for p, _ in base.backend_tokenizer.pre_tokenizer.pre_tokenize_str(text))
    model = base.backend_tokenizer.model
    words = [[t.value for t in model.tokenize(w)] for w in counts]
    vocab = dict(state["model"]["vocab"])
    merges = _learn_merges(words, list(counts.values()), vocab, budget=400)
    assert len(merges) == 400
    next_id = max(vocab.values()) + len(state["added_tokens"]) + 1
    for offset, (left, right) in enumerate(merges):
        vocab[left + right] = next_id + offset
    state["model"]["vocab"] = vocab
    state["model"]["merges"] = state["model"]["merges"] + [[a, b] for a, b in merges]
    extended_model = Tokenizer.from_str(json.dumps(state)).model
    for word, learned in zip(counts, words):
        assert [t.value for t in extended_model.tokenize(word)] == learned


def test_extension_vocab_must_grow(english_base, tmp_path):
    from rankzero.tokenizer_trainer import train_tokenizer

    with pytest.raises(ValueError, match="must be larger than the base"):
        train_tokenizer(KOREAN_PARAGRAPHS, 300, tmp_path / "tok", base_tokenizer=english_base)


def test_extension_refuses_non_byte_level(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from rankzero.tokenizer_trainer import train_tokenizer

    backend = Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]").save_pretrained(str(tmp_path / "wl"))
    with pytest.raises(ValueError, match="only byte-level BPE"):
        train_tokenizer(KOREAN_PARAGRAPHS, 3000, tmp_path / "tok", base_tokenizer=tmp_path / "wl")


# --- streaming, caps, held-out ---------------------------------------------------------------

def test_document_stream_caps_and_holds_out():
    import io

    from rankzero.tokenizer_trainer import DocumentStream

    texts = [f"문서 {i}" for i in range(1000)]
    log = io.StringIO()
    stream = DocumentStream(iter(texts), max_documents=500, heldout_fraction=0.1, stream=log)
    trained = list(stream)
    assert stream.documents == 500
    assert len(stream.heldout) == 50 and len(trained) == 450
    assert set(trained).isdisjoint(stream.heldout) and set(trained) | set(stream.heldout) == set(texts[:500])
    assert "read: 500 docs" in log.getvalue()

    by_bytes = DocumentStream(iter(texts), max_bytes=1000, stream=io.StringIO())
    read = list(by_bytes)
    assert 1000 <= by_bytes.bytes < 1000 + 20 and len(read) == by_bytes.documents < 1000


# --- the command line ------------------------------------------------------------------------

def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run([sys.executable, str(REPO / "scripts" / "train_tokenizer.py"), *args],
                          capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def corpus_jsonl(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl"
    with open(path, "w", encoding="utf-8") as handle:
        for copy in range(10):
            for index, text in enumerate(SAMPLE_TEXTS):
                handle.write(json.dumps({"id": f"{copy}-{index}", "text": text}, ensure_ascii=False) + "\n")
    return path


def test_cli_end_to_end(corpus_jsonl, tmp_path):
    from transformers import AutoTokenizer

    out = tmp_path / "tok"
    result = run_cli("--dataset", str(corpus_jsonl), "--vocab_size", "700", "--output_dir", str(out),
                     "--max_documents", "300", "--heldout_fraction", "0.05")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[-1] == f"saved: {out}"
    assert lines[0].startswith("held-out chars/token: ") and "Korean docs: " in lines[0]
    assert "read: 300 docs" in result.stderr and "15 held out" in result.stderr
    tokenizer = AutoTokenizer.from_pretrained(str(out))
    assert tokenizer.is_fast and len(tokenizer) == 700
    assert tokenizer.decode(tokenizer.encode(ROUND_TRIP_TEXTS["mixed_scripts"])) == ROUND_TRIP_TEXTS["mixed_scripts"]


def test_cli_extends_a_base(corpus_jsonl, english_base, tmp_path):
    from transformers import AutoTokenizer

    out = tmp_path / "extended"
    result = run_cli("--dataset", str(corpus_jsonl), "--vocab_size", "900", "--output_dir", str(out),
                     "--base_tokenizer", str(english_base), "--heldout_fraction", "0.05")
    assert result.returncode == 0, result.stderr
    # The base's chars/token on the same held-out text, beside the new one's: the extension's gain, on Korean.
    new_line, base_line = result.stdout.splitlines()[:2]
    figures = [re.search(r": ([\d.]+) \((\d+) docs.*Korean docs: ([\d.]+)", line).groups()
               for line in (new_line, base_line)]
    assert new_line.startswith("held-out chars/token: ")
    assert base_line.startswith(f"  the base {english_base} on the same text: ")
    assert figures[0][1] == figures[1][1] and float(figures[1][2]) < float(figures[0][2])
    base, new = AutoTokenizer.from_pretrained(str(english_base)), AutoTokenizer.from_pretrained(str(out))
    assert len(new) == 900
    assert all(new.convert_tokens_to_ids(token) == index for token, index in base.get_vocab().items())


def test_cli_reports_every_bad_argument_together(tmp_path):
    result = run_cli("--dataset", str(tmp_path / "missing.jsonl"), "--vocab_size", "0", "--output_dir",
                     str(tmp_path / "tok"), "--max_bytes", "-5", "--base_tokenizer", str(tmp_path / "nope"))
    assert result.returncode != 0
    for flag in ("--vocab_size 0", "--max_bytes -5", "--base_tokenizer"):
        assert flag in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_missing_dataset(tmp_path):
    result = run_cli("--dataset", str(tmp_path / "missing.jsonl"), "--vocab_size", "500", "--output_dir",
                     str(tmp_path / "tok"))
    assert result.returncode != 0
    assert "missing.jsonl" in result.stderr and "Traceback" not in result.stderr


def test_cli_empty_source_saves_nothing(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    result = run_cli("--dataset", str(empty), "--vocab_size", "500", "--output_dir", str(tmp_path / "tok"))
    assert result.returncode != 0 and "no documents to train on" in result.stderr
    assert not (tmp_path / "tok").exists()
