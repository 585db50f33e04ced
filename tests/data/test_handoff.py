"""The handoff protocol with real processes: torchrun, scheduler-style env, killed and failing builders."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import REPO, free_port, korean_documents, prepare_cli, prepared_dir, spawn, wait_all, write_jsonl


def _snapshot(directory: Path) -> dict:
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(directory.rglob("*"))}


def _common(large_corpus, tokenizer_dir, cache):
    return ["--dataset", large_corpus, "--tokenizer_path", tokenizer_dir, "--max_seq_length", 64, "--cache_dir", cache]


def test_torchrun_builds_once_and_the_cached_rerun_writes_nothing(tmp_path, tokenizer_dir, large_corpus):
    runner = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(free_port())]
    cache = tmp_path / "cache"
    first = prepare_cli(*_common(large_corpus, tokenizer_dir, cache), runner=runner)
    lines = [line for line in first.stdout.splitlines() if "prepared: " in line]
    assert len(lines) == 2 and len({line.split("prepared: ")[1] for line in lines}) == 1, first.stdout
    out = Path(lines[0].split("prepared: ")[1])
    assert first.stderr.count("[prepare] published") == 1
    assert json.loads((out / "manifest.json").read_text())["built_by_rank"] == 0
    before = _snapshot(cache)
    runner[-1] = str(free_port())
    second = prepare_cli(*_common(large_corpus, tokenizer_dir, cache), runner=runner)
    assert _snapshot(cache) == before, "a cached re-run must not write"
    # Both ranks found the published dir: nothing was built or waited for (how fast is handoff_bench's to say).
    assert len(re.findall(r"data ready in ([\d.]+) s", second.stderr)) == 2, second.stderr
    assert "[prepare] published" not in second.stderr and "waiting for" not in second.stderr, second.stderr


def test_builder_error_reaches_the_waiting_rank(tmp_path, tokenizer_dir, large_corpus):
    lines = large_corpus.read_text(encoding="utf-8").splitlines()
    lines[1200] = lines[1200].replace('"text"', "'text'")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    port = free_port()
    args = _common(bad, tokenizer_dir, tmp_path / "cache") + ["--dataset_batch_size", 100]
    processes = [spawn(["--tokenize_only", *args], rank, 2, port=port) for rank in (0, 1)]
    (code0, _, err0, end0), (code1, _, err1, end1) = wait_all(processes)
    assert code0 != 0 and "bad.jsonl:1201: malformed JSON" in err0
    # The waiter ends on the builder's failure marker, with its error, long before --prep_timeout_s (hours) would
    # end it; the seconds it takes are bench/handoff_bench.py's (a busy machine must not fail a test).
    assert code1 != 0 and "rank 0 failed" in err1 and "bad.jsonl:1201: malformed JSON" in err1, err1
    assert "--prep_timeout_s" not in err1, err1
    assert not [p for p in (tmp_path / "cache").iterdir() if p.is_dir()]


def test_killed_builder_is_noticed_and_the_next_run_rebuilds_the_same_data(tmp_path, tokenizer_dir):
    import datasets

    big = write_jsonl(tmp_path / "big.jsonl", [{"text": t} for t in korean_documents(40000, seed=7)])
    cache = tmp_path / "cache"
    port = free_port()
    # The HF tokenizer on one thread: slow enough (~4x fastokens) that the build is still running when killed.
    args = _common(big, tokenizer_dir, cache) + ["--dataset_num_proc", 1, "--dataset_batch_size", 200,
                                                 "--tokenizer_engine", "hf"]
    builder, waiter = (spawn(["--tokenize_only", *args], rank, 2, port=port) for rank in (0, 1))
    _wait_for_progress(cache, builder)
    assert builder.poll() is None, "the build finished before it could be killed; make the large_corpus larger"
    builder.send_signal(signal.SIGKILL)
    (code, _, err, _), = wait_all([waiter])
    builder.communicate()
    # Noticed from the free lock, not from the last-resort timeout.
    assert code != 0 and "died while preparing" in err and "--prep_timeout_s" not in err, err
    assert list(cache.glob("*.tmp-*")), "the killed builder's tmp dir is left (and must be cleaned next time)"
    rerun = prepared_dir(prepare_cli(*args).stdout)
    assert not list(cache.glob("*.tmp-*"))
    fresh = prepared_dir(prepare_cli(*_common(big, tokenizer_dir, tmp_path / "fresh"), "--dataset_num_proc", 1).stdout)
    assert rerun.name == fresh.name
    assert datasets.load_from_disk(str(rerun))["input_ids"] == datasets.load_from_disk(str(fresh))["input_ids"]


@pytest.mark.parametrize("shared", [True, False])
def test_two_nodes_build_once_when_shared_and_once_per_node_when_not(tmp_path, tokenizer_dir, large_corpus, shared):
    port = free_port()
    processes = []
    for node in (0, 1):
        cache = tmp_path / ("shared" if shared else f"node{node}")
        for local in (0, 1):
            processes.append(spawn(["--tokenize_only", *_common(large_corpus, tokenizer_dir, cache)], 2 * node + local, 4,
                                   local, 2, node, port, env={"RANKZERO_PROBE_S": "3"}))
    results = wait_all(processes)
    assert all(code == 0 for code, *_ in results), [err for _, _, err, _ in results]
    outputs = [prepared_dir(out) for _, out, _, _ in results]
    builds = sum(err.count("[prepare] published") for _, _, err, _ in results)
    manifests = [json.loads((o / "manifest.json").read_text()) for o in outputs]
    if shared:
        assert builds == 1 and len(set(outputs)) == 1 and manifests[0]["built_by_rank"] == 0
    else:
        assert builds == 2 and outputs[0] == outputs[1] and outputs[2] == outputs[3] and outputs[0] != outputs[2]
        assert [m["built_by_rank"] for m in manifests] == [0, 0, 2, 2]


def test_two_concurrent_jobs_share_one_build(tmp_path, tokenizer_dir, large_corpus):
    args = _common(large_corpus, tokenizer_dir, tmp_path / "cache")
    env = {key: value for key, value in os.environ.items() if key not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    command = [sys.executable, str(REPO / "train.py"), "--tokenize_only", *map(str, args)]
    jobs = [subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    results = wait_all(jobs)
    assert all(code == 0 for code, *_ in results), [err for _, _, err, _ in results]
    assert len({prepared_dir(out) for _, out, _, _ in results}) == 1
    assert sum(err.count("[prepare] published") for _, _, err, _ in results) == 1


def test_prep_scope_overrides_detection_and_single_node_needs_no_probe(tmp_path, tokenizer_dir, large_corpus):
    from helpers import data_args
    from rankzero.data.handoff import elect_scope
    from rankzero.runtime import Runtime

    node1 = Runtime(rank=2, world_size=4, local_rank=0, local_world_size=2, node_rank=1, hostname="n1")
    forced = data_args(tokenizer_dir, tmp_path, [large_corpus], prep_scope="node")
    assert elect_scope(forced.cache.prep_scope, node1, tmp_path) == "node"  # no probe wait: the flag decides
    one_node = Runtime(rank=1, world_size=2, local_rank=1, local_world_size=2, node_rank=0, hostname="n0")
    assert elect_scope(data_args(tokenizer_dir, tmp_path, [large_corpus]).cache.prep_scope, one_node, tmp_path) == "global"
    assert not list(tmp_path.glob(".probe-*"))


def test_prep_timeout_is_the_last_resort(tmp_path, tokenizer_dir, large_corpus):
    from helpers import data_args
    from rankzero.data.handoff import wait_for_builder
    from rankzero.errors import BuilderFailed
    from rankzero.runtime import Runtime

    args = data_args(tokenizer_dir, tmp_path, [large_corpus], prep_timeout_s=1.5)
    waiter = Runtime(rank=1, world_size=2, local_rank=1, local_world_size=2, node_rank=0, hostname="n0")
    with pytest.raises(BuilderFailed, match="--prep_timeout_s"):
        wait_for_builder(args.cache.prep_timeout_s, waiter, tmp_path, "fp", "job", "rank 0")


# --------------------------------------------------------------------------- a cache dir others can write

# Runs in a child process: computes the names this very process would use (fingerprint, job key, pid),
# plants a symlink at each of the chosen kinds, then runs train.py's main. Usage:
#   plant.py KINDS FILE_TARGET DIR_TARGET TRAIN_ARGS...
PLANT_AND_RUN = r'''
import os, sys
from pathlib import Path

from rankzero.args import parse_args
from rankzero.runtime import job_key
from rankzero.data.plan import make_plan
from rankzero.errors import run_cli
from rankzero.runtime import Runtime
import train

kinds, file_target, dir_target, argv = sys.argv[1].split(","), sys.argv[2], sys.argv[3], sys.argv[4:]
args = parse_args(["--tokenize_only", *argv])
runtime, pid = Runtime.from_env(), os.getpid()
fp = make_plan(args.sources, args.stage, args.packing, args.dedup, args.workers, args.seed).fingerprint
job = job_key(runtime, "global")
names = {  # every name a run uses, and the temp names earlier versions derived from the pid
    "heartbeat": [f"{fp}.heartbeat.{job}", f".{fp}.heartbeat.{job}.{pid}.tmp"],
    "probe": [f".probe-{job}", f"..probe-{job}.{pid}.tmp"],
    "failed": [f"{fp}.failed", f".{fp}.failed.{pid}.tmp"],
    "tmp": [f"{fp}.tmp-{runtime.hostname}-{pid}", f"{fp}.tmp-deadhost-1", f"{fp}.damaged-x"],
    "lock": [f"{fp}.lock"],
    "final": [fp],
}
cache = Path(args.cache.cache_dir).resolve()
cache.mkdir(parents=True, exist_ok=True)
for kind in kinds:
    for name in names[kind]:
        os.symlink(dir_target if kind in ("tmp", "final") else file_target, cache / name)
sys.exit(run_cli(lambda: train.main(["--tokenize_only", *argv])))
'''


def _tree(path: Path) -> dict:
    """Content and mtime of a file, or of every file below a directory."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in files}


