"""The Ray engine: the same tokens and the same number of full blocks as the local engine, every
failure reported with its file and line, nothing published or left running after one.

One local Ray cluster serves the whole module (`ray start --head`, 2 CPUs, a small object store);
builds in this process and in subprocesses join it through RAY_ADDRESS. Tasks are made tiny
(RANKZERO_RAY_TASK_MB, ~20 kB) so every corpus here is cut into several.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import pytest

from helpers import REPO, data_args, korean_documents, prepare, prepare_cli, prepared_dir, write_jsonl
from rankzero.data.encode import DocumentEncoder, load_tokenizer
from rankzero.errors import RankzeroError

ray = pytest.importorskip("ray")
TASK_MB = str(20_000 / (1 << 20))


def _ray_processes() -> set[int]:
    import psutil

    found = set()
    for process in psutil.process_iter(["pid", "name", "cmdline"]):
        command = " ".join(process.info["cmdline"] or []) + " " + (process.info["name"] or "")
        if any(key in command for key in ("raylet", "gcs_server", "ray::", "default_worker.py")):
            found.add(process.info["pid"])
    return found


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    """A local cluster for the module; RAY_ADDRESS points every build at it."""
    from helpers import free_port

    port = free_port()
    temp = tmp_path_factory.mktemp("ray")
    command = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", f"--port={port}", "--num-cpus=2",
               "--include-dashboard=false", "--object-store-memory=120000000", "--disable-usage-stats",
               f"--temp-dir={temp}"]
    # Token authentication depends on what ~/.ray holds; a test cluster on loopback does without it.
    previous = {name: os.environ.get(name) for name in ("RAY_ADDRESS", "RANKZERO_RAY_TASK_MB", "RAY_AUTH_MODE")}
    os.environ["RAY_AUTH_MODE"] = "disabled"
    subprocess.run(command, check=True, capture_output=True, timeout=120)
    os.environ["RAY_ADDRESS"] = f"127.0.0.1:{port}"
    os.environ["RANKZERO_RAY_TASK_MB"] = TASK_MB
    try:
        yield os.environ["RAY_ADDRESS"]
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        subprocess.run([sys.executable, "-m", "ray.scripts.scripts", "stop", "--force"], capture_output=True, timeout=120)


@pytest.fixture
def small_tasks(monkeypatch):
    monkeypatch.setenv("RANKZERO_RAY_TASK_MB", TASK_MB)


def _build(tmp_path, tokenizer_dir, corpus, engine, **overrides):
    import datasets

    args = data_args(tokenizer_dir, tmp_path / f"cache-{engine}", [corpus], prep_engine=engine, **overrides)
    out = prepare(args, seed=0)
    return datasets.load_from_disk(str(out)), json.loads((out / "manifest.json").read_text())


def _tokens(dataset) -> Counter:
    return Counter(np.asarray(dataset["input_ids"], dtype=np.int64).ravel().tolist())


def _assert_same_content(local, ray_built, length):
    (local_rows, local_manifest), (ray_rows, ray_manifest) = local, ray_built
    assert len(ray_rows) == len(local_rows) and set(map(len, ray_rows["input_ids"])) == {length}
    for key in ("docs_in", "docs_kept", "dropped", "tokens", "sequences", "tail_tokens_dropped"):
        assert ray_manifest[key] == local_manifest[key], key
    # Both outputs are the same token multiset less a final partial block (< one block each).
    difference = _tokens(local_rows) - _tokens(ray_rows)
    assert sum(difference.values()) < length and sum((_tokens(ray_rows) - _tokens(local_rows)).values()) < length
    assert ray_manifest["prep_engine"]["tasks"] >= 3 and ray_manifest["fingerprint"] == local_manifest["fingerprint"]


def test_ray_matches_the_local_engine(tmp_path, tokenizer_dir, ray_cluster, small_tasks):
    texts = korean_documents(500, seed=3)
    corpus = write_jsonl(tmp_path / "ko.jsonl", [{"text": t} for t in texts])
    local = _build(tmp_path, tokenizer_dir, corpus, "local", max_seq_length=64)
    ray_built = _build(tmp_path, tokenizer_dir, corpus, "ray", max_seq_length=64)
    _assert_same_content(local, ray_built, 64)
    # Exactly the encoded documents' tokens, less the final partial block: none lost, none repeated.
    info = load_tokenizer(tokenizer_dir)
    ids, _, _ = DocumentEncoder(info).encode([[(t, True)] for t in texts])
    everything = Counter(ids.tolist())
    ray_tokens = _tokens(ray_built[0])
    assert not ray_tokens - everything and sum((everything - ray_tokens).values()) == ray_built[1]["tail_tokens_dropped"]
    assert all(sum(lengths) == 64 for lengths in ray_built[0]["document_lengths"])


def test_ray_with_the_kiwi_filter_drops_the_same_documents(tmp_path, tokenizer_dir, ray_cluster, small_tasks):
    sample = [json.loads(line)["text"] for line in (REPO / "data" / "quality_sample.jsonl").read_text().splitlines()]
    # Duplicates far apart, so they land in different tasks: dedup must be global, first one wins.
    records = [{"text": t} for t in sample + korean_documents(60, seed=4) + sample[:40]]
    corpus = write_jsonl(tmp_path / "mixed.jsonl", records)
    local = _build(tmp_path, tokenizer_dir, corpus, "local", quality_filter="ko", max_seq_length=32)
    ray_built = _build(tmp_path, tokenizer_dir, corpus, "ray", quality_filter="ko", max_seq_length=32)
    assert ray_built[1]["dropped"]["exact_duplicate"] >= 30
    _assert_same_content(local, ray_built, 32)
    assert ray_built[1]["prep_engine"]["passes"] == 2
    # the same examples of each rule's drops, with the file's own line numbers from tasks that start mid-file
    samples = [(tmp_path / f"cache-{engine}" / manifest["fingerprint"] / "quality_samples.jsonl").read_text()
               for engine, (_, manifest) in (("local", local), ("ray", ray_built))]
    assert samples[0] == samples[1] and samples[0]


def test_ray_reads_compressed_files_as_the_local_engine(tmp_path, tokenizer_dir, ray_cluster, small_tasks):
    import bz2
    import gzip
    import lzma

    import zstandard

    texts = korean_documents(400, seed=9)
    directory = tmp_path / "corpus"
    directory.mkdir()
    compressions = {".gz": lambda b: gzip.compress(b, 1), ".zst": zstandard.ZstdCompressor().compress,
                    ".bz2": bz2.compress, ".xz": lzma.compress}
    for index, (suffix, compress) in enumerate(compressions.items()):  # one task per file: a stream has no ranges
        part = "\n".join(json.dumps({"text": t}, ensure_ascii=False) for t in texts[index::4]) + "\n"
        (directory / f"part{index}.jsonl{suffix}").write_bytes(compress(part.encode()))
    local, ray_built = (_build(tmp_path, tokenizer_dir, directory, engine, max_seq_length=64) for engine in ("local", "ray"))
    assert local[1]["docs_in"] == 400
    _assert_same_content(local, ray_built, 64)


def _documents(directory, with_labels: bool = False) -> Counter:
    """Every document (or SFT sample) of a prepared split, by its tokens (and labels)."""
    import datasets

    found = Counter()
    for row in datasets.load_from_disk(str(directory)):
        edges = np.cumsum([0, *row["document_lengths"]])
        for start, end in itertools.pairwise(edges):
            labels = tuple(row["labels"][start:end]) if with_labels else ()
            found[(tuple(row["input_ids"][start:end]), labels)] += 1
    return found


def _both_engines(tmp_path, tokenizer_dir, corpus, **flags):
    local, ray_built = (prepare(data_args(tokenizer_dir, tmp_path / f"cache-{engine}", [corpus], prep_engine=engine,
                                          **flags), seed=0) for engine in ("local", "ray"))
    return local, ray_built, *(json.loads((out / "manifest.json").read_text()) for out in (local, ray_built))


@pytest.mark.parametrize("dedup", ["none", "exact", "near"], ids=["one pass", "two passes", "near"])
def test_ray_holds_out_the_same_documents(tmp_path, tokenizer_dir, ray_cluster, small_tasks, dedup):
    from rankzero.data.published import validation_dir

    texts = korean_documents(500, seed=12)
    corpus = write_jsonl(tmp_path / "ko.jsonl", [{"text": t} for t in texts + texts[:30]])  # repeats, other tasks
    local, ray_built, local_manifest, ray_manifest = _both_engines(
        tmp_path, tokenizer_dir, corpus, validation_split_percentage=20, dedup=dedup, packing=False,
        max_seq_length=2048)
    assert ray_manifest["prep_engine"]["passes"] == (1 if dedup == "none" else 2)
    held, trained = _documents(validation_dir(ray_built)), _documents(ray_built)
    assert held == _documents(validation_dir(local)) and trained == _documents(local)
    assert not set(held) & set(trained) and 60 < sum(held.values()) < 150
    for key in ("documents", "tokens", "sequences"):
        assert ray_manifest["validation"][key] == local_manifest["validation"][key], key
    assert ray_manifest["dropped"] == local_manifest["dropped"] == ({} if dedup == "none" else {"exact_duplicate": 30})


def test_ray_removes_the_same_near_copies_as_the_local_engine(tmp_path, tokenizer_dir, ray_cluster, small_tasks):
    """Near-copies in the same source and across sources, in other tasks: the Ray driver decides from the tasks'
    signatures what the local engine decides, in both splits, and samples the same pairs."""
    from rankzero.data.published import validation_dir
    from test_prepare_dedup import planted_corpus

    first, second = planted_corpus(tmp_path)
    flags = {"validation_split_percentage": 20, "packing": False, "max_seq_length": 4096}
    local, ray_built = (prepare(data_args(tokenizer_dir, tmp_path / f"cache-{engine}", [first, second],
                                          prep_engine=engine, **flags), seed=0) for engine in ("local", "ray"))
    local_manifest, ray_manifest = (json.loads((out / "manifest.json").read_text()) for out in (local, ray_built))
    assert ray_manifest["prep_engine"]["tasks"] >= 6
    dropped = ray_manifest["dropped"]
    # Near-copies of a held-out document go first, in the stage (eval_overlap.py); the rest at near dedup.
    assert dropped == local_manifest["dropped"] and dropped["near_duplicate"] + dropped.get("eval_overlap", 0) == 16
    assert [s["dropped"] for s in ray_manifest["sources"]] == [s["dropped"] for s in local_manifest["sources"]]
    assert _documents(ray_built) == _documents(local) and _documents(validation_dir(ray_built)) == _documents(
        validation_dir(local))
    assert (ray_built / "dedup_samples.jsonl").read_text() == (local / "dedup_samples.jsonl").read_text()
    for key in ("documents", "removed", "pairs_compared"):
        assert ray_manifest["near_dedup"][key] == local_manifest["near_dedup"][key], key
    # The pack pass ran in the stage pass's worker processes (a pool of actors per pass started its own).
    assert ray_manifest["prep_engine"]["started_for_pack"] == 0 < ray_manifest["prep_engine"]["worker_processes"]



def test_copies_of_an_earlier_tasks_texts_are_dropped_before_tokenizing_and_the_output_is_the_same(
        tmp_path, tokenizer_dir, ray_cluster, small_tasks):
    """Every text twice, the copies in later tasks than their first holders: tasks that start after those are done
    drop the copies unsigned and untokenized (ray_work.EarlierTexts), where only the driver dropped them before;
    the kept documents, both splits and every count are still the local engine's."""
    from rankzero.data.published import validation_dir

    texts = korean_documents(120, seed=5)
    corpus = write_jsonl(tmp_path / "twice.jsonl", [{"text": t} for t in texts + texts])
    flags = {"validation_split_percentage": 20, "packing": False, "max_seq_length": 4096}
    local, ray_built = (prepare(data_args(tokenizer_dir, tmp_path / f"cache-{engine}", [corpus], prep_engine=engine,
                                          **flags), seed=0) for engine in ("local", "ray"))
    local_manifest, ray_manifest = (json.loads((out / "manifest.json").read_text()) for out in (local, ray_built))
    assert ray_manifest["prep_engine"]["tasks"] >= 6 and ray_manifest["dropped"]["exact_duplicate"] == 120
    # Two tasks run at a time, in order: the last ones start after the first are done.
    assert ray_manifest["prep_engine"]["repeats_dropped_by_tasks"] > 0
    for key in ("docs_in", "docs_kept", "dropped", "tokens", "fingerprint"):
        assert ray_manifest[key] == local_manifest[key], key
    assert [ray_manifest["validation"][k] for k in ("documents", "tokens")] == [
        local_manifest["validation"][k] for k in ("documents", "tokens")]
    assert [s["dropped"] for s in ray_manifest["sources"]] == [s["dropped"] for s in local_manifest["sources"]]
    assert _documents(ray_built) == _documents(local) and _documents(validation_dir(ray_built)) == _documents(
        validation_dir(local))


