"""Handoff timings: a cached re-run, and how fast a waiting rank notices a failed or a killed builder.

    python bench/handoff_bench.py                 # 3 repeats each, 20 MiB generated corpus
    python bench/handoff_bench.py --size_mb 5 --repeats 1
    python bench/handoff_bench.py --cached_gb 1 --repeats 5   # the checks on a 1 GiB published dataset
    python bench/handoff_bench.py --space         # prepared bytes per input byte (the free-space estimate)

Two processes are started as a cluster scheduler would (RANK/WORLD_SIZE/LOCAL_RANK/MASTER_*), both
running `train.py --tokenize_only`. Measured, median over repeats:
  cached    the preparation phase ("data ready in X s", the slower rank) and the whole process, when the
            dataset is already published — baseline: the same command building it from scratch
  failed    rank 1's exit minus rank 0's exit, rank 0 failing on a malformed line near the end
  killed    rank 1's exit minus the moment rank 0 was sent SIGKILL mid-build

--cached_gb N fakes, in seconds, a published dataset of N GiB (random ids in save_to_disk shards, a
manifest with real checksums) under the fingerprint a 1 GiB input corpus (16 files) gets, for each
fingerprint mode (--fingerprint_content stat/sample/full), then times the cached re-run of the same
2-rank job in paired rounds (the modes' order rotates each round): with the cheap checks (the
default: the baseline), with --verify_data (every byte checksummed), and with content sampling.
It also times the checks in-process, page cache hot and cold (posix_fadvise DONTNEED on our own
files only), and xxh3 against blake2b over the same files.

--space prepares the real Korean dev corpus (shared/corpora/ko_real_dev) with tokenizers of 1k, 4k
and 16k tokens and reports input bytes per token and prepared bytes per input byte.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_pair(args: list[str]) -> list[subprocess.Popen]:
    port = free_port()
    processes = []
    for rank in (0, 1):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": "2",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "PYTHONUNBUFFERED": "1"}
        processes.append(subprocess.Popen([sys.executable, str(REPO / "train.py"), "--tokenize_only", *args], env=env,
                                          cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return processes


def wait_all(processes: list[subprocess.Popen]) -> list[tuple[int, str, float]]:
    ended: dict[int, float] = {}
    while len(ended) < len(processes):
        for index, process in enumerate(processes):
            if index not in ended and process.poll() is not None:
                ended[index] = time.monotonic()
        time.sleep(0.01)
    return [(p.returncode, p.communicate()[1], ended[i]) for i, p in enumerate(processes)]


def timed_pair(args: list[str], cached: bool = False) -> tuple[float, float]:
    started = time.monotonic()
    results = wait_all(start_pair(args))
    assert all(code == 0 for code, _, _ in results), [err[-2000:] for _, err, _ in results]
    if cached:
        assert not any("[prepare] published" in err or "damaged" in err for _, err, _ in results), results[0][1][-2000:]
    ready = max(float(m) for _, err, _ in results for m in re.findall(r"data ready in ([\d.]+) s", err))
    return ready, max(end for _, _, end in results) - started


def train_tokenizer_on_samples(path: Path, vocab: int) -> None:
    from rankzero.tokenizer_trainer import train_tokenizer

    texts = [json.loads(line)["text"] for line in (REPO / "data/sample/ko.jsonl").read_text().splitlines()]
    train_tokenizer(texts, vocab, path)


# ---------------------------------------------------------------------------------------------
# --cached_gb: the checks on a large published dataset

MODES = {"stat": [], "verify_data": ["--verify_data"], "sample": ["--fingerprint_content", "sample"],
         "full": ["--fingerprint_content", "full"]}


def make_input(work: Path, total_bytes: int, files: int) -> Path:
    """`files` JSONL files of generated Korean, total_bytes in all (one generated block, repeated)."""
    block = work / "block.jsonl"
    subprocess.run([sys.executable, str(REPO / "scripts/make_corpus.py"), "--size_mb", "8", "--output", str(block)],
                   check=True, capture_output=True)
    data = block.read_bytes()
    directory = work / "input"
    directory.mkdir()
    for index in range(files):
        with open(directory / f"part-{index:03d}.jsonl", "wb") as handle:
            for _ in range(max(1, math.ceil(total_bytes / files / len(data)))):
                handle.write(data)
    return directory


def make_shards(work: Path, template: Path, total_bytes: int, seq: int) -> list[Path]:
    """save_to_disk shards of random ids, ~256 MiB each, with the schema (and metadata) of a real shard."""
    import numpy as np
    import pyarrow as pa

    with pa.OSFile(str(next(template.glob("data-*.arrow")))) as handle:
        schema = pa.ipc.open_stream(handle).schema
    rng = np.random.default_rng(0)
    rows_per_batch = 1000
    batch_bytes = rows_per_batch * seq * 4
    paths = []
    for index in range(max(1, round(total_bytes / (256 << 20)))):
        path = work / f"shard-{index}.arrow"
        with pa.OSFile(str(path), "wb") as handle, pa.ipc.new_stream(handle, schema) as writer:
            for _ in range(max(1, (256 << 20) // batch_bytes)):
                offsets = pa.array(np.arange(0, (rows_per_batch + 1) * seq, seq, dtype=np.int32))
                ids = pa.array(rng.integers(0, 4000, rows_per_batch * seq, dtype=np.int32))
                lengths = pa.array(np.full(rows_per_batch, seq, dtype=np.int32))
                columns = [pa.ListArray.from_arrays(offsets, ids),
                           pa.ListArray.from_arrays(pa.array(np.arange(rows_per_batch + 1, dtype=np.int32)), lengths)]
                writer.write_batch(pa.RecordBatch.from_arrays(columns, schema=schema))
        paths.append(path)
    return paths


def fake_published(cache: Path, flags: list[str], template: Path, shards: list[Path]) -> Path:
    """Publish `shards` (hard links) under the fingerprint train.py computes for `flags`, as a build would."""
    import pyarrow as pa

    from rankzero.args import parse_args
    from rankzero.data import published
    from rankzero.data.plan import make_plan

    args = parse_args(["--tokenize_only", *flags])
    plan = make_plan(args.sources, args.stage, args.packing, args.dedup, args.workers, args.seed)
    inputs, fingerprint = plan.inputs, plan.fingerprint
    build = cache / f"{fingerprint}.tmp-bench"
    build.mkdir(parents=True)
    names = [f"data-{i:05d}-of-{len(shards):05d}.arrow" for i in range(len(shards))]
    rows = 0
    for shard, name in zip(shards, names):
        os.link(shard, build / name)
        with pa.OSFile(str(shard)) as handle:
            rows += sum(len(batch) for batch in pa.ipc.open_stream(handle))
    state = json.loads((template / "state.json").read_text())
    state.update({"_data_files": [{"filename": name} for name in names], "_fingerprint": fingerprint})
    (build / "state.json").write_text(json.dumps(state, indent=2, sort_keys=True))
    shutil.copyfile(template / "dataset_info.json", build / "dataset_info.json")
    manifest = json.loads((template / "manifest.json").read_text())
    manifest.update({"fingerprint": fingerprint, "fingerprint_inputs": inputs, "sequences": rows, "shards": len(names),
                     "build_id": f"bench-{fingerprint}", "files": published.file_table(build)})
    (build / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str))
    os.replace(build, cache / fingerprint)
    return cache / fingerprint


def drop_from_page_cache(paths) -> None:
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def timed(function) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def cached_checks(work: Path, gib: float, repeats: int) -> None:
    import hashlib

    import xxhash

    from rankzero.data import published as checks

    seq = 512
    inputs = make_input(work, int(gib * (1 << 30)), files=16)
    train_tokenizer_on_samples(work / "tok", 4000)
    small = work / "small.jsonl"
    subprocess.run([sys.executable, str(REPO / "scripts/make_corpus.py"), "--size_mb", "1", "--output", str(small)],
                   check=True, capture_output=True)
    common = ["--tokenizer_path", str(work / "tok"), "--max_seq_length", str(seq), "--cache_dir", str(work / "cache")]
    built = subprocess.run([sys.executable, str(REPO / "train.py"), "--tokenize_only", "--dataset", str(small), *common],
                           check=True, capture_output=True, text=True)
    template = Path(built.stdout.split("prepared: ")[-1].strip())
    shards = make_shards(work, template, int(gib * (1 << 30)), seq)
    flags = {mode: ["--dataset", str(inputs), *common, *extra] for mode, extra in MODES.items()}
    published = {mode: fake_published(work / "cache", flags[mode], template, shards) for mode in ("stat", "sample", "full")}
    published["verify_data"] = published["stat"]
    data_bytes = sum(p.stat().st_size for p in published["stat"].iterdir())
    input_files = sorted(inputs.iterdir())
    print(f"published dataset {data_bytes / 2**30:.2f} GiB in {len(shards)} shards; input "
          f"{sum(p.stat().st_size for p in input_files) / 2**30:.2f} GiB in {len(input_files)} files", flush=True)

    figures: dict[str, list[float]] = {}
    for repeat in range(repeats):
        order = list(MODES)[repeat % len(MODES):] + list(MODES)[:repeat % len(MODES)]
        for mode in order:
            ready, total = timed_pair(flags[mode], cached=True)
            figures.setdefault(f"{mode}_ready", []).append(ready)
            figures.setdefault(f"{mode}_total", []).append(total)
        for mode in MODES:
            figures.setdefault(f"{mode}_ratio", []).append(figures[f"{mode}_ready"][-1] / figures["stat_ready"][-1])

        files = [p for p in published["stat"].iterdir()]
        final = published["stat"]
        for name, digest in (("xxh3_128", xxhash.xxh3_128), ("blake2b", lambda: hashlib.blake2b(digest_size=16))):
            def run() -> None:
                for path in files:
                    state = digest()
                    with open(path, "rb") as handle:
                        while block := handle.read(8 << 20):
                            state.update(block)
            run()  # every page in the cache first: these are the hash functions' figures, not the disk's
            figures.setdefault(f"{name}_hot", []).append(timed(run))
        figures.setdefault("verify_cheap_hot", []).append(timed(lambda: checks.verify_published(final)))
        figures.setdefault("verify_deep_hot", []).append(timed(lambda: checks.verify_published(final, deep=True)))
        drop_from_page_cache(files)
        figures.setdefault("verify_cheap_cold", []).append(timed(lambda: checks.verify_published(final)))
        drop_from_page_cache(files)
        figures.setdefault("verify_deep_cold", []).append(timed(lambda: checks.verify_published(final, deep=True)))
        for mode in ("sample", "full"):
            from rankzero.data.inputs.specs import _file_identity

            drop_from_page_cache(input_files)
            figures.setdefault(f"fingerprint_{mode}_cold", []).append(
                timed(lambda: [_file_identity(str(p), mode) for p in input_files]))
            figures.setdefault(f"fingerprint_{mode}_hot", []).append(
                timed(lambda: [_file_identity(str(p), mode) for p in input_files]))
    print(json.dumps({k: round(statistics.median(v), 3) for k, v in figures.items()}))
    print(f"\n| cached re-run, 2 ranks, {data_bytes / 2**30:.2f} GiB published | data ready (slower rank) s | whole job s "
          "| data ready / baseline |\n|---|---:|---:|---:|")
    labels = {"stat": "cheap checks (default) — the baseline",
              "verify_data": "--verify_data (every byte checksummed)",
              "sample": "--fingerprint_content sample (+ cheap checks)",
              "full": "--fingerprint_content full (+ cheap checks)"}
    for mode, label in labels.items():
        print(f"| {label} | {statistics.median(figures[mode + '_ready']):.2f} | "
              f"{statistics.median(figures[mode + '_total']):.2f} | {statistics.median(figures[mode + '_ratio']):.2f}x |")
    print("\n| in-process | page cache hot s | cold s |\n|---|---:|---:|")
    for key, label in (("verify_cheap", "verify_published, cheap"), ("verify_deep", "verify_published, deep"),
                       ("fingerprint_sample", "fingerprint identity, 16 input files, sample"),
                       ("fingerprint_full", "fingerprint identity, 16 input files, full")):
        hot, cold = statistics.median(figures[key + "_hot"]), statistics.median(figures[key + "_cold"])
        print(f"| {label} | {hot:.3f} | {cold:.3f} |")
    for name in ("xxh3_128", "blake2b"):
        hot = statistics.median(figures[name + "_hot"])
        print(f"| {name} over the dataset files | {hot:.3f} ({data_bytes / 2**30 / hot:.1f} GiB/s) | — |")


# ---------------------------------------------------------------------------------------------
# --space: how much a build writes per input byte


def space_ratios(work: Path) -> None:
    corpus = REPO.parent / "shared" / "corpora" / "ko_real_dev"  # real Korean beside the checkout, read in place
    if not corpus.is_dir():
        raise SystemExit(f"--space needs the real Korean development corpus at {corpus}")
    print("| tokenizer vocab | input MB | tokens | input bytes per token | prepared bytes per input byte |\n"
          "|---:|---:|---:|---:|---:|")
    for vocab in (1000, 4000, 16000):
        train_tokenizer_on_samples(work / f"tok{vocab}", vocab)
        result = subprocess.run([sys.executable, str(REPO / "train.py"), "--tokenize_only", "--dataset", str(corpus),
                                 "--tokenizer_path", str(work / f"tok{vocab}"), "--max_seq_length", "512",
                                 "--cache_dir", str(work / "space")], check=True, capture_output=True, text=True)
        out = Path(result.stdout.split("prepared: ")[-1].strip())
        manifest = json.loads((out / "manifest.json").read_text())
        written = sum(p.stat().st_size for p in out.iterdir())
        input_bytes = sum(p.stat().st_size for p in corpus.glob("*.jsonl"))
        print(f"| {vocab} | {input_bytes / 1e6:.2f} | {manifest['tokens']:,} | {input_bytes / manifest['tokens']:.2f} | "
              f"{written / input_bytes:.2f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size_mb", type=float, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cached_gb", type=float, default=None)
    parser.add_argument("--space", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    work = Path(tempfile.mkdtemp(prefix="handoff-bench-"))
    if args.cached_gb or args.space:
        try:
            cached_checks(work, args.cached_gb, args.repeats) if args.cached_gb else space_ratios(work)
            return 0
        finally:
            shutil.rmtree(work, ignore_errors=True)
    try:
        corpus = work / "corpus.jsonl"
        subprocess.run([sys.executable, str(REPO / "scripts/make_corpus.py"), "--size_mb", str(args.size_mb),
                        "--output", str(corpus)], check=True, capture_output=True)
        train_tokenizer_on_samples(work / "tok", 4000)
        common = ["--dataset", str(corpus), "--tokenizer_path", str(work / "tok"), "--max_seq_length", "512"]
        figures: dict[str, list[float]] = {k: [] for k in ("build_ready", "build_total", "cached_ready", "cached_total",
                                                           "failed_notice", "killed_notice")}
        lines = corpus.read_text(encoding="utf-8").splitlines()
        lines[int(len(lines) * 0.9)] = "{broken"
        bad = work / "bad.jsonl"
        bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
        for repeat in range(args.repeats):
            cache = work / f"cache{repeat}"
            ready, total = timed_pair(common + ["--cache_dir", str(cache)])
            figures["build_ready"].append(ready)
            figures["build_total"].append(total)
            ready, total = timed_pair(common + ["--cache_dir", str(cache)], cached=True)
            figures["cached_ready"].append(ready)
            figures["cached_total"].append(total)

            (code0, err0, end0), (code1, err1, end1) = wait_all(start_pair(
                ["--dataset", str(bad), *common[2:], "--cache_dir", str(work / f"bad{repeat}")]))
            assert code0 != 0 and code1 != 0 and "rank 0 failed" in err1, err1[-2000:]
            figures["failed_notice"].append(end1 - end0)

            kill_cache = work / f"kill{repeat}"
            builder, waiter = start_pair(common + ["--cache_dir", str(kill_cache), "--dataset_num_proc", "1"])
            while not any('"docs"' in p.read_text() for p in kill_cache.glob("*.heartbeat.*") if p.exists()):
                time.sleep(0.05)
            builder.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            (code, err, end), = wait_all([waiter])
            builder.communicate()
            assert code != 0 and "died while preparing" in err, err[-2000:]
            figures["killed_notice"].append(end - killed)
        print(json.dumps({k: round(statistics.median(v), 2) for k, v in figures.items()}))
        print("\n| what | median s |\n|---|---:|")
        for key, label in (("build_ready", "preparation phase, building (2 ranks, the slower)"),
                           ("build_total", "whole job, building"),
                           ("cached_ready", "preparation phase, cached re-run (the slower rank)"),
                           ("cached_total", "whole job, cached re-run (interpreter start included)"),
                           ("failed_notice", "rank 1 exits after rank 0 failed (malformed line)"),
                           ("killed_notice", "rank 1 exits after rank 0 got SIGKILL mid-build")):
            print(f"| {label} | {statistics.median(figures[key]):.2f} |")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
