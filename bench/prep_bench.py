"""Data-preparation benchmark: rankzero against run_clm.py's recipe, LitData, datatrove and the bare tokenizers.

    python bench/prep_bench.py                                  # 50 MiB corpus, every run, 4x scale check
    python bench/prep_bench.py --size_mb 5 --runs 1 --scale 1   # smoke run
    python bench/prep_bench.py --only a,b,c --runs 3 --out bench/out/prep.json
    python bench/prep_bench.py --only a,an,b,l,dt --runs 3 --scale 1 \
        --litdata_python /work/peers/litdata/bin/python --datatrove_python /work/peers/datatrove/bin/python
    python bench/prep_bench.py --corpus ko.jsonl more.jsonl ... # a given corpus instead of the generated one
    python bench/prep_bench.py --corpus ko.jsonl --copies 4 ...  # the same with 75% exact copies, as crawls have

Every run is a separate process over the SAME generated corpus (scripts/make_corpus.py, seeded), timed
end to end (interpreter start and imports included) with the peak PSS of its whole process tree
(bench/_measure.py), each with a fresh cache so nothing is reused:
  (a) rankzero        train.py --tokenize_only --packing --max_seq_length 2048 --cache_dir FRESH
  (b) run_clm recipe  bench/baselines/runclm_recipe.py: datasets.map(tokenizer(...)), group_texts, save_to_disk
  (c) Rust tokenizer  bench/baselines/tokenizer_only.py --engine hf: encode_batch_fast on all cores, nothing written
  (c2) fastokens      bench/baselines/tokenizer_only.py --engine fastokens: encode_batch_flat, nothing written
  (c3) fastokens floor   (c2) --floor: built beside the read, exact repeats skipped (byte-identical lines before
                      they are parsed), each batch encoded while the next is read: a lean reference for a prepare that
                      tokenizes with fastokens and drops exact repeats
  (ah) rankzero on the HF tokenizer   (a) with --tokenizer_engine hf
  (d) rankzero + filter   (a) with --quality_filter ko
  (e) Kiwi alone      bench/baselines/kiwi_only.py: split_into_sents over the Korean documents, all cores
  (a@Nx)              (a) on an N-times larger corpus (--scale N), for the peak-memory ratio
  (an) rankzero, no dedup   (a) with --dedup none (what near dedup, the default, costs)
  (ap) rankzero on numpy    (a) with the numpy references instead of the compiled passes (passes.c), as in a
                            process without a C compiler (what the passes save; at --scale N also ap@Nx)
  (ae) rankzero, exact dedup   (a) with --dedup exact (the default before issue 19)
  (A) another checkout  (a) run from the checkout given by --against (a refactor's before and after; also A@Nx)
  (aw), (Aw)          (a) and (A) when the data is already prepared: the same command run twice in one scratch
                      dir, the second timed (what a training run that finds its cache pays before it trains)
  (l) LitData         bench/baselines/litdata_optimize.py in --litdata_python's venv: `optimize` with
                      TokensLoader, fastokens in each of `cores` workers (forked), token chunks of 2048-token
                      blocks; no dedup, no filter, no masking
  (ls) LitData as installed   (l) with LitData's default start method (spawn: each worker imports torch again)
  (dt) datatrove      bench/baselines/datatrove_minhash.py --tokenizer in --datatrove_python's venv: MinHash
                      at rankzero's default bands x rows, then its DocumentTokenizer on what it keeps; the
                      corpus cut into `cores` files beforehand (untimed), tasks = workers = cores
train.py runs under mimalloc when it is installed (rankzero/malloc.py), and (a) is measured as a user
runs it. Three more modes show what that malloc is worth, each against its own baseline:
  (a0) rankzero under glibc malloc    (a) with RANKZERO_MALLOC=system
  (b+) run_clm recipe under the malloc    (b) with the library train.py preloads in LD_PRELOAD
  (c+) Rust tokenizer under the malloc    (c) likewise
  (e+) Kiwi alone under the malloc        (e) likewise
  (c2+) fastokens alone under the malloc  (c2) likewise
  (c3+) the fastokens floor under the malloc  (c3) likewise
  (a:X) rankzero with RANKZERO_MALLOC=X   e.g. --only a:tcmalloc,a:mimalloc to compare allocators
Runs go in rounds (every mode once, back to back, per round, the order reversed every other round) and each
time ratio is the median of the per-round ratios, so the VM's drift over minutes hits both sides alike.
Targets (issue 10, no filter, whole process): c/a0 and c+/a >= 2.5, b/a0 and b+/a >= 6, a0/c2 and
a/c2+ <= 1.5, PSS(a@4x)/PSS(a) <= 1.2; issue 30's: b/a >= 8, l/a >= 4, dt/a > 1; d/e, ah/a, a0/a, c/c2,
b/an, l/c3 (and l/c3+), a/c3 and b/c3 are reported beside them, with no target.
The markdown printed at the end is ready to paste into bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

from _measure import compile_bytecode, machine_info, run_measured, tool_env  # noqa: E402
from prep_setup import (check_prepared, compute_ratios, datatrove_shards, given_corpus, git_commit,  # noqa: E402
                        make_corpus, markdown, prepare_tokenizer, versions)

sys.path.insert(0, str(REPO))
from rankzero import malloc  # noqa: E402

MODES = {
    "a": "rankzero prepare (packing, 2048; --dedup near, the default)",
    "b": "run_clm.py recipe (datasets.map + group_texts + save_to_disk)",
    "c": "Rust tokenizer alone (encode_batch_fast)",
    "c2": "fastokens alone (encode_batch_flat)",
    "c3": "fastokens floor (built beside the read, exact repeats skipped, encoding beside reading)",
    "ah": "rankzero prepare with --tokenizer_engine hf",
    "d": "rankzero prepare + --quality_filter ko",
    "e": "Kiwi analysis alone (split_into_sents)",
    "a0": "rankzero prepare under glibc malloc (RANKZERO_MALLOC=system)",
    "b+": "run_clm.py recipe under the malloc train.py preloads",
    "c+": "Rust tokenizer alone under the malloc train.py preloads",
    "e+": "Kiwi analysis alone under the malloc train.py preloads",
    "c2+": "fastokens alone under the malloc train.py preloads",
    "c3+": "the fastokens floor under the malloc train.py preloads",
    "an": "rankzero prepare with --dedup none",
    "ae": "rankzero prepare with --dedup exact",
    "ap": "rankzero prepare, near dedup's hashing on numpy throughout",
    "A": "rankzero prepare of the --against checkout",
    "aw": "rankzero, the data already prepared (the same command again, timed on the cache the first run filled)",
    "Aw": "the --against checkout, the data already prepared",
    "l": "LitData optimize + TokensLoader, fastokens (no dedup)",
    "ls": "LitData as (l), its default start method (spawn)",
    "dt": "datatrove MinHash + DocumentTokenizer",
}
DATATROVE_SCRIPT = BENCH / "baselines" / "datatrove_minhash.py"
SEQUENCE_LENGTH = 2048
# (ap): train.py run as `python train.py` would be, as where the install built no extension (the environment carries
# RANKZERO_PASSES through train.py's malloc re-exec and into every worker).
NUMPY_ONLY = ("import os, runpy, sys; os.environ['RANKZERO_PASSES'] = 'numpy'; "
              "sys.argv = sys.argv[1:]; runpy.run_path('train.py', run_name='__main__')")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size_mb", type=float, default=50, help="corpus size in MiB (issue 2 asks >= 50)")
    parser.add_argument("--runs", type=int, default=1, help="runs per mode; the median is reported")
    parser.add_argument("--only", default="a,a0,b,b+,c,c+,c2,c2+",
                        help=f"comma-separated modes out of {','.join(MODES)}, or a:X for (a) under RANKZERO_MALLOC=X")
    parser.add_argument("--scale", type=int, default=4,
                        help="also run (a) on a corpus this many times larger, for peak memory (1 = skip)")
    parser.add_argument("--tokenizer", type=Path, default=None,
                        help="HF tokenizer dir; default: train a 32k byte-level BPE on 5 MiB of the corpus")
    parser.add_argument("--num_proc", type=int, default=None,
                        help="workers/threads for every run (default: each tool's own default, all usable cores)")
    parser.add_argument("--seed", type=int, default=0, help="corpus seed")
    parser.add_argument("--workdir", type=Path, default=BENCH / "out" / "prep",
                        help="where corpora, the tokenizer and per-run scratch dirs go")
    parser.add_argument("--out", type=Path, default=None, help="write all results as JSON here")
    parser.add_argument("--malloc", default="auto",
                        help="RANKZERO_MALLOC for (a) and (d), and the library (b+), (c+), (e+) preload "
                             "(auto, mimalloc, tcmalloc, jemalloc or a path; default auto, as train.py)")
    parser.add_argument("--timeout_s", type=float, default=3600, help="give up on one run after this long")
    parser.add_argument("--against", type=Path, default=None,
                        help="another checkout of rankzero (e.g. a git worktree of the commit before a change): mode A")
    parser.add_argument("--corpus", type=Path, nargs="+", default=None,
                        help="JSONL file(s) of {\"text\"} to run on instead of the generated corpus (several are "
                             "joined into one file in --workdir first); --size_mb then sizes nothing, --seed only "
                             "--copies' order, and the --scale run is skipped")
    parser.add_argument("--copies", type=int, default=1,
                        help="with --corpus: every document this many times, in an order shuffled by --seed (4 = "
                             "75%% exact copies, the shape of a crawl and of issue 30's peer corpus)")
    parser.add_argument("--max_load", type=float, default=None,
                        help="before each round, wait until the 1-minute load average is below this (a shared VM)")
    parser.add_argument("--max_wait_s", type=float, default=600, help="the longest --max_load waits before a round")
    parser.add_argument("--litdata_python", type=Path, default=None,
                        help="python of a venv with litdata, torch and fastokens: mode l")
    parser.add_argument("--datatrove_python", type=Path, default=None,
                        help="python of a venv with datatrove (see bench/baselines/datatrove_minhash.py): mode dt")
    args = parser.parse_args()
    modes = [mode.strip() for mode in args.only.split(",") if mode.strip()]
    unknown = [mode for mode in modes if mode not in MODES and not mode.startswith("a:")]
    problems = []
    if unknown:
        problems.append(f"--only {args.only}: unknown mode(s) {unknown}; choose from {','.join(MODES)}")
    if {"A", "Aw"} & set(modes) and not (args.against and (args.against / "train.py").is_file()):
        problems.append("--only A, Aw: give --against CHECKOUT, a directory holding another rankzero's train.py")
    for mode, python in (("l", args.litdata_python), ("ls", args.litdata_python), ("dt", args.datatrove_python)):
        if mode in modes and not (python and python.is_file()):
            flag = "--datatrove_python" if mode == "dt" else "--litdata_python"
            problems.append(f"--only {mode}: give {flag} PYTHON, the interpreter of the venv the baseline needs "
                            f"(its docstring in bench/baselines/ says how to make it)")
    missing = [str(path) for path in args.corpus or () if not path.is_file()]
    if missing:
        problems.append(f"--corpus: no such file: {', '.join(missing)}")
    if args.size_mb <= 0:
        problems.append(f"--size_mb {args.size_mb}: must be positive")
    if args.runs < 1:
        problems.append(f"--runs {args.runs}: must be at least 1")
    if args.copies < 1 or (args.copies > 1 and not args.corpus):
        problems.append(f"--copies {args.copies}: must be at least 1, and more than 1 only with --corpus")
    if args.scale < 1:
        problems.append(f"--scale {args.scale}: must be at least 1 (1 skips the scaled run)")
    for mode in modes:
        if mode.startswith("a:"):
            try:
                malloc.resolve(mode[2:])
            except malloc.MallocError as error:
                problems.append(f"--only {mode}: {error}")
    if args.tokenizer and not (args.tokenizer / "tokenizer.json").is_file():
        problems.append(f"--tokenizer {args.tokenizer}: no tokenizer.json there")
    try:
        args.malloc_library = malloc.resolve(args.malloc)
    except malloc.MallocError as error:
        problems.append(f"--malloc {args.malloc}: {error}")
        args.malloc_library = None
    if args.malloc == "system":
        problems.append("--malloc system: that is (a0); give a library to compare with")
    elif {"b+", "c+", "c2+", "c3+", "e+"} & set(modes) and args.malloc_library is None and not problems:
        problems.append(f"--only {args.only}: the + modes preload the malloc train.py uses, and none is "
                        f"installed here ({malloc.INSTALL_HINT})")
    if problems:
        parser.error("\n  ".join(problems))
    args.modes = modes
    return args


# --- runs ---------------------------------------------------------------------------------------------


def is_rankzero(mode: str) -> bool:
    return mode in ("a", "a0", "ah", "an", "ae", "ap", "d", "A", "aw", "Aw") or mode.startswith("a:")


def describe(mode: str) -> str:
    return f"rankzero prepare under RANKZERO_MALLOC={mode[2:]}" if mode.startswith("a:") else MODES[mode]


def command_for(mode: str, corpus: Path, tokenizer: Path, scratch: Path, args: argparse.Namespace) -> tuple[list, dict, Path]:
    num_proc = args.num_proc
    python = sys.executable
    env = tool_env()
    env.pop("TOKENIZERS_PARALLELISM", None)  # each tool decides for itself
    for name in ("LD_PRELOAD", malloc.ENV):  # (a) and (d) as train.py chooses; the baselines under glibc
        env.pop(name, None)
    if is_rankzero(mode):  # (a0) is (a:system); (a) and (d) run under --malloc (default auto, as train.py)
        env[malloc.ENV] = "system" if mode == "a0" else mode[2:] if mode.startswith("a:") else args.malloc
    elif mode.endswith("+"):
        env["LD_PRELOAD"] = str(args.malloc_library)
        mode = mode[:-1]
    if is_rankzero(mode):
        cmd = [python, "train.py", "--tokenize_only", "--dataset", str(corpus), "--tokenizer_path", str(tokenizer),
               "--max_seq_length", str(SEQUENCE_LENGTH), "--packing", "--cache_dir", str(scratch / "cache")]
        if mode == "d":
            cmd += ["--quality_filter", "ko"]
        if mode == "ah":
            cmd += ["--tokenizer_engine", "hf"]
        if mode == "an":
            cmd += ["--dedup", "none"]
        if mode == "ae":
            cmd += ["--dedup", "exact"]
        if mode == "ap":
            cmd[1:1] = ["-c", NUMPY_ONLY]
        if num_proc:
            env["DATASET_NUM_PROC"] = str(num_proc)
        if mode in ("A", "Aw"):  # its own rankzero: train.py's directory, not a PYTHONPATH naming this one
            env.pop("PYTHONPATH", None)
            return cmd, env, args.against.resolve()
    elif mode == "b":
        cmd = [python, str(BENCH / "baselines" / "runclm_recipe.py"), "--data_files", str(corpus),
               "--tokenizer_path", str(tokenizer), "--block_size", str(SEQUENCE_LENGTH),
               "--num_proc", str(num_proc or usable_cores()), "--output_dir", str(scratch / "grouped")]
        env["HF_DATASETS_CACHE"] = str(scratch / "hf_datasets_cache")  # fresh: no map() result is reused
    elif mode in ("c", "c2", "c3"):
        cmd = [python, str(BENCH / "baselines" / "tokenizer_only.py"), str(corpus), str(tokenizer),
               "--engine", "hf" if mode == "c" else "fastokens"] + (["--floor"] if mode == "c3" else [])
        if num_proc:
            env["RAYON_NUM_THREADS"] = env["RAYON_RS_NUM_THREADS"] = str(num_proc)
    elif mode in ("l", "ls"):
        cmd = [str(args.litdata_python), str(BENCH / "baselines" / "litdata_optimize.py"), str(corpus), str(tokenizer),
               str(scratch / "optimized"), "--block_size", str(SEQUENCE_LENGTH),
               "--num_workers", str(num_proc or usable_cores())] + (["--start_method", "fork"] if mode == "l" else [])
        # LitData's staging folders default to the system temp dir: fresh per run, like every other cache here.
        env["DATA_OPTIMIZER_CACHE_FOLDER"] = str(scratch / "litdata_chunks")
        env["DATA_OPTIMIZER_DATA_CACHE_FOLDER"] = str(scratch / "litdata_data")
    elif mode == "dt":
        from dedup_bench import datatrove_command, rankzero_settings

        settings = rankzero_settings() or {"bands": 14, "rows": 8, "ngrams": 5}
        tasks = num_proc or usable_cores()
        cmd = datatrove_command(args.datatrove_python, args.shards, scratch / "datatrove", settings["bands"],
                                settings["rows"], settings["ngrams"], tasks) + ["--tokenizer", str(tokenizer)]
    else:
        cmd = [python, str(BENCH / "baselines" / "kiwi_only.py"), str(corpus),
               "--num_workers", str(num_proc or usable_cores())]
    return cmd, env, REPO


def wait_for_quiet(max_load: float | None, max_wait_s: float) -> float:
    """Before a round on a shared machine: wait (at most `max_wait_s`) until the 1-minute load average is below
    `max_load`. Returns the load the round starts at, which the report prints beside the round."""
    deadline = time.monotonic() + max_wait_s
    while max_load is not None and os.getloadavg()[0] >= max_load and time.monotonic() < deadline:
        time.sleep(5)
    return os.getloadavg()[0]


def usable_cores() -> int:
    return len(os.sched_getaffinity(0))


def run_once(mode: str, label: str, corpus: Path, tokenizer: Path, args: argparse.Namespace, run: int) -> dict:
    """One measured run of one mode, in a fresh scratch dir: {wall_s, peak_pss_mb, ...} or {failure}."""
    scratch = Path(tempfile.mkdtemp(prefix=f"run-{label}-", dir=args.workdir))
    try:
        cmd, env, cwd = command_for(mode, corpus, tokenizer, scratch, args)
        print(f"[{label}] run {run + 1}/{args.runs}: {' '.join(cmd)}", file=sys.stderr)
        warm = mode in ("aw", "Aw")
        result = run_measured(cmd, env=env, cwd=str(cwd), timeout_s=args.timeout_s)  # (aw): the prepare, untimed
        if warm and result["returncode"] == 0:  # timed: it must find its data in the cache
            result = run_measured(cmd, env=env, cwd=str(cwd), timeout_s=args.timeout_s)
        ok, details = result["returncode"] == 0 and not (warm and "[prepare] published" in result["stderr"]), {}
        if ok and is_rankzero(mode):
            ok, details = check_prepared(result["stdout"])
        if not ok:
            print(f"[{label}] FAILED (exit {result['returncode']}):\n{result['stderr'][-2000:]}", file=sys.stderr)
            return {"cmd": cmd, "failure": {"returncode": result["returncode"], "stdout_tail": result["stdout"][-2000:],
                                            "stderr_tail": result["stderr"][-4000:]}}
        if not is_rankzero(mode):
            details = {"summary": result["stdout"].strip().splitlines()[-1] if result["stdout"].strip() else ""}
        print(f"[{label}] {result['wall_s']:.1f} s, {result['cpu_s']:.1f} CPU-s, peak PSS {result['peak_pss_mb']:.0f} MB",
              file=sys.stderr)
        return {"cmd": cmd, "wall_s": result["wall_s"], "cpu_s": result["cpu_s"], "peak_pss_mb": result["peak_pss_mb"],
                **details}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def summarize(mode: str, label: str, corpus: Path, corpus_bytes: int, runs: list[dict]) -> dict:
    """Medians over a mode's runs (or the first failure)."""
    entry = {"mode": mode, "label": label, "what": describe(mode), "corpus": str(corpus), "corpus_bytes": corpus_bytes,
             "cmd": runs[-1]["cmd"], "walls_s": [r["wall_s"] for r in runs if "wall_s" in r],
             "cpus_s": [r["cpu_s"] for r in runs if "cpu_s" in r],
             "peak_pss_mbs": [r["peak_pss_mb"] for r in runs if "peak_pss_mb" in r]}
    entry.update({k: v for k, v in runs[-1].items() if k not in ("cmd", "wall_s", "cpu_s", "peak_pss_mb")})
    if any("failure" in r for r in runs):
        entry["failure"] = next(r["failure"] for r in runs if "failure" in r)
        return entry
    entry["wall_s"] = statistics.median(entry["walls_s"])
    entry["cpu_s"] = statistics.median(entry["cpus_s"])
    entry["peak_pss_mb"] = statistics.median(entry["peak_pss_mbs"])
    entry["mb_per_s"] = corpus_bytes / 2**20 / entry["wall_s"]
    return entry