def test_a_task_judges_each_line_once_and_stages_what_judging_every_copy_stages(tmp_path, tokenizer_dir,
                                                                                  monkeypatch):
    """Within a Ray task the quality filter judges a line once: a copy in a later chunk of the task takes the first
    copy's verdict (dedup/exact.LineVerdicts). The task stages the same documents, counts and quality samples as
    when every copy is judged on its own (run here, in this process, as a Ray worker runs it)."""
    from helpers import plan_of
    from rankzero.data.dedup.exact import LineVerdicts
    from rankzero.data.engines import ray_tasks
    from rankzero.data.quality import QualityFilter
    from rankzero.data.stage import Stage

    sample = [json.loads(line)["text"] for line in (REPO / "data" / "quality_sample.jsonl").read_text().splitlines()]
    lines = [json.dumps({"text": text}, ensure_ascii=False) for text in sample[::4] + korean_documents(20, seed=6)]
    every = lines * 3
    random.Random(2).shuffle(every)
    corpus = tmp_path / "crawl.jsonl"
    corpus.write_text("\n".join(every) + "\n", encoding="utf-8")
    plan = plan_of(data_args(tokenizer_dir, tmp_path / "cache", [corpus], prep_engine="ray", quality_filter="ko",
                             dataset_batch_size=20), seed=0)
    spec = plan.stage_spec("fastokens")
    stage = Stage.in_worker(spec, 1)
    [task] = ray_tasks.plan_tasks(plan.sources, 1 << 30)
    judged = []
    reason_before_kiwi = QualityFilter._reason_before_kiwi
    monkeypatch.setattr(QualityFilter, "_reason_before_kiwi",
                        lambda self, text: judged.append(text) or reason_before_kiwi(self, text))

    def staged(name):
        judged.clear()
        (tmp_path / name).mkdir()
        job = ray_tasks.Job.of(spec, plan.reading(), plan.output(), plan.held_out_below, 1, tmp_path / name, "stage")
        documents, meta = ray_tasks.TaskRunner(job, stage)._encode(task)
        meta.pop("seconds")
        arrays = [np.concatenate([document[column] for document in documents]) for column in (0, 1, 3)]
        return arrays, meta, len(judged)

    once, once_meta, once_judged = staged("once")
    judge_and_repair = QualityFilter.judge_and_repair

    def each_on_its_own(self, texts, known=None):
        results = [judge_and_repair(self, [text]) for text in texts]
        return [verdicts[0] for verdicts, _ in results], [fixed[0] for _, fixed in results]

    monkeypatch.setattr(QualityFilter, "judge_and_repair", each_on_its_own)
    monkeypatch.setattr(LineVerdicts, "look_up", lambda self, keys: np.zeros(len(keys), dtype=np.uint8))
    every_copy, every_meta, every_judged = staged("every-copy")
    assert once_judged <= len(set(lines)) < every_judged  # each line once; before, every copy
    assert once_meta == every_meta and len(once_meta["dropped"]) >= 5 and once_meta["quality_samples"]
    assert all(np.array_equal(a, b) for a, b in zip(once, every_copy))