@pytest.mark.parametrize("kinds", ["heartbeat,probe,tmp", "failed,heartbeat", "lock", "final"])
def test_symlinks_planted_at_every_name_are_never_followed(tmp_path, tokenizer_dir, large_corpus, kinds):
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("not the cache's to write\n")
    if kinds == "final":  # a valid dataset for these very inputs, built elsewhere: following the link would "work"
        victim_dir = prepared_dir(prepare_cli(*_common(large_corpus, tokenizer_dir, tmp_path / "elsewhere")).stdout)
    else:
        victim_dir = outside / "dir"
        victim_dir.mkdir()
        (victim_dir / "keep.txt").write_text("keep me\n")
    before = {**_tree(victim), **_tree(victim_dir)}
    dataset = large_corpus
    if kinds.startswith("failed"):  # make the build fail, so that FP.failed is written
        dataset = tmp_path / "bad.jsonl"
        dataset.write_text(large_corpus.read_text(encoding="utf-8") + "{broken\n", encoding="utf-8")
    script = tmp_path / "plant.py"
    script.write_text(PLANT_AND_RUN)
    cache = tmp_path / "cache"
    # Rank 0 of a 2-node job: it writes the probe, builds, beats and publishes without its peers.
    env = {**os.environ, "PYTHONPATH": str(REPO), "RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0",
           "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0", "NODE_RANK": "0", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(free_port())}
    result = subprocess.run([sys.executable, str(script), kinds, str(victim), str(victim_dir),
                             *map(str, _common(dataset, tokenizer_dir, cache))],
                            capture_output=True, text=True, timeout=240, cwd=REPO, env=env)
    assert {**_tree(victim), **_tree(victim_dir)} == before, "a symlink target outside the cache was written"
    links = {p.name: os.readlink(p) for p in cache.iterdir() if p.is_symlink()}
    if kinds == "heartbeat,probe,tmp":
        assert result.returncode == 0, result.stderr
        published = prepared_dir(result.stdout)
        assert published.is_dir() and not published.is_symlink()
        assert not any(".heartbeat." in name and not name.startswith(".") for name in links)  # replaced, then removed
        assert not any(name.startswith(".probe-") for name in links)  # replaced by rank 0's real probe
        assert sum(".tmp-" in name or ".damaged-" in name for name in links) == 3  # never entered nor removed
        assert "is not a directory rankzero made (a symlink?): left alone" in result.stderr
    elif kinds == "failed,heartbeat":
        assert result.returncode == 1 and "bad.jsonl:1501: malformed JSON" in result.stderr
        failed = next(cache.glob("*.failed"))
        assert not failed.is_symlink() and "bad.jsonl:1501" in json.loads(failed.read_text())["error"]
    elif kinds == "lock":
        assert result.returncode == 1 and ".lock is a symlink: rankzero never made it and never follows it" in result.stderr
    else:
        assert result.returncode == 1 and "is a symlink: rankzero publishes only directories it built" in result.stderr
        assert "prepared:" not in result.stdout


