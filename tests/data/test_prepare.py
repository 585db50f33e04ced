"""The prepare command end to end, single process: output contract, determinism, caching, bad input."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from helpers import (REPO as REPO_ROOT, data_args, korean_documents, plan_of, prepare, prepare_cli, prepare_then,
                     prepared_dir, write_jsonl)
from rankzero.data.encode import DocumentEncoder, load_tokenizer
from rankzero.errors import RankzeroError



def _snapshot(directory):
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(directory.rglob("*"))}


def test_cli_contract_and_no_token_lost(tmp_path, tokenizer_dir, corpus):
    import datasets

    result = prepare_cli("--dataset", corpus, "--tokenizer_path", tokenizer_dir, "--max_seq_length", 64,
                         "--packing", "--cache_dir", tmp_path / "cache", "--dataset_batch_size", 37)
    out = prepared_dir(result.stdout)
    assert out.parent == tmp_path / "cache"
    dataset = datasets.load_from_disk(str(out))
    manifest = json.loads((out / "manifest.json").read_text())
    for key in ("fingerprint", "docs_in", "docs_kept", "dropped", "tokens", "sequences", "built_by_rank",
                "timings", "throughput", "versions", "sources", "settings"):
        assert key in manifest, key
    assert manifest["fingerprint"] == out.name and manifest["built_by_rank"] == 0
    assert manifest["docs_in"] == manifest["docs_kept"] == 400
    assert len(dataset) == manifest["sequences"] and set(map(len, dataset["input_ids"])) == {64}
    # Every token of every document is in the output exactly once (but the final partial block):
    # the shuffled blocks are a permutation of the blocks of the tokenized stream.
    info = load_tokenizer(tokenizer_dir)
    ids, _, _ = DocumentEncoder(info).encode([[(t, True)] for t in korean_documents(400)])
    expected_blocks = ids[: len(ids) // 64 * 64].reshape(-1, 64)
    assert manifest["tokens"] == expected_blocks.size and manifest["tail_tokens_dropped"] == len(ids) % 64
    got = np.asarray(dataset["input_ids"], dtype=np.int32)
    assert sorted(map(bytes, got)) == sorted(map(bytes, expected_blocks))
    assert not np.array_equal(got, expected_blocks), "blocks should be shuffled"
    assert all(sum(lengths) == 64 for lengths in dataset["document_lengths"])


@pytest.mark.parametrize("columns", [{"input_ids": "uint16", "document_lengths": "int32"},
                                     {"input_ids": "int32", "document_lengths": "int32", "labels": "int32"}])
def test_save_to_disk_files_match_what_datasets_writes(tmp_path, columns):
    """The output's metadata is written without importing datasets: it must equal datasets' own."""
    import datasets
    import pyarrow as pa

    from rankzero.data.shards import output_features, output_schema, write_dataset_metadata

    features = datasets.Features({name: datasets.List(datasets.Value(dtype)) for name, dtype in columns.items()})
    assert output_features(columns) == features.to_dict()
    assert output_schema(columns).equals(features.arrow_schema, check_metadata=True)
    reference = tmp_path / "reference"
    datasets.Dataset.from_dict({name: [[1, 2]] for name in columns}, features=features).save_to_disk(str(reference))
    ours = tmp_path / "ours"
    ours.mkdir()
    write_dataset_metadata(ours, columns, ["data-00000-of-00001.arrow"], "f" * 16)
    for name in ("state.json", "dataset_info.json"):
        expected, got = (json.loads((d / name).read_text()) for d in (reference, ours))
        expected.pop("_fingerprint", None), got.pop("_fingerprint", None)
        assert got == expected, name
    with pa.ipc.new_stream(str(ours / "data-00000-of-00001.arrow"), output_schema(columns)) as writer:
        writer.write_table(pa.table({name: [[1, 2]] for name in columns}, schema=output_schema(columns)))
    loaded = datasets.load_from_disk(str(ours))
    assert loaded.features == features and loaded[0] == {name: [1, 2] for name in columns}


def wide_tokenizer(tokenizer_dir, directory):
    """The test tokenizer with added tokens up to id 66,000: ids past uint16's range."""
    import shutil

    from tokenizers import Tokenizer

    shutil.copytree(tokenizer_dir, directory)
    backend = Tokenizer.from_file(str(directory / "tokenizer.json"))
    backend.add_tokens([f"<extra_{index}>" for index in range(backend.get_vocab_size(), 66_001)])  # named by id
    backend.save(str(directory / "tokenizer.json"))
    return directory, backend.token_to_id("<extra_65600>")