def test_a_worker_builds_its_stage_once_per_spec_and_drops_it_to_pack(monkeypatch):
    """Ray hands a pooled worker task after task, of both passes: it builds the stage on its first task, keeps it
    while the spec and threads stay, builds anew for another build, and frees it to pack (which needs none)."""
    from types import SimpleNamespace

    from rankzero.data.engines import ray_tasks

    built = []
    monkeypatch.setattr(ray_tasks, "Stage", SimpleNamespace(in_worker=lambda spec, threads: built.append(
        (spec, threads)) or object()))
    monkeypatch.setattr(ray_tasks, "_built", None)
    first = ray_tasks.worker_stage("spec a", 1)
    assert ray_tasks.worker_stage("spec a", 1) is first and built == [("spec a", 1)]
    ray_tasks.worker_stage("spec b", 1)
    ray_tasks.worker_stage("spec b", 2)
    assert built == [("spec a", 1), ("spec b", 1), ("spec b", 2)]
    monkeypatch.setattr(ray_tasks, "TaskRunner", lambda job, stage: lambda batch: stage)
    assert ray_tasks.run_tasks({}, SimpleNamespace(phase="pack")) is None and ray_tasks._built is None

def test_ray_holds_out_an_eval_dataset_and_packs_it_as_the_local_engine(tmp_path, tokenizer_dir, ray_cluster,
                                                                       small_tasks):
    from rankzero.data.published import validation_dir

    texts = korean_documents(600, seed=13)
    evaluation = [write_jsonl(tmp_path / f"eval_{part}.jsonl", [{"text": t} for t in texts[start:start + 50]])
                  for part, start in (("a", 0), ("b", 50))]
    corpus = write_jsonl(tmp_path / "ko.jsonl", [{"text": t} for t in texts[100:] + texts[:5]])
    local, ray_built, local_manifest, ray_manifest = _both_engines(
        tmp_path, tokenizer_dir, corpus, eval_dataset=evaluation, dedup="none", max_seq_length=64)
    assert ray_manifest["dropped"] == local_manifest["dropped"] == {"in_eval_dataset": 5}
    import datasets

    for split in (lambda out: out, validation_dir):
        local_rows, ray_rows = (datasets.load_from_disk(str(split(out))) for out in (local, ray_built))
        assert len(local_rows) == len(ray_rows) and set(map(len, ray_rows["input_ids"])) == {64}
        # The same tokens less each engine's final partial row (< one row; in the validation split, one per source).
        assert sum((_tokens(local_rows) - _tokens(ray_rows)).values()) < 64 * 2
        assert sum((_tokens(ray_rows) - _tokens(local_rows)).values()) < 64 * 2
    # Validation rows of one eval source each, the same share of each source's tokens in both engines.
    for source in (0, 1):
        shares = [sum(len(row["input_ids"]) for row in datasets.load_from_disk(str(validation_dir(out)))
                      if set(row["document_sources"]) == {source}) for out in (local, ray_built)]
        held = local_manifest["sources"][source]["validation_tokens"]
        assert shares[0] == shares[1] and 0 <= held - shares[0] < 64
    assert ray_manifest["validation"]["documents"] == local_manifest["validation"]["documents"] == 100


