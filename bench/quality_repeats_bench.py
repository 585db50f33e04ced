"""What `--quality_filter ko` costs on real Korean as it is and on the same text with a crawl's exact copies (issue 48),
paired against `--quality_filter none`, and whether another checkout gives the same output.

    python bench/quality_repeats_bench.py --rounds 3                           # ko_real_dev, 4 copies
    python bench/quality_repeats_bench.py --rounds 3 --against ../base-1e7f917 # and that checkout's filtered runs
    python bench/quality_repeats_bench.py --per_file --rounds 3                # each file (genre) alone too
    python bench/quality_repeats_bench.py --quality_config kiwi_reads_all.yaml # `kiwi_cascade: false`: Kiwi reads
                                                                               # every document, as on text unlike these

Corpora (bench/prep_setup.given_corpus, written into --workdir): the given files joined (`unique`) and every one of
their documents `--copies` times in a seeded shuffled order (`copies`: 4 copies = 75% exact copies, a crawl's shape).
Every run is `train.py --tokenize_only --packing --max_seq_length 2048 --quality_filter ko|none` with a fresh cache, a
process of its own, timed end to end with the CPU seconds of its whole process tree (bench/_measure.py). Runs go in
rounds, every run once per round, the order reversed every other round; each ratio is the median of its per-round
ratios, so the machine's drift hits both sides. Reported:
- copies / unique, CPU and wall, under `ko` (issue 48 asks ≤ 1.3x) and under `none`;
- the filter's cost: CPU(ko) − CPU(none) of the same corpus (median of the per-round differences; Kiwi's start-up
  included), and the manifest's quality-stage seconds (`encode_stage_seconds_summed_over_workers.quality`, wall);
- with --against, that checkout's `ko` runs beside this one's, and whether both give the same manifest counts and the
  same Arrow bytes (the output must not change).
The tokenizer is the one bench/prep_setup.py trains on the unique corpus (or --tokenizer).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

from _measure import compile_bytecode, machine_info, run_measured, tool_env  # noqa: E402
from prep_setup import given_corpus, prepare_tokenizer  # noqa: E402

DEV = REPO.parent / "shared" / "corpora" / "ko_real_dev"
VOLATILE = ("timings", "throughput", "built_at", "build_id", "builder_threads", "files", "versions", "fingerprint",
            "sources", "prepared_at")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, nargs="+", default=sorted(DEV.glob("*.jsonl")),
                        help="JSONL files of {text} (default: ko_real_dev's)")
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--against", type=Path, help="another checkout whose filtered runs to pair and compare")
    parser.add_argument("--per_file", action="store_true", help="also each --corpus file alone (ko and none)")
    parser.add_argument("--quality_config", type=Path, help="YAML thresholds for the `ko` runs (train.py's flag)")
    parser.add_argument("--tokenizer", type=Path, default=None)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "rankzero-quality-repeats")
    parser.add_argument("--timeout_s", type=float, default=3600)
    args = parser.parse_args()
    problems = [f"--corpus {path}: no such file" for path in args.corpus if not path.is_file()]
    if args.against and not (args.against / "train.py").is_file():
        problems.append(f"--against {args.against}: no train.py there (give a checkout of rankzero)")
    if args.quality_config and not args.quality_config.is_file():
        problems.append(f"--quality_config {args.quality_config}: no such file")
    if args.copies < 2:
        problems.append(f"--copies {args.copies}: give 2 or more")
    if problems:
        parser.error("; ".join(problems))
    return args


def run(checkout: Path, corpus: Path, tokenizer: Path, quality: str, args: argparse.Namespace) -> dict:
    """One prepare in a fresh cache: wall, CPU of the tree, the manifest less what differs run to run, its quality
    seconds, and a hash of the Arrow files."""
    scratch = Path(tempfile.mkdtemp(prefix="run-", dir=args.workdir))
    environment = tool_env()
    if checkout != REPO:
        environment.pop("PYTHONPATH", None)  # its own rankzero, from its directory
    command = [sys.executable, "train.py", "--tokenize_only", "--dataset", str(corpus), "--tokenizer_path",
               str(tokenizer), "--max_seq_length", "2048", "--packing", "--quality_filter", quality,
               "--cache_dir", str(scratch / "cache")]
    if quality == "ko" and args.quality_config:
        command += ["--quality_config", str(args.quality_config.resolve())]
    try:
        result = run_measured(command, env=environment, cwd=str(checkout), timeout_s=args.timeout_s)
        if result["returncode"] != 0:
            raise SystemExit(f"{' '.join(command)} (in {checkout}) failed:\n{result['stderr'][-3000:]}")
        prepared = Path(result["stdout"].strip().splitlines()[-1].removeprefix("prepared: "))
        manifest = json.loads((prepared / "manifest.json").read_text(encoding="utf-8"))
        digest = hashlib.sha256()
        for path in sorted(prepared.rglob("*.arrow")):
            digest.update(str(path.relative_to(prepared)).encode() + path.read_bytes())
        stage_seconds = manifest["timings"].get("encode_stage_seconds_summed_over_workers", {})
        counts = {key: value for key, value in manifest.items() if key not in VOLATILE}
        return {"wall_s": result["wall_s"], "cpu_s": result["cpu_s"], "quality_s": stage_seconds.get("quality", 0.0),
                "counts": json.dumps(counts), "arrow": digest.hexdigest(), "docs_in": manifest["docs_in"],
                "docs_kept": manifest["docs_kept"], "dropped": manifest["dropped"]}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def median_ratio(runs: dict, top: str, bottom: str, key: str) -> tuple[float, list[float]]:
    ratios = [a[key] / b[key] for a, b in zip(runs[top], runs[bottom])]
    return statistics.median(ratios), ratios


def main() -> None:
    args = parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    unique, unique_stats = given_corpus(args.workdir, args.corpus, 1)
    copies, _ = given_corpus(args.workdir, args.corpus, args.copies, seed=0)
    args.seed, args.size_mb = 0, None  # what prepare_tokenizer reads besides --corpus, --tokenizer and --workdir
    tokenizer, tokenizer_note = prepare_tokenizer(args, unique)
    corpora = {"unique": unique, "copies": copies}
    if args.per_file:
        corpora.update({path.stem: path.resolve() for path in args.corpus})
    plan = [(name, quality, "here") for name in corpora for quality in ("ko", "none")]
    if args.against:
        plan += [(name, "ko", "against") for name in ("unique", "copies")]
    checkouts = {"here": REPO, "against": args.against.resolve() if args.against else None}
    runs: dict[tuple, list[dict]] = {key: [] for key in plan}
    compile_bytecode(*(checkout for checkout in checkouts.values() if checkout))
    loads = []
    for round_index in range(args.rounds):
        loads.append(os.getloadavg()[0])
        for key in plan if round_index % 2 == 0 else plan[::-1]:
            name, quality, where = key
            result = run(checkouts[where], corpora[name], tokenizer, quality, args)
            runs[key].append(result)
            print(f"round {round_index + 1}: {name} {quality} {where}: {result['wall_s']:.1f} s, "
                  f"{result['cpu_s']:.1f} CPU-s, quality stage {result['quality_s']:.1f} s", file=sys.stderr)
    report(args, runs, corpora, unique_stats, tokenizer_note, loads)


def report(args, runs: dict, corpora: dict, unique_stats: dict, tokenizer_note: str, loads: list[float]) -> None:
    machine = ", ".join(f"{key} {value}" for key, value in machine_info().items())
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {machine}; 1-minute load at each "
          f"round's start {', '.join(f'{load:.1f}' for load in loads)}; tokenizer: {tokenizer_note}")
    print(f"`python bench/quality_repeats_bench.py --rounds {args.rounds} --copies {args.copies}"
          + (f" --against {args.against}" if args.against else "") + (" --per_file" if args.per_file else "")
          + (f" --quality_config {args.quality_config}" if args.quality_config else "") + "`\n")
    print("| corpus | MB | docs in / kept | filter | wall s | CPU s | CPU s, ko − none | the quality stage's wall s |"
          "\n|---|---:|---:|---|---:|---:|---:|---:|")
    for name, path in corpora.items():
        size = path.stat().st_size
        for quality in ("ko", "none"):
            done = runs[(name, quality, "here")]
            wall, cpu = (statistics.median(r[key] for r in done) for key in ("wall_s", "cpu_s"))
            row = (f"| {name} | {size / 1e6:.2f} | {done[0]['docs_in']:,} / {done[0]['docs_kept']:,} | {quality} | "
                   f"{wall:.1f} | {cpu:.1f} |")
            if quality == "ko":
                extra = statistics.median(a["cpu_s"] - b["cpu_s"] for a, b in zip(done, runs[(name, "none", "here")]))
                stage = statistics.median(r["quality_s"] for r in done)
                row += f" {extra:.1f} | {stage:.1f} |"
            else:
                row += " | |"
            print(row)
    print()
    for quality in ("ko", "none"):
        for key in ("cpu_s", "wall_s"):
            ratio, each = median_ratio({k[0]: v for k, v in runs.items() if k[1:] == (quality, "here")}, "copies",
                                       "unique", key)
            print(f"- copies / unique, `--quality_filter {quality}`, {key[:-2]}: **{ratio:.2f}x** "
                  f"({', '.join(f'{r:.2f}' for r in each)})")
    same = all(r["counts"] == runs[("copies", "ko", "here")][0]["counts"] for r in runs[("copies", "ko", "here")])
    print(f"- the copies corpus under ko, every round the same manifest counts: {same}")
    if args.against:
        ratio, each = median_ratio({k[0]: v for k, v in runs.items() if k[1:] == ("ko", "against")}, "copies", "unique",
                                   "cpu_s")
        print(f"- copies / unique at {args.against}, `--quality_filter ko`, cpu: **{ratio:.2f}x** "
              f"({', '.join(f'{r:.2f}' for r in each)})")
        for name in ("unique", "copies"):
            here, there = runs[(name, "ko", "here")], runs[(name, "ko", "against")]
            ratio, each = median_ratio({"here": here, "there": there}, "here", "there", "cpu_s")
            same_counts, same_rows = (here[0][key] == there[0][key] for key in ("counts", "arrow"))
            print(f"- {name}, ko, this checkout / {args.against}, CPU: **{ratio:.2f}x** "
                  f"({', '.join(f'{r:.2f}' for r in each)}); the same manifest counts: {same_counts}, the same Arrow "
                  f"bytes: {same_rows}")
    print(f"- dropped on the copies corpus under ko: {runs[('copies', 'ko', 'here')][0]['dropped']}")


if __name__ == "__main__":
    main()
