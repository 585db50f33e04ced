"""The handoff protocol with real processes: torchrun, scheduler-style env, killed and failing builders."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from datautil import REPO, korean_documents, prepare_cli, prepared_dir, write_jsonl


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _snapshot(directory: Path) -> dict:
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(directory.rglob("*"))}


def _spawn(args, rank, world, local_rank, local_world, node, port, extra_env=None):
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "RANK": str(rank), "WORLD_SIZE": str(world),
           "LOCAL_RANK": str(local_rank), "LOCAL_WORLD_SIZE": str(local_world), "GROUP_RANK": str(node),
           "NODE_RANK": str(node), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), **(extra_env or {})}
    command = [sys.executable, str(REPO / "train.py"), "--tokenize_only", *map(str, args)]
    return subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_all(processes, timeout=240):
    """Wait for every process; return [(returncode, stdout, stderr, exit time)]."""
    deadline, ended = time.monotonic() + timeout, {}
    while len(ended) < len(processes):
        for index, process in enumerate(processes):
            if index not in ended and process.poll() is not None:
                ended[index] = time.monotonic()
        if time.monotonic() > deadline:
            for process in processes:
                process.kill()
            raise AssertionError("processes did not finish in time")
        time.sleep(0.05)
    return [(p.returncode, *p.communicate(), ended[i]) for i, p in enumerate(processes)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "ko.jsonl"
    return write_jsonl(path, [{"text": t} for t in korean_documents(1500)])


def _common(corpus, tokenizer_dir, cache):
    return ["--dataset", corpus, "--tokenizer_path", tokenizer_dir, "--max_seq_length", 64, "--cache_dir", cache]


def test_torchrun_builds_once_and_the_cached_rerun_writes_nothing(tmp_path, tokenizer_dir, corpus):
    runner = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(free_port())]
    cache = tmp_path / "cache"
    first = prepare_cli(*_common(corpus, tokenizer_dir, cache), runner=runner)
    lines = [line for line in first.stdout.splitlines() if "prepared: " in line]
    assert len(lines) == 2 and len({line.split("prepared: ")[1] for line in lines}) == 1, first.stdout
    out = Path(lines[0].split("prepared: ")[1])
    assert first.stderr.count("[prepare] published") == 1
    assert json.loads((out / "manifest.json").read_text())["built_by_rank"] == 0
    before = _snapshot(cache)
    runner[-1] = str(free_port())
    second = prepare_cli(*_common(corpus, tokenizer_dir, cache), runner=runner)
    assert _snapshot(cache) == before, "a cached re-run must not write"
    ready = [float(s) for s in re.findall(r"data ready in ([\d.]+) s", second.stderr)]
    assert len(ready) == 2 and max(ready) < 2.0, second.stderr


def test_builder_error_reaches_the_waiting_rank_within_seconds(tmp_path, tokenizer_dir, corpus):
    lines = corpus.read_text(encoding="utf-8").splitlines()
    lines[1200] = lines[1200].replace('"text"', "'text'")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    port = free_port()
    args = _common(bad, tokenizer_dir, tmp_path / "cache") + ["--dataset_batch_size", 100]
    processes = [_spawn(args, rank, 2, rank, 2, 0, port) for rank in (0, 1)]
    (code0, _, err0, end0), (code1, _, err1, end1) = _wait_all(processes)
    assert code0 != 0 and "bad.jsonl:1201: malformed JSON" in err0
    assert code1 != 0 and "rank 0 failed" in err1 and "bad.jsonl:1201: malformed JSON" in err1, err1
    assert end1 - end0 < 5.0
    assert not [p for p in (tmp_path / "cache").iterdir() if p.is_dir()]


def test_killed_builder_is_noticed_and_the_next_run_rebuilds_the_same_data(tmp_path, tokenizer_dir):
    import datasets

    big = write_jsonl(tmp_path / "big.jsonl", [{"text": t} for t in korean_documents(40000, seed=7)])
    cache = tmp_path / "cache"
    port = free_port()
    args = _common(big, tokenizer_dir, cache) + ["--dataset_num_proc", 1, "--dataset_batch_size", 200]
    builder, waiter = (_spawn(args, rank, 2, rank, 2, 0, port) for rank in (0, 1))
    deadline = time.monotonic() + 120
    while not any('"docs"' in p.read_text() for p in cache.glob("*.heartbeat.*") if p.exists()):
        assert time.monotonic() < deadline and builder.poll() is None, "builder never got going"
        time.sleep(0.1)
    assert builder.poll() is None, "the build finished before it could be killed; make the corpus larger"
    builder.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    (code, _, err, ended), = _wait_all([waiter], timeout=60)
    builder.communicate()
    assert code != 0 and "died while preparing" in err, err
    assert ended - killed_at < 10.0
    assert list(cache.glob("*.tmp-*")), "the killed builder's tmp dir is left (and must be cleaned next time)"
    rerun = prepared_dir(prepare_cli(*args).stdout)
    assert not list(cache.glob("*.tmp-*"))
    fresh = prepared_dir(prepare_cli(*_common(big, tokenizer_dir, tmp_path / "fresh"), "--dataset_num_proc", 1).stdout)
    assert rerun.name == fresh.name
    assert datasets.load_from_disk(str(rerun))["input_ids"] == datasets.load_from_disk(str(fresh))["input_ids"]


@pytest.mark.parametrize("shared", [True, False])
def test_two_nodes_build_once_when_shared_and_once_per_node_when_not(tmp_path, tokenizer_dir, corpus, shared):
    port = free_port()
    processes = []
    for node in (0, 1):
        cache = tmp_path / ("shared" if shared else f"node{node}")
        for local in (0, 1):
            processes.append(_spawn(_common(corpus, tokenizer_dir, cache), 2 * node + local, 4, local, 2, node, port,
                                    {"RANKZERO_PROBE_S": "3"}))
    results = _wait_all(processes)
    assert all(code == 0 for code, *_ in results), [err for _, _, err, _ in results]
    outputs = [prepared_dir(out) for _, out, _, _ in results]
    builds = sum(err.count("[prepare] published") for _, _, err, _ in results)
    manifests = [json.loads((o / "manifest.json").read_text()) for o in outputs]
    if shared:
        assert builds == 1 and len(set(outputs)) == 1 and manifests[0]["built_by_rank"] == 0
    else:
        assert builds == 2 and outputs[0] == outputs[1] and outputs[2] == outputs[3] and outputs[0] != outputs[2]
        assert [m["built_by_rank"] for m in manifests] == [0, 0, 2, 2]


def test_two_concurrent_jobs_share_one_build(tmp_path, tokenizer_dir, corpus):
    args = _common(corpus, tokenizer_dir, tmp_path / "cache")
    env = {key: value for key, value in os.environ.items() if key not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    command = [sys.executable, str(REPO / "train.py"), "--tokenize_only", *map(str, args)]
    jobs = [subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    results = _wait_all(jobs)
    assert all(code == 0 for code, *_ in results), [err for _, _, err, _ in results]
    assert len({prepared_dir(out) for _, out, _, _ in results}) == 1
    assert sum(err.count("[prepare] published") for _, _, err, _ in results) == 1


def test_prep_scope_overrides_detection_and_single_node_needs_no_probe(tmp_path, tokenizer_dir, corpus):
    from datautil import data_args
    from rankzero.data.handoff import elect_scope
    from rankzero.runtime import Runtime

    node1 = Runtime(rank=2, world_size=4, local_rank=0, local_world_size=2, node_rank=1, hostname="n1")
    forced = data_args(tokenizer_dir, tmp_path, [corpus], prep_scope="node")
    assert elect_scope(forced, node1, tmp_path) == "node"  # no probe wait: the flag decides
    one_node = Runtime(rank=1, world_size=2, local_rank=1, local_world_size=2, node_rank=0, hostname="n0")
    assert elect_scope(data_args(tokenizer_dir, tmp_path, [corpus]), one_node, tmp_path) == "global"
    assert not list(tmp_path.glob(".probe-*"))


def test_prep_timeout_is_the_last_resort(tmp_path, tokenizer_dir, corpus):
    from datautil import data_args
    from rankzero.data.handoff import wait_for_builder
    from rankzero.errors import BuilderFailed
    from rankzero.runtime import Runtime

    args = data_args(tokenizer_dir, tmp_path, [corpus], prep_timeout_s=1.5)
    waiter = Runtime(rank=1, world_size=2, local_rank=1, local_world_size=2, node_rank=0, hostname="n0")
    started = time.monotonic()
    with pytest.raises(BuilderFailed, match="--prep_timeout_s"):
        wait_for_builder(args, waiter, tmp_path, "fp", "job", "rank 0")
    assert time.monotonic() - started < 5