def test_ray_sft_rows_hold_the_same_whole_samples(tmp_path, tokenizer_dir, ray_cluster, small_tasks):
    from rankzero.data.published import validation_dir

    chat = write_jsonl(tmp_path / "chat.jsonl", [
        {"messages": [{"role": "user", "content": f"질문 {i} " * (1 + i % 19)},
                      {"role": "assistant", "content": f"답변 {i}입니다. " * (1 + i % 4)}]} for i in range(300)])
    local, ray_built, local_manifest, ray_manifest = _both_engines(
        tmp_path, tokenizer_dir, chat, mode="sft", max_seq_length=96, validation_split_percentage=15)
    assert ray_manifest["prep_engine"]["tasks"] >= 3
    for split in (lambda out: out, validation_dir):
        samples = _documents(split(ray_built), with_labels=True)
        assert samples == _documents(split(local), with_labels=True)
        assert all(len(ids) <= 96 for ids, _ in samples) and sum(samples.values()) > 20
    assert ray_manifest["truncated"] == local_manifest["truncated"] > 0
    # Prompts that fill the row leave no answer: both engines drop and count the same samples.
    assert ray_manifest["dropped"]["no_trainable_tokens"] == local_manifest["dropped"]["no_trainable_tokens"] > 0
    assert ray_manifest["validation"]["truncated"] == local_manifest["validation"]["truncated"]
    assert ray_manifest["tail_tokens_dropped"] == 0