def test_ids_take_two_bytes_when_the_vocabulary_fits_and_four_when_not(tmp_path, tokenizer_dir):
    """A vocabulary under 65,536 ids is stored as uint16 (the manifest says so, datasets reads it back);
    one with larger ids as int32, every id intact: the same documents give the same ids either way, and
    the training collator makes the same int64 batch of both."""
    import datasets

    from rankzero.train.collator import BlockCollator

    wide_dir, high_id = wide_tokenizer(tokenizer_dir, tmp_path / "wide")
    texts = korean_documents(300) + ["<extra_65600> " + text for text in korean_documents(20, seed=1)]
    corpus = write_jsonl(tmp_path / "ko.jsonl", [{"text": t} for t in texts])
    loaded = {}
    for name, tokenizer in (("narrow", tokenizer_dir), ("wide", wide_dir)):
        out = prepare(data_args(tokenizer, tmp_path / name, [corpus]), seed=0)
        manifest = json.loads((out / "manifest.json").read_text())
        loaded[name] = datasets.load_from_disk(str(out))
        expected = "uint16" if name == "narrow" else "int32"
        assert manifest["columns"]["input_ids"] == expected
        assert loaded[name].features["input_ids"].feature.dtype == expected
    narrow, wide = loaded["narrow"], loaded["wide"]
    wide_ids = np.concatenate(wide.with_format("numpy")["input_ids"])
    assert (wide_ids == high_id).sum() == 20  # past 65,535 and not wrapped
    assert narrow.data.nbytes < 0.6 * wide.data.nbytes
    # The narrow output holds the encoder's ids exactly: its blocks are the blocks of the token stream.
    ids, _, _ = DocumentEncoder(load_tokenizer(tokenizer_dir)).encode([[(t, True)] for t in texts])
    length = len(narrow[0]["input_ids"])
    expected = ids[: len(ids) // length * length].reshape(-1, length).astype(np.int64)
    got = np.stack(narrow.with_format("numpy")["input_ids"]).astype(np.int64)
    assert sorted(map(bytes, got)) == sorted(map(bytes, expected))
    rows = narrow.with_format("numpy", columns=["input_ids", "document_lengths"])
    as_int32 = narrow.cast(datasets.Features({"input_ids": datasets.List(datasets.Value("int32")),
                                              "document_lengths": datasets.List(datasets.Value("int32"))}))
    wide_rows = as_int32.with_format("numpy", columns=["input_ids", "document_lengths"])
    for collator in (BlockCollator(), BlockCollator(mask_across_documents=True)):
        first, second = collator([rows[i] for i in range(4)]), collator([wide_rows[i] for i in range(4)])
        assert first["input_ids"].dtype == second["input_ids"].dtype == torch_int64()
        assert all(np.array_equal(first[key], second[key]) for key in first if key != "num_tokens")


def torch_int64():
    import torch

    return torch.int64


def test_output_does_not_depend_on_workers_or_batch_sizes(tmp_path, tokenizer_dir, corpus):
    import datasets

    outputs = []
    for index, (workers, batch, writer) in enumerate([(1, 1000, 1000), (2, 13, 7)]):
        args = data_args(tokenizer_dir, tmp_path / f"cache{index}", [corpus], dataset_num_proc=workers,
                         dataset_batch_size=batch, dataset_writer_batch_size=writer)
        outputs.append(prepare(args, seed=3))
    assert outputs[0].name == outputs[1].name
    first, second = (datasets.load_from_disk(str(o)) for o in outputs)
    assert first["input_ids"] == second["input_ids"] and first["document_lengths"] == second["document_lengths"]


def test_direct_and_staged_packing_give_the_same_blocks(tmp_path, tokenizer_dir, corpus, monkeypatch):
    """Unweighted sources of known size are packed as they are encoded; others are staged first.
    Both must emit exactly the same blocks (only the shuffle's bucket count may differ)."""
    import datasets

    from rankzero.data.inputs.specs import Source

    direct = prepare(data_args(tokenizer_dir, tmp_path / "direct", [corpus]), seed=0)
    monkeypatch.setattr(Source, "total_bytes", lambda self: None)  # as for a hub source: size unknown
    staged = prepare(data_args(tokenizer_dir, tmp_path / "staged", [corpus]), seed=0)
    first, second = (datasets.load_from_disk(str(out)) for out in (direct, staged))
    assert sorted(zip(map(tuple, first["input_ids"]), map(tuple, first["document_lengths"]))) == \
        sorted(zip(map(tuple, second["input_ids"]), map(tuple, second["document_lengths"])))
    manifests = [json.loads((out / "manifest.json").read_text()) for out in (direct, staged)]
    assert manifests[0]["tokens"] == manifests[1]["tokens"] and manifests[0]["sequences"] == manifests[1]["sequences"]


def test_seed_changes_only_the_order(tmp_path, tokenizer_dir, corpus):
    import datasets

    a = datasets.load_from_disk(str(prepare(data_args(tokenizer_dir, tmp_path / "c", [corpus]), seed=1)))
    b = datasets.load_from_disk(str(prepare(data_args(tokenizer_dir, tmp_path / "c", [corpus]), seed=2)))
    assert a["input_ids"] != b["input_ids"] and sorted(a["input_ids"]) == sorted(b["input_ids"])


def test_cached_rerun_rewrites_nothing(tmp_path, tokenizer_dir, corpus):
    args = data_args(tokenizer_dir, tmp_path / "cache", [corpus])
    first = prepare(args, seed=0)
    before = _snapshot(tmp_path / "cache")
    assert prepare(args, seed=0) == first
    assert _snapshot(tmp_path / "cache") == before


def test_unpacked_rows_hold_whole_documents_split_at_max_length(tmp_path, tokenizer_dir, corpus):
    import datasets

    out = prepare(data_args(tokenizer_dir, tmp_path / "c", [corpus], packing=False, max_seq_length=48), seed=0)
    dataset = datasets.load_from_disk(str(out))
    manifest = json.loads((out / "manifest.json").read_text())
    assert max(map(len, dataset["input_ids"])) <= 48 and manifest["tail_tokens_dropped"] == 0
    info = load_tokenizer(tokenizer_dir)
    ids, _, _ = DocumentEncoder(info).encode([[(t, True)] for t in korean_documents(400)])
    assert sum(map(len, dataset["input_ids"])) == len(ids) == manifest["tokens"]


def test_sft_mode_writes_labels(tmp_path, tokenizer_dir):
    import datasets

    chat = write_jsonl(tmp_path / "chat.jsonl", [
        {"messages": [{"role": "user", "content": f"질문 {i}"}, {"role": "assistant", "content": f"답변 {i}입니다."}]}
        for i in range(50)])
    out = prepare(data_args(tokenizer_dir, tmp_path / "c", [chat], mode="sft", max_seq_length=96), seed=0)
    dataset = datasets.load_from_disk(str(out))
    assert "labels" in dataset.column_names
    for ids, labels in zip(dataset["input_ids"], dataset["labels"]):
        assert len(ids) == len(labels) <= 96
        assert all(label in (-100, token) for token, label in zip(ids, labels))
    flat = [label for labels in dataset["labels"] for label in labels]
    assert 0 < flat.count(-100) < len(flat)


def test_mixing_weights_set_token_shares(tmp_path, tokenizer_dir):
    big = write_jsonl(tmp_path / "big.jsonl", [{"text": t} for t in korean_documents(600, seed=1)])
    small = write_jsonl(tmp_path / "small.jsonl", [{"text": f"English document number {i}. " * 3} for i in range(200)])
    out = prepare(data_args(tokenizer_dir, tmp_path / "c", [f"{big}@1", f"{small}@1"]), seed=0)
    sources = json.loads((out / "manifest.json").read_text())["sources"]
    natural = [s["tokens"] for s in sources]
    assert natural[0] > 2 * natural[1]  # the small source is below half naturally ...
    assert sources[1]["ratio"] > 1 > sources[0]["ratio"]  # ... so it repeats and the big one is subsampled
    for source in sources:
        assert abs(source["share_of_output_tokens"] - 0.5) < 0.05, sources
    with pytest.raises(RankzeroError, match="give every source a weight"):
        prepare(data_args(tokenizer_dir, tmp_path / "c", [f"{big}@1", str(small)]), seed=0)


def test_fingerprint_covers_inputs_but_not_worker_knobs(tmp_path, tokenizer_dir, corpus):
    import shutil

    def fingerprint(path=corpus, tokenizer=tokenizer_dir, **overrides):
        return plan_of(data_args(tokenizer, tmp_path / "c", [path], **overrides), 0).fingerprint

    base = fingerprint()
    assert fingerprint(dataset_num_proc=1, dataset_batch_size=5, dataset_writer_batch_size=3) == base
    assert fingerprint(max_seq_length=33) != base
    assert fingerprint(packing=False) != base
    assert fingerprint(quality_filter="ko") != base
    assert fingerprint(text_column="text") != base
    other_tokenizer = tmp_path / "tok2"
    shutil.copytree(tokenizer_dir, other_tokenizer)
    assert fingerprint(tokenizer=other_tokenizer) == base  # same content, other path: same data
    config = json.loads((other_tokenizer / "tokenizer.json").read_text())
    config["added_tokens"][0]["content"] += "x"
    (other_tokenizer / "tokenizer.json").write_text(json.dumps(config))
    assert fingerprint(tokenizer=other_tokenizer) != base
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(corpus.read_bytes())
    os.utime(corpus, ns=(1, 1))
    assert fingerprint() != base  # mtime changed
    copy.write_text(copy.read_text() + '{"text": "하나 더"}\n')
    assert fingerprint(copy) != fingerprint(corpus)


def test_nothing_left_names_the_stage(tmp_path, tokenizer_dir):
    empty_docs = write_jsonl(tmp_path / "blank.jsonl", [{"text": "   "}, {"text": ""}])
    with pytest.raises(RankzeroError, match=r"records→text: all 2 documents were removed \(empty: 2\)"):
        prepare(data_args(tokenizer_dir, tmp_path / "c", [empty_docs]), seed=0)
    tiny = write_jsonl(tmp_path / "tiny.jsonl", [{"text": "짧다"}])
    with pytest.raises(RankzeroError, match="packing: only .* fewer than one block"):
        prepare(data_args(tokenizer_dir, tmp_path / "c", [tiny], max_seq_length=512), seed=0)
    assert not [p for p in (tmp_path / "c").iterdir() if p.is_dir()], "nothing half-written may stay"


def test_bad_input_leaves_nothing_loadable(tmp_path, tokenizer_dir, corpus):
    lines = corpus.read_text(encoding="utf-8").splitlines()
    lines[250] = lines[250][:-5]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    args = data_args(tokenizer_dir, tmp_path / "cache", [bad], dataset_batch_size=50)
    with pytest.raises(RankzeroError, match=r"bad.jsonl:251: malformed JSON"):
        prepare(args, seed=0)
    leftovers = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert all(name.endswith((".lock", ".failed")) for name in leftovers), leftovers
    failure = json.loads(next((tmp_path / "cache").glob("*.failed")).read_text())
    assert "bad.jsonl:251" in failure["error"] and failure["rank"] == 0
    out = prepare(data_args(tokenizer_dir, tmp_path / "cache", [bad], dataset_batch_size=50, skip_bad_records=True),
                  seed=0)
    assert json.loads((out / "manifest.json").read_text())["dropped"] == {"bad_record": 1}


def test_argument_errors_are_reported_together_before_work(tmp_path):
    result = prepare_cli("--dataset", tmp_path / "nope.jsonl", "--tokenizer_path", tmp_path / "missing",
                         "--max_seq_length", 1, "--cache_dir", tmp_path / "c", check=False)
    assert result.returncode == 2
    assert "--tokenizer_path" in result.stderr and "--max_seq_length 1" in result.stderr
    assert not (tmp_path / "c").exists()


def test_missing_input_and_unwritable_cache_fail_clearly(tmp_path, tokenizer_dir, corpus):
    result = prepare_cli("--dataset", tmp_path / "nope.jsonl", "--tokenizer_path", tokenizer_dir, "--cache_dir",
                         tmp_path / "c", check=False)
    assert result.returncode == 1 and "no such file" in result.stderr and "nope.jsonl" in result.stderr
    if os.geteuid() == 0:
        blocker = tmp_path / "not-a-dir"
        blocker.write_text("a file where the cache dir should be")
        cache = blocker / "cache"
    else:
        cache = tmp_path / "ro"
        cache.mkdir(mode=0o500)
    result = prepare_cli("--dataset", corpus, "--tokenizer_path", tokenizer_dir, "--cache_dir", cache, check=False)
    assert result.returncode == 1 and "--cache_dir" in result.stderr and "not writable" in result.stderr


def test_env_knobs_and_flags(monkeypatch, tmp_path, tokenizer_dir):
    monkeypatch.setenv("DATASET_NUM_PROC", "3")
    monkeypatch.setenv("DATASET_BATCH_SIZE", "17")
    args = data_args(tokenizer_dir, tmp_path, ["x"], dataset_batch_size=5)
    workers = args.workers
    assert (workers.dataset_num_proc, workers.dataset_batch_size, workers.dataset_writer_batch_size) == (3, 5, 1000)
    monkeypatch.setenv("DATASET_WRITER_BATCH_SIZE", "lots")
    with pytest.raises(ValueError, match="DATASET_WRITER_BATCH_SIZE"):
        data_args(tokenizer_dir, tmp_path, ["x"])


def test_quality_filter_in_the_pipeline_counts_every_reason(tmp_path, tokenizer_dir):
    sample = [json.loads(line) for line in (REPO_ROOT / "data" / "quality_sample.jsonl").read_text().splitlines()]
    records = [{"text": r["text"]} for r in sample] + [{"text": sample[0]["text"]}]  # one exact duplicate
    corpus = write_jsonl(tmp_path / "mixed.jsonl", records)
    # Exact dedup only: at the default near threshold (0.55) 18 of the sample's documents are near-copies of
    # earlier ones, which is near dedup's business (test_prepare_dedup.py), not the filter's.
    args = data_args(tokenizer_dir, tmp_path / "c", [corpus], quality_filter="ko", dataset_num_proc=2,
                     dataset_batch_size=40, dedup="exact")
    manifest = json.loads((prepare(args, seed=0) / "manifest.json").read_text())
    dropped = manifest["dropped"]
    assert manifest["docs_in"] == len(records)
    assert manifest["docs_kept"] + sum(dropped.values()) == len(records)
    assert dropped["exact_duplicate"] == 1
    clean = sum(r["label"] == "clean" for r in sample)
    assert clean * 0.95 <= manifest["docs_kept"] <= clean + 0.05 * (len(sample) - clean)
    assert len(dropped) >= 5, dropped  # many kinds of junk, each counted under its own reason


def test_prepare_path_imports_no_heavy_library(tmp_path, tokenizer_dir, corpus):
    """torch + transformers cost ~3 s to import, datasets ~0.7 CPU-s, pandas ~0.4 s; preparing data needs none."""
    result = prepare_then(["--dataset", corpus, "--tokenizer_path", tokenizer_dir, "--max_seq_length", 64,
                           "--cache_dir", tmp_path / "cache"],
                          "print('HEAVY', sorted(m for m in ('torch', 'transformers', 'datasets', 'pandas') "
                          "if m in sys.modules))\n")
    assert result.stdout.strip().splitlines()[-1] == "HEAVY []", result.stdout