def test_two_ranks_rebuild_a_damaged_dataset_once_and_both_get_the_new_one(tmp_path, tokenizer_dir, large_corpus):
    args = _common(large_corpus, tokenizer_dir, tmp_path / "cache")
    out = prepared_dir(prepare_cli(*args).stdout)
    manifest = json.loads((out / "manifest.json").read_text())
    shard = next(out.glob("data-*.arrow"))
    with open(shard, "r+b") as handle:
        handle.truncate(shard.stat().st_size // 2)
    port = free_port()
    results = wait_all([spawn(["--tokenize_only", *args], rank, 2, port=port) for rank in (0, 1)])
    assert all(code == 0 for code, *_ in results), [err for _, _, err, _ in results]
    assert {prepared_dir(stdout) for _, stdout, _, _ in results} == {out}
    assert sum(err.count("[prepare] published") for _, _, err, _ in results) == 1
    assert "is damaged (" in results[0][2]
    rebuilt = json.loads((out / "manifest.json").read_text())
    assert rebuilt["build_id"] != manifest["build_id"] and rebuilt["files"] == manifest["files"]


def _slow_build(tmp_path, tokenizer_dir, cache, documents=40000):
    """Arguments of a build that is still running seconds after it starts: the HF tokenizer on one thread
    (~4x fastokens) over 40,000 documents."""
    big = write_jsonl(tmp_path / "big.jsonl", [{"text": t} for t in korean_documents(documents, seed=7)])
    return _common(big, tokenizer_dir, cache) + ["--dataset_num_proc", 1, "--dataset_batch_size", 200,
                                                 "--tokenizer_engine", "hf"]


def _wait_for_progress(cache: Path, builder) -> None:
    deadline = time.monotonic() + 120
    while not any('"docs"' in p.read_text() for p in cache.glob("*.heartbeat.*") if p.exists()):
        assert time.monotonic() < deadline and builder.poll() is None, "builder never got going"
        time.sleep(0.1)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGUSR1, signal.SIGINT])