def test_a_failing_task_names_file_and_line_publishes_nothing_and_leaves_no_ray_process(tmp_path, tokenizer_dir):
    """Without RAY_ADDRESS the builder starts its own local cluster; after the failure none of it is left."""
    lines = [json.dumps({"text": t}, ensure_ascii=False) for t in korean_documents(400, seed=6)]
    lines[330] = lines[330][:-3]
    corpus = tmp_path / "bad.jsonl"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = _ray_processes()
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["RANKZERO_RAY_TASK_MB"] = TASK_MB
    command = [sys.executable, str(REPO / "train.py"), "--tokenize_only", "--dataset", str(corpus), "--tokenizer_path",
               str(tokenizer_dir), "--max_seq_length", "64", "--cache_dir", str(tmp_path / "cache"),
               "--prep_engine", "ray", "--dataset_num_proc", "2"]
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert result.returncode == 1, result.stderr[-3000:]
    assert "bad.jsonl:331: malformed JSON" in result.stderr, result.stderr[-3000:]
    cache = tmp_path / "cache"
    assert not [p for p in cache.iterdir() if (p / "manifest.json").exists()]
    assert json.loads(next(cache.glob("*.failed")).read_text())["error"].startswith(f"{corpus}:331")
    deadline = time.monotonic() + 30
    while _ray_processes() - before and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _ray_processes() - before, "Ray processes outlived the failed build"


