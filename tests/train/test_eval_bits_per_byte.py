"""Evaluation that compares across tokenizers: bits per UTF-8 byte at step 0 and at the end of a continued run, per
source, checked against the same sums computed here from the saved models; the step-0 evaluation changes no
training step; validation rows of one source each; each token's byte count."""

from __future__ import annotations

import json
import math
import random
import shutil
import sys

import numpy as np
import pytest
import torch

from helpers import REPO, TINY, flag_argv, korean_documents, log_history, losses, run, write_jsonl

SUBJECTS = ["The farmer", "A teacher", "My neighbour", "The old captain", "Her brother", "A young doctor"]
PLACES = ["the harbour", "a quiet library", "the village market", "the mountain road", "a small bakery"]
ACTIONS = ["counted the boats", "read three letters", "bought fresh bread", "painted the fence", "waited for rain"]


def english_documents(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(f"{rng.choice(SUBJECTS)} went to {rng.choice(PLACES)} and {rng.choice(ACTIONS)} on day "
                     f"{rng.randint(1, 999)}." for _ in range(12)) for _ in range(count)]


@pytest.fixture(scope="module")
def eval_sources(tmp_path_factory):
    folder = tmp_path_factory.mktemp("eval_sources")
    korean = write_jsonl(folder / "ko_news.jsonl", [{"text": t} for t in korean_documents(12, seed=7)])
    english = write_jsonl(folder / "en_stories.jsonl", [{"text": t} for t in english_documents(12)])
    return korean, english


@pytest.fixture(scope="module")
def base_model(tokenizer_dir, tmp_path_factory):
    """A small base model to continue, with its tokenizer. Its attention dropout draws from torch's random stream at
    every training step, as an evaluation's DataLoader does: an evaluation that moved the stream would move every
    later step."""
    from transformers import AutoModelForCausalLM

    from rankzero.train.model import load_config

    directory = tmp_path_factory.mktemp("base")
    config = load_config(TINY)
    config.vocab_size, config.attention_dropout = 1024, 0.1
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(directory)
    for path in tokenizer_dir.iterdir():
        shutil.copy(path, directory / path.name)
    return directory


def continued_run(tmp_path, base_model, tokenizer_dir, train_corpus, eval_sources, name: str, **flags) -> dict:
    out = tmp_path / name
    given = {"dataset": train_corpus, "eval_dataset": list(eval_sources), "tokenizer_path": tokenizer_dir,
             "pretrained_model": base_model, "cache_dir": tmp_path / "cache", "output_dir": out,
             "max_seq_length": 64, "per_device_train_batch_size": 4, "per_device_eval_batch_size": 4, "max_steps": 4,
             "logging_steps": 1, "eval_steps": 4, "save_strategy": "no", "report_to": "none",
             "dataloader_num_workers": 0, **flags}
    result = run([sys.executable, REPO / "train.py", *flag_argv(given)], timeout=600)
    return {"out": out, "stdout": result.stdout, "history": log_history(out)}


def independent_sums(model_dir, tokenizer_dir, validation_dir) -> dict[int, tuple[float, int]]:
    """Per source: (Σ nats, Σ UTF-8 bytes) over the labels the eval scores, from the model's logits and the text the
    scored tokens spell (GPT-2's byte alphabet read back to bytes), special tokens left out."""
    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    alphabet = {character: byte for byte, character in bytes_to_unicode().items()}
    special = set(tokenizer.all_special_ids)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    sums: dict[int, list] = {}
    for row in datasets.load_from_disk(str(validation_dir)):
        ids = torch.tensor(row["input_ids"])
        sources = np.repeat(row["document_sources"], row["document_lengths"])
        assert len(sources) == len(ids)
        with torch.no_grad():
            logits = model(ids[None]).logits[0].double()
        nats = -torch.log_softmax(logits[:-1], dim=-1).gather(1, ids[1:, None])[:, 0]
        for position in range(1, len(ids)):  # the row's first token: nothing before it in the row predicts it
            token = int(ids[position])
            if token in special:
                continue
            text = bytes(alphabet[character] for character in tokenizer.convert_ids_to_tokens(token))
            entry = sums.setdefault(int(sources[position]), [0.0, 0])
            entry[0] += float(nats[position - 1])
            entry[1] += len(text)
    return {source: (nats, count) for source, (nats, count) in sums.items()}