def test_a_builder_stopped_by_a_signal_says_so_and_its_waiter_is_told(tmp_path, tokenizer_dir, signum):
    cache = tmp_path / "cache"
    args = _slow_build(tmp_path, tokenizer_dir, cache)
    port = free_port()
    builder, waiter = (spawn(["--tokenize_only", *args], rank, 2, port=port) for rank in (0, 1))
    _wait_for_progress(cache, builder)
    builder.send_signal(signum)
    (code, _, err, _), (waiter_code, _, waiter_err, _) = wait_all([builder, waiter], timeout=60)
    name = signal.Signals(signum).name
    assert code == 128 + signum, err
    assert re.search(rf"\[prepare\] {name} received: stopped preparing, removed the build dir \S+\.tmp-\S+, wrote "
                     rf"\S+\.failed so that waiting ranks stop too", err), err
    assert waiter_code != 0 and "rank 0 failed" in waiter_err
    assert (f"terminated by {name}" if signum != signal.SIGINT else "KeyboardInterrupt") in waiter_err, waiter_err
    assert not list(cache.glob("*.tmp-*")) and not [p for p in cache.iterdir() if p.is_dir()]
    assert not list(cache.glob("*.heartbeat.*"))


def test_a_waiter_stopped_by_sigusr1_says_so(tmp_path, tokenizer_dir):
    cache = tmp_path / "cache"
    args = _slow_build(tmp_path, tokenizer_dir, cache)
    port = free_port()
    builder, waiter = (spawn(["--tokenize_only", *args], rank, 2, port=port) for rank in (0, 1))
    _wait_for_progress(cache, builder)
    waiter.send_signal(signal.SIGUSR1)
    (code, _, err, _), = wait_all([waiter], timeout=60)
    builder.kill()
    builder.communicate()
    assert code == 128 + signal.SIGUSR1 and "[prepare] SIGUSR1 received while waiting for rank 0: stopped" in err, err