def test_a_rerun_after_a_driver_crash_reuses_finished_tasks(tmp_path, tokenizer_dir, ray_cluster):
    import datasets

    corpus = write_jsonl(tmp_path / "ko.jsonl", [{"text": t} for t in korean_documents(1500, seed=8)])
    cache = tmp_path / "cache"
    args = ["--dataset", corpus, "--tokenizer_path", tokenizer_dir, "--max_seq_length", 64, "--cache_dir", cache,
            "--prep_engine", "ray"]
    command = [sys.executable, str(REPO / "train.py"), "--tokenize_only", *map(str, args)]
    driver = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while not list(cache.glob("*.ray-work/task-*.pack.json")) and time.monotonic() < deadline:
            assert driver.poll() is None, "the build finished before it could be interrupted"
            time.sleep(0.05)
        driver.send_signal(signal.SIGKILL)
    finally:
        driver.wait()
    finished = len(list(cache.glob("*.ray-work/task-*.pack.json")))
    assert finished >= 1
    out = prepared_dir(prepare_cli(*args).stdout)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["prep_engine"]["reused_tasks"] >= finished and not list(cache.glob("*.ray-work"))
    fresh = prepared_dir(prepare_cli(*args[:-3], tmp_path / "fresh", "--prep_engine", "ray").stdout)
    first, second = (datasets.load_from_disk(str(d)) for d in (out, fresh))
    assert sorted(map(tuple, first["input_ids"])) == sorted(map(tuple, second["input_ids"]))


def test_torchrun_builds_once_with_ray_then_trains(tmp_path, tokenizer_dir, ray_cluster):
    from helpers import free_port, losses, run, train_flags, write_corpus

    corpus = write_corpus(tmp_path / "docs.jsonl")
    out = tmp_path / "run"
    flags = train_flags(corpus, tokenizer_dir, tmp_path / "cache", out, max_steps=10, logging_steps=5,
                        prep_engine="ray")
    result = run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", 2, "--master_port", free_port(),
                  REPO / "train.py", *flags], timeout=400)
    prepared = [line for line in result.stdout.splitlines() if line.startswith("prepared: ")]
    assert len(prepared) == 1  # a training launch says it on rank 0 only (--tokenize_only: on every rank)
    assert result.stderr.count("[prepare] published") == 1
    assert json.loads((out / "data_manifest.json").read_text())["prep_engine"]["name"] == "ray"
    assert 10 in losses(out)


def test_hub_sources_are_refused_with_advice(tmp_path, tokenizer_dir, ray_cluster):
    with pytest.raises(RankzeroError, match="--prep_engine ray reads files every node can see"):
        prepare(data_args(tokenizer_dir, tmp_path / "c", ["someone/some-dataset"], prep_engine="ray"), seed=0)


def test_a_line_past_max_document_mb_names_the_files_own_line_in_a_ray_task(tmp_path, tokenizer_dir, ray_cluster,
                                                                          small_tasks):
    lines = [json.dumps({"text": t}, ensure_ascii=False) for t in korean_documents(400, seed=6)]
    lines[330] = json.dumps({"text": "가나다라 " * 3000}, ensure_ascii=False)  # ~39 KB; the others are under 3 KB
    corpus = tmp_path / "long.jsonl"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    args = data_args(tokenizer_dir, tmp_path / "cache", [corpus], prep_engine="ray", max_document_mb=0.01)
    with pytest.raises(RankzeroError, match=rf"^{corpus}:331: a line is longer than 10,485 bytes \(--max_document_mb "
                                            r"0.01\)"):
        prepare(args, seed=0)


def test_ray_screens_as_the_local_engine_does(tmp_path, tokenizer_dir, ray_cluster, small_tasks):
    from test_prepare_pii import planted_corpus

    corpus, benchmark = planted_corpus(tmp_path)
    built = {}
    for engine in ("local", "ray"):
        args = data_args(tokenizer_dir, tmp_path / f"cache-{engine}", [corpus], prep_engine=engine,
                         decontaminate=[benchmark], max_seq_length=32)
        out = prepare(args, seed=0)
        built[engine] = (json.loads((out / "manifest.json").read_text()),
                         *((out / name).read_text() for name in ("pii_samples.jsonl", "contaminated_items.jsonl")))
    (local, *local_files), (ray_manifest, *ray_files) = built["local"], built["ray"]
    assert ray_manifest["prep_engine"]["tasks"] >= 3
    for key in ("dropped", "docs_kept", "tokens", "pii", "decontamination"):
        assert ray_manifest[key] == local[key], key
    assert ray_files == local_files and local["dropped"]["pii_dump"] == 1