def main() -> None:
    args = parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    if args.corpus:
        corpus, corpus_stats = given_corpus(args.workdir, args.corpus, args.copies, args.seed)
    else:
        corpus, corpus_stats = make_corpus(args.workdir, args.size_mb, args.seed)
    tokenizer, tokenizer_description = prepare_tokenizer(args, corpus)
    if "dt" in args.modes:
        args.shards = datatrove_shards(args.workdir, corpus, args.num_proc or usable_cores())

    # Rounds, not one mode after another: this VM's speed drifts by ±20% over minutes, so each round
    # runs every mode back to back and the ratios are also taken within a round (paired).
    runs: dict[str, list[dict]] = {mode: [] for mode in args.modes}
    loads = []
    compile_bytecode(REPO, *([args.against] if {"A", "Aw"} & set(args.modes) else []))
    for run in range(args.runs):
        loads.append(wait_for_quiet(args.max_load, args.max_wait_s))
        for mode in (args.modes if run % 2 == 0 else args.modes[::-1]):
            if not any("failure" in r for r in runs[mode]):
                runs[mode].append(run_once(mode, mode, corpus, tokenizer, args, run))
    results = {mode: summarize(mode, mode, corpus, corpus_stats["bytes"], runs[mode]) for mode in args.modes}
    scaled_modes = [mode for mode in ("a", "ap", "A") if mode in args.modes]
    if scaled_modes and args.scale > 1 and not args.corpus:
        big, big_stats = make_corpus(args.workdir, args.size_mb * args.scale, args.seed)
        labels = {mode: f"{mode}@{args.scale}x" for mode in scaled_modes}
        try:
            scaled = {mode: [] for mode in scaled_modes}
            for run in range(args.runs):  # in rounds, as above
                for mode in (scaled_modes if run % 2 == 0 else scaled_modes[::-1]):
                    scaled[mode].append(run_once(mode, labels[mode], big, tokenizer, args, run))
            for mode in scaled_modes:
                results[labels[mode]] = summarize(mode, labels[mode], big, big_stats["bytes"], scaled[mode])
        finally:
            big.unlink(missing_ok=True)  # 4x the corpus on disk is the one thing worth cleaning eagerly

    report = {
        "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "machine": machine_info(), "versions": versions(), "commit": git_commit(),
        "size_mb": args.size_mb, "seed": args.seed, "runs": args.runs, "num_proc": args.num_proc,
        "corpus": corpus_stats, "tokenizer": tokenizer_description, "results": results, "round_loads": loads,
    }
    report["ratios"] = compute_ratios(results)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
        print(f"results: {args.out}", file=sys.stderr)
    print(markdown(report))
    if any("failure" in entry for entry in results.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