def test_a_rank_stopped_before_it_builds_or_waits_says_so(tmp_path, tokenizer_dir):
    """SIGUSR1 while a rank on another node still looks for rank 0's probe (RANKZERO_PROBE_S): no silent exit 138."""
    args = _common(write_jsonl(tmp_path / "c.jsonl", [{"text": "안녕하세요"}]), tokenizer_dir, tmp_path / "cache")
    rank = spawn(["--tokenize_only", *args], 1, 2, local_rank=0, local_world=1, node=1,
                 env={"RANKZERO_PROBE_S": "600"})  # no rank 0: it would look for the probe for 10 minutes
    _wait_until_catching(rank, signal.SIGUSR1)
    rank.send_signal(signal.SIGUSR1)
    (code, _, err, _), = wait_all([rank], timeout=60)
    assert code == 128 + signal.SIGUSR1, err
    assert "[prepare] SIGUSR1 received while looking for the prepared data: stopped" in err and "Traceback" not in err, err


def _clock_skew(tmp_path: Path, seconds: float) -> dict:
    """The environment of a process whose wall clock (time.time) is `seconds` off: a node with a skewed clock,
    or, seen from a waiter, a builder that started that much earlier."""
    site = tmp_path / f"skew{seconds:+.0f}"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        f"import time\n_time = time.time\ntime.time = lambda: _time() + {seconds}\n")
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
            "RANKZERO_STARTUP_GRACE_S": "5"}


@pytest.mark.parametrize("skewed", ["builder 120 s behind", "waiter 120 s ahead (started late)"])
def test_a_late_waiter_or_a_skewed_clock_still_waits_for_a_live_builder(tmp_path, tokenizer_dir, skewed):
    cache = tmp_path / "cache"
    args = _slow_build(tmp_path, tokenizer_dir, cache, documents=160000)  # outlasts the waiter's start and grace
    builder_env, waiter_env = ((_clock_skew(tmp_path, -120), {"RANKZERO_STARTUP_GRACE_S": "5"})
                               if skewed.startswith("builder") else
                               ({"RANKZERO_STARTUP_GRACE_S": "5"}, _clock_skew(tmp_path, 120)))
    port = free_port()
    builder = spawn(["--tokenize_only", *args], 0, 2, port=port, env=builder_env)
    _wait_for_progress(cache, builder)
    waiter = spawn(["--tokenize_only", *args], 1, 2, port=port, env=waiter_env)
    started = time.monotonic()
    results = wait_all([builder, waiter])
    assert all(code == 0 for code, *_ in results), results[1][2]
    assert results[1][3] - started > 5, "the build ended within the grace: the test proves nothing; make it longer"
    assert prepared_dir(results[0][1]) == prepared_dir(results[1][1])