def test_a_continued_run_reports_bits_per_byte_per_source_at_step_0_and_at_the_end(
        tmp_path, base_model, tokenizer_dir, train_corpus, eval_sources):
    contacts = write_jsonl(tmp_path / "contacts.jsonl", [
        {"text": f"문의는 010-{1000 + i}-5678 또는 user{i}@example.com 으로 연락 주세요. 답변은 {i}일 안에 드립니다."}
        for i in range(20)])
    run_ = continued_run(tmp_path, base_model, tokenizer_dir, [train_corpus, contacts], eval_sources, "run")
    out, history = run_["out"], run_["history"]
    evaluations = [entry for entry in history if "eval_loss" in entry]
    assert [entry["step"] for entry in evaluations] == [0, 4]
    prepared = REPO / json.loads((out / "run_config.json").read_text())["prepared_dir"]
    validation = prepared / "validation"
    # What the prepare's screens did is kept beside the run, not only in the cache.
    samples = sorted(path.name for path in prepared.glob("*_samples.jsonl"))
    assert "pii_samples.jsonl" in samples
    assert all((out / name).read_bytes() == (prepared / name).read_bytes() for name in samples)
    manifest = json.loads((out / "data_manifest.json").read_text())
    names = {index: source["spec"] for index, source in enumerate(manifest["sources"])}
    assert [names[0].endswith("ko_news.jsonl"), names[1].endswith("en_stories.jsonl")] == [True, True]
    for entry, model_dir in ((evaluations[0], base_model), (evaluations[1], out)):
        sums = independent_sums(model_dir, tokenizer_dir, validation)
        assert sorted(sums) == [0, 1]  # both sources in the split
        total_nats, total_bytes = sum(n for n, _ in sums.values()), sum(b for _, b in sums.values())
        assert entry["eval_bits_per_byte"] == pytest.approx(total_nats / math.log(2) / total_bytes, rel=1e-4)
        for source, name in ((0, "ko_news"), (1, "en_stories")):
            nats, count = sums[source]
            assert entry[f"eval_{name}_bits_per_byte"] == pytest.approx(nats / math.log(2) / count, rel=1e-4)
            assert f"eval_{name}_loss" in entry
    # The two sources read differently, and the whole is their byte-weighted mean.
    first = evaluations[0]
    assert first["eval_ko_news_bits_per_byte"] != pytest.approx(first["eval_en_stories_bits_per_byte"], rel=1e-3)
    assert "eval step 0/4" in run_["stdout"] and "bits/byte" in run_["stdout"]
    # The fixed prompt's sample at each evaluation.
    samples = [json.loads(line) for line in (out / "eval_samples.jsonl").read_text().splitlines()]
    assert [sample["step"] for sample in samples] == [0, 4] and len({s["prompt"] for s in samples}) == 1
    assert "eval sample at step 0:" in run_["stdout"]


def test_the_evaluation_before_the_first_step_changes_no_training_step(
        tmp_path, base_model, tokenizer_dir, train_corpus, eval_sources):
    with_start = continued_run(tmp_path, base_model, tokenizer_dir, train_corpus, eval_sources, "with")
    without = continued_run(tmp_path, base_model, tokenizer_dir, train_corpus, eval_sources, "without",
                            eval_on_start="false")
    assert [e["step"] for e in with_start["history"] if "eval_loss" in e] == [0, 4]
    assert [e["step"] for e in without["history"] if "eval_loss" in e] == [4]
    assert "training.eval_on_start = True  (default:" in with_start["stdout"]
    assert losses(with_start["out"]) == losses(without["out"])  # bit for bit: same data order, same updates


def test_every_tokens_byte_count_adds_up_to_the_texts_utf8_bytes(tokenizer_dir):
    from transformers import AutoTokenizer

    from rankzero.train.evaluation import token_bytes

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    counts = token_bytes(tokenizer)
    assert len(counts) == len(tokenizer)
    assert all(counts[token] == 0 for token in tokenizer.all_special_ids)
    for text in ["서울은 대한민국의 수도이다. 🙂 희귀한 글자: 뷁 똠", "plain English, numbers 12345", "혼합 mixed 텍스트"]:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert int(counts[ids].sum()) == len(text.encode("utf-8")), text


def test_validation_rows_hold_one_source_each_and_lose_no_token(tmp_path, tokenizer_dir, eval_sources):
    import datasets

    from helpers import data_args, prepare

    out = prepare(data_args(tokenizer_dir, tmp_path / "cache", [write_jsonl(tmp_path / "train.jsonl", [
        {"text": t} for t in korean_documents(60, seed=3)])], eval_dataset=list(eval_sources), max_seq_length=64))
    manifest = json.loads((out / "manifest.json").read_text())
    rows = datasets.load_from_disk(str(out / "validation"))
    tokens = {0: 0, 1: 0}
    for row in rows:
        assert len(row["document_sources"]) == len(row["document_lengths"])
        assert len(set(row["document_sources"])) == 1  # packed per source
        tokens[row["document_sources"][0]] += len(row["input_ids"])
    held = [source["validation_tokens"] for source in manifest["sources"][:2]]
    tail = manifest["validation"]["tail_tokens_dropped"]
    assert sum(tokens.values()) + tail == sum(held)
    assert all(0 <= held[source] - tokens[source] < 64 for source in (0, 1))  # each source's own tail left out


def test_batches_without_sources_give_no_per_source_figure():
    """A trainer whose eval rows lost document_sources (e.g. --remove_unused_columns dropped it) must not report the
    whole set as its first source's."""
    from rankzero.train.evaluation import EvalScores

    scores = EvalScores(np.ones(8, dtype=np.int64), ["news", "dialogue"])
    logits, labels = torch.randn(2, 5, 8), torch.randint(0, 8, (2, 5))
    scores.add(scores.row_sums(logits, labels, torch.tensor([[0] * 5, [1] * 5])))
    assert {"eval_news_bits_per_byte", "eval_dialogue_bits_per_byte"} <= set(scores.metrics("eval"))
    scores.reset()
    scores.add(scores.row_sums(logits, labels, None))
    assert set(scores.metrics("eval")) == {"eval_bits_per_byte"}
