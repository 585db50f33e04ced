"""`--dedup near` through the local prepare: what is removed, counted and sampled, the same however it runs.

The Ray engine's agreement with these decisions is tested in test_ray_engine.py (its cluster lives there);
the signatures and the LSH decision alone in test_neardup.py.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter

import numpy as np
import pytest

from helpers import data_args, korean_documents, plan_of, prepare, write_jsonl
from rankzero.data.plan import Plan
from test_neardup import distinct_texts, near_copy


def documents(directory) -> Counter:
    """Every document of a prepared split, by its tokens."""
    import datasets

    found = Counter()
    for row in datasets.load_from_disk(str(directory)):
        edges = np.cumsum([0, *row["document_lengths"]])
        for start, end in itertools.pairwise(edges):
            found[tuple(row["input_ids"][start:end])] += 1
    return found


def build(tmp_path, tokenizer_dir, sources, name, **flags):
    out = prepare(data_args(tokenizer_dir, tmp_path / f"cache-{name}", sources, max_seq_length=4096, packing=False,
                            **flags), seed=0)
    return out, json.loads((out / "manifest.json").read_text())


def planted_corpus(tmp_path):
    """Two sources: distinct documents, near-copies of earlier ones (in the same source and across), an exact
    copy, and short documents that differ only in a digit."""
    texts = distinct_texts(240, words=80)
    first = texts[:160] + [near_copy(texts[i], 0.01, seed=i) for i in range(0, 40, 4)]  # 10 near-copies
    second = (texts[160:] + [near_copy(texts[i], 0.0, seed=i, header="다른 사이트 머리말") for i in range(1, 60, 10)]
              + [texts[3]] + [f"짧은 글 {i}번" for i in range(10)] + ["", "하나 둘 셋 넷"] * 2)
    return (write_jsonl(tmp_path / "first.jsonl", [{"text": t} for t in first]),
            write_jsonl(tmp_path / "second.jsonl", [{"text": t} for t in second]))


def test_near_copies_are_removed_and_counted_per_source(tmp_path, tokenizer_dir):
    first, second = planted_corpus(tmp_path)
    out, manifest = build(tmp_path, tokenizer_dir, [first, second], "near")
    assert manifest["dedup"] == "near" and manifest["near_dedup"]["threshold"] == 0.55
    by_source = [source["dropped"] for source in manifest["sources"]]
    assert by_source[0] == {"near_duplicate": 10}
    # Six near-copies of the first source's documents; the exact copy and the repeated four words are exact
    # copies ("" is empty); the ten that differ in a digit are kept: too short to be near-copies.
    assert by_source[1] == {"near_duplicate": 6, "exact_duplicate": 2, "empty": 2}
    assert manifest["dropped"] == {"near_duplicate": 16, "exact_duplicate": 2, "empty": 2}
    assert manifest["docs_kept"] == 240 + 10 + 1 and sum(documents(out).values()) == 251
    samples = [json.loads(line) for line in (out / "dedup_samples.jsonl").read_text().splitlines()]
    assert len(samples) == 16
    assert all(len(side["text"]) <= 80 for pair in samples for side in pair.values())
    cross = [pair for pair in samples if pair["removed"]["source"] != pair["kept_earlier"]["source"]]
    assert len(cross) == 6 and all(pair["removed"]["text"].startswith("다른 사이트 머리말") for pair in cross)
    assert samples[0]["kept_earlier"] == {"source": str(first), "file": str(first), "line": 1, "split": "train",
                                          "text": distinct_texts(1, words=80)[0][:80]}
    for pair in samples:  # each side's file and line hold the document it shows
        for side in pair.values():
            line = open(side["file"], encoding="utf-8").read().splitlines()[side["line"] - 1]
            assert json.loads(line)["text"].startswith(side["text"][:40]), side


def test_the_kept_set_is_the_same_for_every_worker_count_and_chunk_size(tmp_path, tokenizer_dir, monkeypatch):
    first, second = planted_corpus(tmp_path)
    builds = [build(tmp_path, tokenizer_dir, [first, second], f"w{workers}-b{batch}", dataset_num_proc=workers,
                    dataset_batch_size=batch) for workers, batch in ((1, 1000), (2, 7), (3, 50))]
    # Without the compiled pass (no C compiler): the numpy path (minhash.shingle_hashes).
    with monkeypatch.context() as patch:
        patch.setenv("RANKZERO_PASSES", "numpy")
        builds.append(build(tmp_path, tokenizer_dir, [first, second], "numpy", dataset_num_proc=2,
                            dataset_batch_size=7))
    # The spill path: a budget of a few KB writes sorted runs of band keys and merges them by key range.
    monkeypatch.setattr(Plan, "dedup_memory_bytes", property(lambda plan: 4096))  # below --dedup_memory_mb's floor
    builds.append(build(tmp_path, tokenizer_dir, [first, second], "spill", dataset_batch_size=9))
    assert builds[-1][1]["near_dedup"]["spilled_runs"] > 3
    assert all(m["near_dedup"]["spilled_runs"] == 0 for _, m in builds[:-1])
    kept = [documents(out) for out, _ in builds]
    assert all(k == kept[0] for k in kept[1:])
    assert all(m["dropped"] == builds[0][1]["dropped"] for _, m in builds)
    assert all((out / "dedup_samples.jsonl").read_text() == (builds[0][0] / "dedup_samples.jsonl").read_text()
               for out, _ in builds)


def test_a_near_copy_of_a_held_out_document_is_not_trained_on(tmp_path, tokenizer_dir):
    from rankzero.data.published import validation_dir

    texts = distinct_texts(100, words=60, seed=4)
    evaluation = write_jsonl(tmp_path / "eval.jsonl", [{"text": t} for t in texts[:20]])
    train = write_jsonl(tmp_path / "train.jsonl", [{"text": t} for t in texts[20:] + [near_copy(texts[2], 0.0)]])
    out, manifest = build(tmp_path, tokenizer_dir, [train], "eval", eval_dataset=[evaluation])
    # The stage's eval-overlap check (screen/screening.py) finds it first, before near dedup would.
    assert manifest["dropped"] == {"eval_overlap": 1}
    assert sum(documents(out).values()) == 80 and sum(documents(validation_dir(out)).values()) == 20


def test_defaults_modes_and_the_fingerprint(tmp_path, tokenizer_dir, corpus):
    pretrain = data_args(tokenizer_dir, tmp_path, [corpus])
    sft = data_args(tokenizer_dir, tmp_path, [corpus], mode="sft")
    assert (pretrain.dedup.dedup, sft.dedup.dedup) == ("near", "exact")
    fingerprints = {plan_of(data_args(tokenizer_dir, tmp_path, [corpus], **flags)).fingerprint
                    for flags in ({}, {"dedup": "exact"}, {"dedup": "none"}, {"dedup_threshold": 0.7})}
    assert len(fingerprints) == 4
    with pytest.raises(Exception, match="--dedup_threshold 0.7: only used with --dedup near"):
        data_args(tokenizer_dir, tmp_path, [corpus], dedup="exact", dedup_threshold=0.7)
    with pytest.raises(Exception, match="--dedup_threshold 1.5: must be above 0 and at most 1"):
        data_args(tokenizer_dir, tmp_path, [corpus], dedup_threshold=1.5)


def test_real_korean_documents_are_not_near_copies_of_each_other(tmp_path, tokenizer_dir):
    """The test corpora (helpers.korean_documents) stay whole under the default --dedup near."""
    corpus = write_jsonl(tmp_path / "ko.jsonl", [{"text": t} for t in korean_documents(600, seed=2)])
    _, manifest = build(tmp_path, tokenizer_dir, [corpus], "ko")
    assert manifest["docs_kept"] == 600 and manifest["dropped"] == {}


def test_a_planted_copy_with_a_header_and_five_percent_of_words_changed(tmp_path, tokenizer_dir):
    """The default (0.55, 40 bands of 3) removes such a copy (its word 5-gram Jaccard is ~0.6) and keeps every
    distinct document; --dedup_threshold 0.8 keeps it (see docs/data.md)."""
    texts = distinct_texts(120, words=400, seed=7)
    corpus = write_jsonl(tmp_path / "c.jsonl", [{"text": t} for t in texts[:60] + [near_copy(texts[7], 0.05, seed=2)]
                                                + texts[60:]])
    out, manifest = build(tmp_path, tokenizer_dir, [corpus], "planted")
    assert manifest["dropped"] == {"near_duplicate": 1} and manifest["near_dedup"]["bands"] == 40
    samples = [json.loads(line) for line in (out / "dedup_samples.jsonl").read_text().splitlines()]
    assert [(s["removed"]["file"], s["removed"]["line"], s["kept_earlier"]["line"]) for s in samples] == [
        (str(corpus), 61, 8)]
    _, strict = build(tmp_path, tokenizer_dir, [corpus], "strict", dedup_threshold=0.8)
    assert strict["dropped"] == {} and strict["docs_kept"] == 121


def test_sft_with_near_dedup_drops_a_repeated_answer_and_keeps_every_other_sample_whole(tmp_path, tokenizer_dir):
    """--mode sft --dedup near: a sample whose answer repeats an earlier one's (another prompt, a changed word)
    is removed; every other sample reaches a row whole with its labels (prompt tokens -100)."""
    answers = distinct_texts(30, words=200, seed=3)
    records = [{"prompt": f"질문 {i}번에 답해 주세요.", "response": a} for i, a in enumerate(answers)]
    records.append({"prompt": "다른 질문입니다.", "response": near_copy(answers[4], 0.01, seed=1)})
    corpus = write_jsonl(tmp_path / "sft.jsonl", records)
    out, manifest = build(tmp_path, tokenizer_dir, [corpus], "sft", mode="sft", dedup="near")
    assert manifest["dedup"] == "near" and manifest["dropped"] == {"near_duplicate": 1}
    assert manifest["docs_kept"] == 30 and manifest["truncated"] == 0
    import datasets

    rows = datasets.load_from_disk(str(out))
    samples = 0
    for row in rows:
        edges = np.cumsum([0, *row["document_lengths"]])
        for start, end in itertools.pairwise(edges):
            labels = row["labels"][start:end]
            assert labels[0] == -100 and labels[-1] != -100  # each piece is one whole sample: prompt, then answer
            samples += 1
    assert samples == 30


@pytest.mark.parametrize("value", ["0", "-1", "abc", "nan", "0.5", "inf"])
def test_a_dedup_memory_budget_that_cannot_work_is_one_line_naming_the_variable(tmp_path, tokenizer_dir, corpus,
                                                                                 monkeypatch, value):
    """RANKZERO_DEDUP_MEMORY_MB=0 or -1 used to hang (a spill per chunk, re-read per key range); abc and nan
    gave an error that never named it."""
    from rankzero.errors import ConfigError

    monkeypatch.setenv("RANKZERO_DEDUP_MEMORY_MB", value)
    with pytest.raises(ConfigError, match="RANKZERO_DEDUP_MEMORY_MB") as error:
        data_args(tokenizer_dir, tmp_path, [corpus])
    assert str(error.value).count("RANKZERO_DEDUP_MEMORY_MB") == 1  # one problem, naming the variable
    monkeypatch.setenv("RANKZERO_DEDUP_MEMORY_MB", "64")
    assert plan_of(data_args(tokenizer_dir, tmp_path, [corpus])).dedup_memory_bytes == 64 << 20
    assert data_args(tokenizer_dir, tmp_path, [corpus], dedup_memory_mb=2).workers.dedup_memory_mb == 2  # flag wins


def test_exact_copies_are_neither_signed_nor_tokenized(tmp_path, tokenizer_dir, monkeypatch):
    """Near dedup's cost is paid once per distinct text: a repeat of an earlier chunk's text (or of its own
    chunk's) is dropped before the signature and the tokenizer, and counted as exact dedup counts it."""
    import rankzero.data.stage as stage

    texts = distinct_texts(120, words=40, seed=3)
    corpus = write_jsonl(tmp_path / "c.jsonl", [{"text": t} for t in texts + texts[::2] + texts[:10]])
    signed, encoded = [], []
    signatures, encode = stage.minhash_signatures, stage.DocumentEncoder.encode
    monkeypatch.setattr(stage, "minhash_signatures", lambda texts: signed.extend(texts) or signatures(texts))
    monkeypatch.setattr(stage.DocumentEncoder, "encode",
                        lambda self, documents, labels: encoded.extend(documents) or encode(self, documents, labels))
    out, manifest = build(tmp_path, tokenizer_dir, [corpus], "once", dataset_num_proc=1, dataset_batch_size=25)
    assert manifest["dropped"] == {"exact_duplicate": 70} and manifest["docs_kept"] == 120
    # Only the chunks in flight (2 x workers) before an earlier chunk is consumed may still sign a repeat.
    assert set(signed) == set(texts) and len(signed) == len(encoded) <= 120 + 2 * 25 < 250
    assert sum(documents(out).values()) == 120


def test_sft_takes_exact_dedup_unless_given_and_says_so(tmp_path, tokenizer_dir, corpus):
    """The rule lives with the other flags set because the user did not (args.derived_defaults) and is printed."""
    import subprocess
    import sys

    from helpers import REPO

    sft = data_args(tokenizer_dir, tmp_path, [corpus], mode="sft")
    assert sft.dedup.dedup == "exact" and sft.defaults["dedup"].startswith("exact (--mode sft")
    given = data_args(tokenizer_dir, tmp_path, [corpus], mode="sft", dedup="near")
    assert given.dedup.dedup == "near" and "dedup" not in given.defaults
    result = subprocess.run([sys.executable, "train.py", "--tokenize_only", "--dataset", str(corpus), "--mode", "sft",
                             "--tokenizer_path", str(tokenizer_dir), "--cache_dir", str(tmp_path / "c"),
                             "--max_seq_length", "64"], cwd=REPO, capture_output=True, text=True)
    assert "[prepare] --dedup exact (--mode sft" in result.stderr, result.stderr[-2000:]


def test_the_decisions_pages_go_back_to_the_kernel_once_it_is_made(tmp_path, tokenizer_dir, monkeypatch):
    """After the decision its arrays are freed; the malloc is told to give their pages back (test_malloc.py: that
    it does), once per build that decides (bench/RESULTS.md: the peak at 200 MiB)."""
    from rankzero import malloc

    decided = []
    monkeypatch.setattr(malloc, "release_free_memory", lambda: decided.append(True))
    first, second = planted_corpus(tmp_path)
    build(tmp_path, tokenizer_dir, [first, second], "near")
    build(tmp_path, tokenizer_dir, [first, second], "exact", dedup="exact")
    assert decided == [True]