def _wait_until_catching(process, signum) -> None:
    """Until `process` has a handler for `signum` (SigCgt in /proc): a rank is inside prepare_or_wait, which sets
    one for SIGUSR1 and nothing before it does."""
    status = Path(f"/proc/{process.pid}/status")
    if not status.exists():
        pytest.skip("needs /proc to see when a process is waiting")
    deadline = time.monotonic() + 120
    while True:
        caught = int(next(line for line in status.read_text().splitlines() if line.startswith("SigCgt:")).split()[1], 16)
        if caught >> (signum - 1) & 1:
            return
        assert time.monotonic() < deadline and process.poll() is None, "the rank never got to the prepare"
        time.sleep(0.1)


def test_a_cache_dir_removed_during_the_build_is_named_by_the_waiter(tmp_path, tokenizer_dir):
    import shutil

    cache = tmp_path / "cache"
    args = _slow_build(tmp_path, tokenizer_dir, cache, documents=160000)  # outlasts the waiter's start
    port = free_port()
    builder = spawn(["--tokenize_only", *args], 0, 2, port=port)
    _wait_for_progress(cache, builder)
    waiter = spawn(["--tokenize_only", *args], 1, 2, port=port)  # it sees the cache dir the moment it starts
    _wait_until_catching(waiter, signal.SIGUSR1)
    shutil.rmtree(cache, ignore_errors=True)
    (code, _, err, _), (builder_code, _, builder_err, _) = wait_all([waiter, builder])
    assert code != 0 and f"the cache dir {cache} was removed while" in err, err
    assert "never started" not in err
    assert builder_code != 0 and f"--cache_dir {cache} was removed while preparing the data" in builder_err, builder_err


def test_a_heartbeat_missing_for_a_moment_twice_is_no_death(tmp_path):
    """Another job's cleanup may unlink a live heartbeat (it is rewritten within a second): each gap is judged
    on its own, never from the first one's start."""
    import threading

    from rankzero.data.handoff import HEARTBEAT_STALE_S, wait_for_builder
    from rankzero.errors import BuilderFailed
    from rankzero.files import write_json_atomic
    from rankzero.runtime import Runtime

    heartbeat, failed = tmp_path / "fp.heartbeat.job", tmp_path / "fp.failed"
    stop = threading.Event()

    def builder():
        second = 2 * int(HEARTBEAT_STALE_S) + 6  # half-second beats: the second gap starts > STALE_S after the first
        for beat in range(1, 1000):
            if beat in (3, 4, 5, second, second + 1, second + 2):  # two 1.5 s gaps: longer than a poll, shorter than STALE_S
                heartbeat.unlink(missing_ok=True)
            else:
                write_json_atomic(heartbeat, {"run_id": "r", "beat": beat, "progress": {}})
            if beat == second + 6:
                write_json_atomic(failed, {"job": "job", "run_id": "r", "rank": 0, "error": "the planned end"})
            if stop.wait(0.5):
                return

    thread = threading.Thread(target=builder, daemon=True)
    thread.start()
    waiter = Runtime(rank=1, world_size=2, local_rank=1, local_world_size=2, node_rank=0, hostname="n0")
    try:
        with pytest.raises(BuilderFailed, match="the planned end"):
            wait_for_builder(600, waiter, tmp_path, "fp", "job", "rank 0")
    finally:
        stop.set()
        thread.join()


def test_an_input_that_grows_during_the_build_is_not_published(tmp_path, tokenizer_dir):
    cache = tmp_path / "cache"
    args = _slow_build(tmp_path, tokenizer_dir, cache)
    builder = spawn(["--tokenize_only", *args], 0, 1)
    _wait_for_progress(cache, builder)
    with open(tmp_path / "big.jsonl", "a", encoding="utf-8") as handle:  # a download or copy still running
        handle.write(json.dumps({"text": "늦게 도착한 문서"}, ensure_ascii=False) + "\n")
    (code, _, err, _), = wait_all([builder])
    assert code != 0 and "input files changed while they were being prepared" in err, err
    assert re.search(r"big\.jsonl went from [\d,]+ to [\d,]+ bytes", err), err
    assert not [p for p in cache.iterdir() if p.is_dir()], "nothing published, no build dir left"
