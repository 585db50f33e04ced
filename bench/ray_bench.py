"""The Ray engine against the local engine on one machine, and what that says about a cluster.

    python bench/ray_bench.py                          # 50 MiB corpus, 3 paired rounds, no filter
    python bench/ray_bench.py --quality_filter ko      # the Kiwi-filtered prepare (slow: minutes a run)
    python bench/ray_bench.py --size_mb 5 --runs 1     # smoke run

Each round runs, back to back, in fresh processes over the same generated corpus and tokenizer as
bench/prep_bench.py, each with a fresh cache:
  (local) train.py --tokenize_only ... --prep_engine local
  (ray)   train.py --tokenize_only ... --prep_engine ray   (a local Ray cluster started by the run)
Wall time is whole-process; the Ray run's manifest splits it into cluster start-up, the task phases,
cluster shutdown and the driver's share. One machine can only show the overhead Ray adds; the
scaling estimate at the end projects 1 TB on N nodes from the measured per-CPU cost of each stage
(the summed worker seconds in the manifest), stating its assumptions.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

from _measure import machine_info, run_measured  # noqa: E402
from prep_bench import make_corpus, prepare_tokenizer  # noqa: E402

ENGINES = ("local", "ray")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size_mb", type=float, default=50, help="corpus size in MiB")
    parser.add_argument("--runs", type=int, default=3, help="paired rounds")
    parser.add_argument("--quality_filter", default="none", choices=["none", "ko"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tokenizer", type=Path, default=None, help="HF tokenizer dir (default: as prep_bench)")
    parser.add_argument("--workdir", type=Path, default=BENCH / "out" / "prep")
    parser.add_argument("--out", type=Path, default=None, help="write all results as JSON here")
    parser.add_argument("--cores_per_node", type=int, default=64, help="for the scaling estimate")
    args = parser.parse_args()
    if args.size_mb <= 0 or args.runs < 1:
        parser.error("--size_mb must be positive and --runs at least 1")
    return args


def run_once(engine: str, corpus: Path, tokenizer: Path, args, *extra: str) -> dict:
    scratch = Path(tempfile.mkdtemp(prefix=f"ray-bench-{engine}-", dir=args.workdir))
    try:
        cmd = [sys.executable, "train.py", "--tokenize_only", "--dataset", str(corpus), "--tokenizer_path",
               str(tokenizer), "--max_seq_length", "2048", "--cache_dir", str(scratch / "cache"),
               "--prep_engine", engine, "--quality_filter", args.quality_filter, *extra]
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # (ray) starts its own local cluster
        result = run_measured(cmd, env=env, cwd=str(REPO), timeout_s=7200)
        lines = result["stdout"].strip().splitlines()
        if result["returncode"] != 0 or not lines or not lines[-1].startswith("prepared: "):
            raise SystemExit(f"({engine}) failed (exit {result['returncode']}):\n{result['stderr'][-3000:]}")
        manifest = json.loads((Path(lines[-1][len("prepared: "):]) / "manifest.json").read_text())
        print(f"[{engine}] {result['wall_s']:.1f} s, peak PSS {result['peak_pss_mb']:.0f} MB", file=sys.stderr)
        return {"wall_s": result["wall_s"], "peak_pss_mb": result["peak_pss_mb"], "timings": manifest["timings"],
                "sequences": manifest["sequences"], "tokens": manifest["tokens"], "docs_kept": manifest["docs_kept"],
                "bytes_in": manifest["bytes_in"], "prep_engine": manifest.get("prep_engine")}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def scaling_estimate(single: dict, cores_per_node: int, two_pass: bool) -> list[str]:
    """Project 1 TB on N nodes from a one-worker local run, where each stage's seconds are CPU seconds.

    Assumes the stages scale with cores (Ray tasks share nothing but the filesystem), one actor per core
    (two per Kiwi actor), and a filesystem that keeps up; adds what does not scale: the cluster start,
    the driver's dedup (np.unique over 8-byte hashes, ~0.2 µs per document here) and the tails.
    """
    gb = single["bytes_in"] / 1e9
    per_gb = {stage: seconds / gb for stage, seconds in
              single["timings"]["encode_stage_seconds_summed_over_workers"].items()}
    total = sum(per_gb.values())
    documents_per_tb = single["docs_kept"] / gb * 1000
    tokens_bytes_per_tb = single["tokens"] * 4 / gb * 1000 / 1e12  # int32 ids written per TB of input
    lines = ["| stage (1 worker, 1 core) | CPU-s per GB | CPU-hours per TB |", "|---|---:|---:|"]
    for stage, value in per_gb.items():
        lines.append(f"| {stage} | {value:.1f} | {value * 1000 / 3600:.1f} |")
    lines.append(f"| all stages | {total:.1f} | {total * 1000 / 3600:.1f} |")
    writes = tokens_bytes_per_tb * (2 if two_pass else 1)
    lines += ["", f"1 TB ≈ {documents_per_tb / 1e6:,.0f} M documents (this corpus's density), {writes:.2f} TB of ids "
              f"written ({'staged, then packed' if two_pass else 'one pass'}); driver dedup ≈ "
              f"{documents_per_tb * 16 / 1e9:.1f} GB of RAM." if two_pass else
              f"1 TB ≈ {documents_per_tb / 1e6:,.0f} M documents; {writes:.2f} TB of ids written (one pass).", "",
              f"| nodes x {cores_per_node} cores | hours for 1 TB | filesystem read + write needed |", "|---|---:|---:|"]
    for nodes in (1, 4, 16, 64):
        seconds = total * 1000 / (nodes * cores_per_node) + 30  # + cluster start and the driver's share
        lines.append(f"| {nodes} | {seconds / 3600:.2f} | {(1 + writes) * 1e3 / seconds:.2f} GB/s |")
    return lines


def main() -> None:
    args = parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    corpus, corpus_stats = make_corpus(args.workdir, args.size_mb, args.seed)
    tokenizer, description = prepare_tokenizer(args, corpus)
    runs = {engine: [] for engine in ENGINES}
    for _ in range(args.runs):
        for engine in ENGINES:
            runs[engine].append(run_once(engine, corpus, tokenizer, args))
    # The per-CPU cost of each stage: one worker, one Rust thread, so stage seconds are CPU seconds.
    single = run_once("local", corpus, tokenizer, args, "--dataset_num_proc", "1")
    ratios = [r["wall_s"] / lo["wall_s"] for lo, r in zip(runs["local"], runs["ray"])]
    report = {"date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"), "machine": machine_info(),
              "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                       text=True).stdout.strip(),
              "size_mb": args.size_mb, "quality_filter": args.quality_filter, "tokenizer": description,
              "corpus": corpus_stats, "runs": runs, "one_worker": single, "ray_over_local_per_round": ratios}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2), encoding="utf-8")
    machine = report["machine"]
    print(f"### Ray engine vs local engine — {report['date']}\n")
    print(f"- Machine: {machine['cpu']}, {machine['cores']} usable cores, {machine['ram_gb']} GiB RAM; commit "
          f"{report['commit']}; corpus {args.size_mb:g} MiB (`scripts/make_corpus.py`), --quality_filter "
          f"{args.quality_filter}; {args.runs} paired round(s), medians\n")
    print("| engine | wall s | peak PSS MB | setup | Ray start | tasks (encode / pack) | Ray stop | driver write |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for engine in ENGINES:
        entries = runs[engine]
        timing = {key: statistics.median(r["timings"].get(key, 0.0) for r in entries)
                  for key in ("setup_s", "ray_start_s", "encode_s", "pack_s", "ray_stop_s", "shuffle_write_s")}
        print(f"| {engine} | {statistics.median(r['wall_s'] for r in entries):.1f} | "
              f"{statistics.median(r['peak_pss_mb'] for r in entries):.0f} | {timing['setup_s']:.2f} | "
              f"{timing['ray_start_s']:.2f} | {timing['encode_s']:.2f} / {timing['pack_s']:.2f} | "
              f"{timing['ray_stop_s']:.2f} | {timing['shuffle_write_s']:.2f} |")
    print(f"\nray / local wall time: {statistics.median(ratios):.2f} (per round: "
          f"{', '.join(f'{r:.2f}' for r in ratios)}); sequences equal: "
          f"{len({r['sequences'] for rs in runs.values() for r in rs}) == 1}\n")
    print("\n".join(scaling_estimate(single, args.cores_per_node, args.quality_filter != "none")))


if __name__ == "__main__":
    main()
