"""The validation split (split.py, both flags) and SFT rows of whole samples, on the local engine.

Held-out documents are known in advance: a document of --dataset is held out when the xxh3-64 hash of
its text is below P% of 2**64. Each test document ends in a marker "(문서 N)", so decoding a row tells
which documents it holds: the tests decode both splits and compare the markers with the hash rule.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from helpers import REPO, data_args, korean_documents, plan_of, prepare, write_jsonl
from rankzero.data.published import ForeignDataset, validation_dir, verify_published
from rankzero.data.split import threshold
from rankzero.data.stage import text_hash
from rankzero.errors import ConfigError, RankzeroError

MARKER = re.compile(r"\(문서 (\d+)\)")


@pytest.fixture
def texts():
    return korean_documents(400, seed=11)


@pytest.fixture
def corpus(tmp_path, texts):
    return write_jsonl(tmp_path / "ko.jsonl", [{"text": t} for t in texts])


def held_out_by_hash(texts: list[str], percentage: float) -> set[int]:
    limit = threshold(percentage)
    return {int(MARKER.search(t).group(1)) for t in texts if text_hash(t) < limit}


def markers(directory, tokenizer_dir) -> Counter:
    """Document markers in every row of a prepared split, each document piece decoded on its own."""
    import datasets
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    found = Counter()
    for row in datasets.load_from_disk(str(directory)):
        edges = np.cumsum([0, *row["document_lengths"]])
        for start, end in itertools.pairwise(edges):
            text = tokenizer.decode(row["input_ids"][start:end])
            found.update(int(number) for number in MARKER.findall(text))
    return found


def manifest_of(out) -> dict:
    return json.loads((out / "manifest.json").read_text())


@pytest.mark.parametrize("packing", [True, False], ids=["packed", "a row per document"])
def test_held_out_documents_follow_the_hash_rule_and_never_reach_a_training_row(tmp_path, tokenizer_dir, corpus,
                                                                                 texts, packing):
    out = prepare(data_args(tokenizer_dir, tmp_path / "c", [corpus], validation_split_percentage=20,
                            packing=packing, max_seq_length=64 if packing else 2048), seed=0)
    expected = held_out_by_hash(texts, 20)
    assert 40 < len(expected) < 120  # the rule holds out about 20% of 400
    training, validation = markers(out, tokenizer_dir), markers(validation_dir(out), tokenizer_dir)
    assert not set(training) & expected, "a held-out document is in a training row"
    assert set(validation) <= expected
    manifest = manifest_of(out)
    held = manifest["validation"]
    assert held["documents"] == len(expected) and held["percentage"] == 20
    assert manifest["docs_kept"] == 400 and sum(s["validation_documents"] for s in manifest["sources"]) == len(expected)
    if packing:
        # Markers cut at a row edge are not found; the tokens say the rest. Each split holds exactly its
        # documents' tokens but for its final partial row.
        import datasets

        from rankzero.data.encode import DocumentEncoder, load_tokenizer

        encoder = DocumentEncoder(load_tokenizer(tokenizer_dir))
        for directory, tail, numbers in ((out, manifest["tail_tokens_dropped"], set(range(400)) - expected),
                                         (validation_dir(out), held["tail_tokens_dropped"], expected)):
            ids, _, _ = encoder.encode([[(t, True)] for t in texts if int(MARKER.search(t).group(1)) in numbers])
            rows = datasets.load_from_disk(str(directory))["input_ids"]
            got, want = Counter(np.concatenate(rows).tolist()), Counter(ids.tolist())
            assert not got - want and sum((want - got).values()) == tail < 64
            assert set(map(len, rows)) == {64}
    else:
        assert set(validation) == expected and set(training) == set(range(400)) - expected
        assert max(validation.values()) == 1 and max(training.values()) == 1


def test_workers_and_chunking_do_not_change_the_split_and_the_percentage_changes_the_fingerprint(
        tmp_path, tokenizer_dir, corpus):
    import datasets

    outputs = []
    for index, (workers, batch) in enumerate([(1, 1000), (2, 13)]):
        args = data_args(tokenizer_dir, tmp_path / f"c{index}", [corpus], validation_split_percentage=10,
                         dataset_num_proc=workers, dataset_batch_size=batch)
        outputs.append(prepare(args, seed=3))
    assert outputs[0].name == outputs[1].name
    first, second = (datasets.load_from_disk(str(validation_dir(out))) for out in outputs)
    assert first["input_ids"] == second["input_ids"] and first["document_lengths"] == second["document_lengths"]

    def fingerprint(**flags):
        return plan_of(data_args(tokenizer_dir, tmp_path / "c", [corpus], **flags), 0).fingerprint

    base, ten = fingerprint(), fingerprint(validation_split_percentage=10)
    assert len({base, ten, fingerprint(validation_split_percentage=11)}) == 3
    held = write_jsonl(tmp_path / "held.jsonl", [{"text": "평가 문서 (문서 9999)"}])
    assert fingerprint(eval_dataset=[held]) not in (base, ten)
    assert fingerprint(validation_split_percentage=10, dataset_num_proc=1, dataset_batch_size=7) == ten


def test_eval_dataset_is_held_out_whole_and_training_repeats_of_it_are_dropped(tmp_path, tokenizer_dir, texts):
    evaluation, training = texts[:50], texts[50:]
    eval_file = write_jsonl(tmp_path / "eval.jsonl", [{"text": t} for t in evaluation])
    # Ten evaluation documents also sit in the training file: they must not be trained on.
    train_file = write_jsonl(tmp_path / "train.jsonl", [{"text": t} for t in training + evaluation[:10]])
    base = plan_of(data_args(tokenizer_dir, tmp_path / "c", [train_file]), 0).fingerprint
    for dedup in ("exact", "none"):
        args = data_args(tokenizer_dir, tmp_path / "c", [train_file], eval_dataset=[eval_file], dedup=dedup,
                         packing=False, max_seq_length=2048)
        assert plan_of(args, 0).fingerprint != base
        out = prepare(args, seed=0)
        manifest = manifest_of(out)
        assert manifest["dropped"] == {"in_eval_dataset": 10}, dedup
        assert set(markers(validation_dir(out), tokenizer_dir)) == set(range(50))
        assert set(markers(out, tokenizer_dir)) == set(range(50, 400))
        evaluation_source, training_source = manifest["sources"]
        assert evaluation_source["evaluation"] and evaluation_source["validation_documents"] == 50
        assert training_source["validation_documents"] == 0 and training_source["dropped"] == {"in_eval_dataset": 10}
        assert manifest["validation"]["eval_dataset"] == [str(eval_file)]


def test_weighted_mixing_takes_held_out_documents_once(tmp_path, tokenizer_dir, texts):
    """The small source is repeated to reach its share; its held-out documents are not."""
    big = write_jsonl(tmp_path / "big.jsonl", [{"text": t} for t in texts[:300]])
    small = write_jsonl(tmp_path / "small.jsonl", [{"text": t} for t in texts[300:]])
    out = prepare(data_args(tokenizer_dir, tmp_path / "c", [f"{big}@1", f"{small}@1"], validation_split_percentage=20,
                            packing=False, max_seq_length=2048), seed=0)
    manifest = manifest_of(out)
    assert manifest["sources"][1]["ratio"] > 1.5
    validation = markers(validation_dir(out), tokenizer_dir)
    assert set(validation) == held_out_by_hash(texts, 20) and max(validation.values()) == 1
    training = markers(out, tokenizer_dir)
    assert max(training[i] for i in range(300, 400) if i in training) >= 2  # the small source repeats
    assert not set(training) & set(validation)


def test_an_empty_or_too_small_validation_split_is_an_error_naming_the_flags(tmp_path, tokenizer_dir, texts,
                                                                            monkeypatch):
    import pyarrow as pa

    few = write_jsonl(tmp_path / "few.jsonl", [{"text": t} for t in texts[:30]])
    with pytest.raises(RankzeroError, match=r"no document was held out \(--validation_split_percentage 0.01"):
        prepare(data_args(tokenizer_dir, tmp_path / "c", [few], validation_split_percentage=0.01), seed=0)
    # A held-out share exists, but less than one row of it: said before the training rows are shuffled into shards.
    percentage = next(p for p in (2, 3, 4, 5, 6, 8, 10) if held_out_by_hash(texts[:30], p))
    opened, new_stream = [], pa.ipc.new_stream
    monkeypatch.setattr(pa.ipc, "new_stream", lambda sink, *rest, **options: opened.append(str(sink))
                        or new_stream(sink, *rest, **options))
    with pytest.raises(RankzeroError, match="fewer than one row of --max_seq_length 2048; raise "
                                            "--validation_split_percentage"):
        prepare(data_args(tokenizer_dir, tmp_path / "c", [few], validation_split_percentage=percentage,
                          max_seq_length=2048), seed=0)
    assert opened and not [path for path in opened if Path(path).name.startswith("shard-")], opened
    monkeypatch.undo()
    with pytest.raises(RankzeroError, match="none is left to train on"):
        prepare(data_args(tokenizer_dir, tmp_path / "c", [few], validation_split_percentage=99.999), seed=0)
    assert not [p for p in (tmp_path / "c").iterdir() if p.is_dir()], "nothing half-written may stay"


@pytest.mark.parametrize("flags, problem", [
    ({"validation_split_percentage": 0}, "--validation_split_percentage 0: must be above 0 and below 100"),
    ({"validation_split_percentage": 100}, "--validation_split_percentage 100: must be above 0 and below 100"),
    ({"validation_split_percentage": "nan"}, "--validation_split_percentage nan: must be above 0"),
    ({"eval_dataset": ["held.jsonl@0.5"]}, "--eval_dataset held.jsonl@0.5: no @WEIGHT here"),
    ({"eval_dataset": ["x.jsonl"]}, "--eval_dataset x.jsonl: also given to --dataset"),
])
def test_split_flags_are_checked_when_parsed(tmp_path, tokenizer_dir, flags, problem):
    with pytest.raises(ConfigError) as error:
        data_args(tokenizer_dir, tmp_path / "c", ["x.jsonl"], **flags)
    assert problem in str(error.value)


def test_a_missing_eval_dataset_names_its_flag(tmp_path, tokenizer_dir, corpus):
    with pytest.raises(RankzeroError, match="--eval_dataset .*nope.jsonl: no such file"):
        prepare(data_args(tokenizer_dir, tmp_path / "c", [corpus], eval_dataset=[tmp_path / "nope.jsonl"]), seed=0)


def test_the_validation_files_are_checked_like_the_others(tmp_path, tokenizer_dir, corpus):
    out = prepare(data_args(tokenizer_dir, tmp_path / "c", [corpus], validation_split_percentage=20), seed=0)
    inputs = manifest_of(out)["fingerprint_inputs"]
    assert {"validation/state.json", "validation/dataset_info.json"} <= set(manifest_of(out)["files"])
    assert verify_published(out, inputs) is None
    data = next((out / "validation").glob("data-*.arrow"))
    data.write_bytes(data.read_bytes()[:-10])
    assert "cut short" in verify_published(out, inputs)

    def listing(name: str) -> None:
        manifest = manifest_of(out)
        manifest["files"][name] = {"size": 1, "xxh3_128": "0"}
        (out / "manifest.json").write_text(json.dumps(manifest))

    for name in ("../escape", "validation/../../escape", "/etc/passwd", "other/file", "validation/a/b"):
        listing(name)
        with pytest.raises(ForeignDataset, match="in a way rankzero never writes"):
            verify_published(out, inputs)
        manifest = manifest_of(out)
        del manifest["files"][name]
        (out / "manifest.json").write_text(json.dumps(manifest))
    # A link in place of validation/ would lead the checks and the loader elsewhere: damaged.
    (out / "validation").rename(out / "elsewhere")
    (out / "validation").symlink_to(out / "elsewhere")
    assert "validation/ is missing or not a directory" in verify_published(out, inputs)


# ---------------------------------------------------------------------------------------------
# SFT: rows of whole samples


def unpacked_samples(args) -> list[tuple[tuple, tuple]]:
    """Every sample as the stage makes it, one by one, untruncated: (ids, labels)."""
    from rankzero.data.inputs.readers import iter_chunks
    from rankzero.data.stage import Stage, StageSpec

    plan = plan_of(args, 0)
    stage = Stage(StageSpec(plan.stage, "hf", quality=None, hashes=False, signatures=False, truncate_to=None),
                  plan.tokenizer)
    samples = []
    for index, source in enumerate(plan.sources):
        for chunk in iter_chunks(source, index, 1000, "line"):
            result = stage(chunk)
            edges = np.cumsum([0, *result.lengths])
            samples += [(tuple(result.ids[a:b].tolist()), tuple(result.labels[a:b].tolist()))
                        for a, b in itertools.pairwise(edges)]
    return samples


def test_sft_rows_hold_whole_samples_with_their_labels_and_long_ones_are_truncated(tmp_path, tokenizer_dir):
    import datasets

    chat = REPO / "data" / "sample" / "chat.jsonl"
    length = 320  # the sample's 50 conversations are 84-379 tokens long with the test tokenizer
    args = data_args(tokenizer_dir, tmp_path / "c", [chat], mode="sft", max_seq_length=length)
    expected = unpacked_samples(args)
    assert len(expected) == 50
    long = [s for s in expected if len(s[0]) > length]
    assert 0 < len(long) < 25, [len(s[0]) for s in expected]  # the property needs both kinds
    out = prepare(args, seed=0)
    rows = datasets.load_from_disk(str(out))
    found = []
    for row in rows:
        assert len(row["input_ids"]) == len(row["labels"]) == sum(row["document_lengths"]) <= length
        edges = np.cumsum([0, *row["document_lengths"]])
        found += [(tuple(row["input_ids"][a:b]), tuple(row["labels"][a:b])) for a, b in itertools.pairwise(edges)]
    # Every row is whole samples: the pieces are exactly the samples (the long ones cut at their end, and
    # dropped where the cut left no answer token), ids and labels alike — no row starts inside a sample.
    cut = [(ids[:length], labels[:length]) if len(ids) > length else (ids, labels) for ids, labels in expected]
    answerless = [sample for sample in cut if all(label == -100 for label in sample[1])]
    cut = [sample for sample in cut if sample not in answerless]
    assert Counter(found) == Counter(cut)
    manifest = manifest_of(out)
    assert manifest["dropped"].get("no_trainable_tokens", 0) == len(answerless)
    assert manifest["truncated"] == len(long) - len(answerless) == manifest["sources"][0]["truncated"]
    assert manifest["tail_tokens_dropped"] == 0 and manifest["tokens"] == sum(len(ids) for ids, _ in cut)
    assert len(rows) < len(expected)  # samples share rows


def test_sft_bin_packing_does_not_depend_on_chunking(tmp_path, tokenizer_dir):
    import datasets

    chat = write_jsonl(tmp_path / "chat.jsonl", [
        {"messages": [{"role": "user", "content": f"질문 {i} " * (1 + i % 7)},
                      {"role": "assistant", "content": f"답변 {i}입니다. " * (1 + i % 5)}]} for i in range(300)])
    outputs = []
    for index, (workers, batch) in enumerate([(1, 1000), (2, 7)]):
        args = data_args(tokenizer_dir, tmp_path / f"c{index}", [chat], mode="sft", max_seq_length=128,
                         dataset_num_proc=workers, dataset_batch_size=batch, validation_split_percentage=10)
        outputs.append(prepare(args, seed=0))
    for directory in (lambda out: out, validation_dir):
        first, second = (datasets.load_from_disk(str(directory(out))) for out in outputs)
        assert first["input_ids"] == second["input_ids"] and first["labels"] == second["labels"]
        assert first["document_lengths"] == second["document_lengths"]
