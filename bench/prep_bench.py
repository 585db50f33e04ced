"""Data-preparation benchmark: rankzero against run_clm.py's recipe and the bare Rust tokenizer.

    python bench/prep_bench.py                                  # 50 MiB corpus, every run, 4x scale check
    python bench/prep_bench.py --size_mb 5 --runs 1 --scale 1   # smoke run
    python bench/prep_bench.py --only a,b,c --runs 3 --out bench/out/prep.json

Every run is a separate process over the SAME generated corpus (bench/make_corpus.py, seeded), timed
end to end (interpreter start and imports included) with the peak PSS of its whole process tree
(bench/_measure.py), each with a fresh cache so nothing is reused:
  (a) rankzero        train.py --tokenize_only --packing --max_seq_length 2048 --cache_dir FRESH
  (b) run_clm recipe  bench/baselines/runclm_recipe.py: datasets.map(tokenizer(...)), group_texts, save_to_disk
  (c) Rust tokenizer  bench/baselines/tokenizer_only.py --engine hf: encode_batch_fast on all cores, nothing written
  (c2) fastokens      bench/baselines/tokenizer_only.py --engine fastokens: encode_batch_flat, nothing written
  (ah) rankzero on the HF tokenizer   (a) with --tokenizer_engine hf
  (d) rankzero + filter   (a) with --quality_filter ko
  (e) Kiwi alone      bench/baselines/kiwi_only.py: split_into_sents over the Korean documents, all cores
  (a@Nx)              (a) on an N-times larger corpus (--scale N), for the peak-memory ratio
  (an) rankzero, no dedup   (a) with --dedup none (what near dedup, the default, costs)
  (ae) rankzero, exact dedup   (a) with --dedup exact (the default before issue 19)
  (A) another checkout  (a) run from the checkout given by --against (a refactor's before and after)
train.py runs under mimalloc when it is installed (rankzero/malloc.py), and (a) is measured as a user
runs it. Three more modes show what that malloc is worth, each against its own baseline:
  (a0) rankzero under glibc malloc    (a) with RANKZERO_MALLOC=system
  (b+) run_clm recipe under the malloc    (b) with the library train.py preloads in LD_PRELOAD
  (c+) Rust tokenizer under the malloc    (c) likewise
  (e+) Kiwi alone under the malloc        (e) likewise
  (c2+) fastokens alone under the malloc  (c2) likewise
  (a:X) rankzero with RANKZERO_MALLOC=X   e.g. --only a:tcmalloc,a:mimalloc to compare allocators
Runs go in rounds (every mode once, back to back, per round) and each time ratio is the median of
the per-round ratios, so the VM's drift over minutes hits both sides of a ratio alike.
Targets (issue 10, no filter, whole process): c/a0 and c+/a >= 2.5, b/a0 and b+/a >= 6, a0/c2 and
a/c2+ <= 1.5, PSS(a@4x)/PSS(a) <= 1.2; d/e, ah/a, a0/a and c/c2 are reported beside them, with no target.
The markdown printed at the end is ready to paste into bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
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
from make_corpus import generate  # noqa: E402

sys.path.insert(0, str(REPO))
from rankzero import malloc  # noqa: E402

MODES = {
    "a": "rankzero prepare (packing, 2048; --dedup near, the default)",
    "b": "run_clm.py recipe (datasets.map + group_texts + save_to_disk)",
    "c": "Rust tokenizer alone (encode_batch_fast)",
    "c2": "fastokens alone (encode_batch_flat)",
    "ah": "rankzero prepare with --tokenizer_engine hf",
    "d": "rankzero prepare + --quality_filter ko",
    "e": "Kiwi analysis alone (split_into_sents)",
    "a0": "rankzero prepare under glibc malloc (RANKZERO_MALLOC=system)",
    "b+": "run_clm.py recipe under the malloc train.py preloads",
    "c+": "Rust tokenizer alone under the malloc train.py preloads",
    "e+": "Kiwi analysis alone under the malloc train.py preloads",
    "c2+": "fastokens alone under the malloc train.py preloads",
    "an": "rankzero prepare with --dedup none",
    "ae": "rankzero prepare with --dedup exact",
    "A": "rankzero prepare of the --against checkout",
}
SEQUENCE_LENGTH = 2048
TOKENIZER_VOCAB = 32000
TOKENIZER_TRAIN_BYTES = 5 * 2**20


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
    args = parser.parse_args()
    modes = [mode.strip() for mode in args.only.split(",") if mode.strip()]
    unknown = [mode for mode in modes if mode not in MODES and not mode.startswith("a:")]
    problems = []
    if unknown:
        problems.append(f"--only {args.only}: unknown mode(s) {unknown}; choose from {','.join(MODES)}")
    if "A" in modes and not (args.against and (args.against / "train.py").is_file()):
        problems.append("--only A: give --against CHECKOUT, a directory holding another rankzero's train.py")
    if args.size_mb <= 0:
        problems.append(f"--size_mb {args.size_mb}: must be positive")
    if args.runs < 1:
        problems.append(f"--runs {args.runs}: must be at least 1")
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
    elif {"b+", "c+", "c2+", "e+"} & set(modes) and args.malloc_library is None and not problems:
        problems.append(f"--only {args.only}: the + modes preload the malloc train.py uses, and none is "
                        f"installed here ({malloc.INSTALL_HINT})")
    if problems:
        parser.error("\n  ".join(problems))
    args.modes = modes
    return args


# --- set-up -------------------------------------------------------------------------------------------


def make_corpus(workdir: Path, size_mb: float, seed: int) -> tuple[Path, dict]:
    path = workdir / f"corpus-{size_mb:g}mb-seed{seed}.jsonl"
    stats = generate(int(size_mb * 2**20), path, seed)  # cheap (~0.1 s/MiB): always regenerate, never stale
    print(f"corpus: {path} ({stats['bytes'] / 2**20:.1f} MiB, {stats['documents']} documents: "
          f"korean {stats['korean']}, english {stats['english']}, code {stats['code']}, junk {stats['junk']})",
          file=sys.stderr)
    return path, stats


def train_tokenizer(corpus: Path, output: Path) -> str:
    """The project's tokenizer trainer when present; otherwise a plain 32k byte-level BPE, inline."""
    script = REPO / "scripts" / "train_tokenizer.py"
    if script.exists():
        cmd = [sys.executable, str(script), "--dataset", str(corpus), "--vocab_size", str(TOKENIZER_VOCAB),
               "--max_bytes", str(TOKENIZER_TRAIN_BYTES), "--output_dir", str(output)]
        result = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        if result.returncode == 0 and (output / "tokenizer.json").is_file():
            return f"scripts/train_tokenizer.py, vocab {TOKENIZER_VOCAB}, first 5 MiB of the corpus"
        print(f"warning: scripts/train_tokenizer.py failed (exit {result.returncode}); training inline instead:\n"
              f"{result.stderr[-2000:]}", file=sys.stderr)
    train_inline_tokenizer(corpus, output)
    return f"inline byte-level BPE, vocab {TOKENIZER_VOCAB}, first 5 MiB of the corpus"


def train_inline_tokenizer(corpus: Path, output: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    def texts():
        seen = 0
        with open(corpus, "rb") as handle:
            for line in handle:
                seen += len(line)
                if seen > TOKENIZER_TRAIN_BYTES:
                    return
                yield json.loads(line)["text"]

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    specials = ["<s>", "</s>", "<unk>", "<pad>"]
    trainer = trainers.BpeTrainer(vocab_size=TOKENIZER_VOCAB, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(texts(), trainer)
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>",
                                      unk_token="<unk>", pad_token="<pad>")
    wrapped.save_pretrained(str(output))


def prepare_tokenizer(args: argparse.Namespace, corpus: Path) -> tuple[Path, str]:
    if args.tokenizer:
        return args.tokenizer.resolve(), str(args.tokenizer)
    # Corpora of one seed share their first bytes, so a tokenizer trained on the first 5 MiB is the same
    # for every size >= 5 MiB; smaller corpora train on less and get their own directory.
    train_mib = min(args.size_mb, TOKENIZER_TRAIN_BYTES / 2**20)
    output = args.workdir / f"tokenizer-seed{args.seed}-{train_mib:g}mb"
    note = output / "BENCH_TOKENIZER.txt"
    if (output / "tokenizer.json").is_file() and note.is_file():
        return output, note.read_text(encoding="utf-8").strip() + " (reused)"
    tmp = Path(tempfile.mkdtemp(prefix="tokenizer-", dir=args.workdir))
    print("training the benchmark tokenizer ...", file=sys.stderr)
    description = train_tokenizer(corpus, tmp).replace("first 5 MiB", f"first {train_mib:g} MiB")
    (tmp / "BENCH_TOKENIZER.txt").write_text(description + "\n", encoding="utf-8")
    shutil.rmtree(output, ignore_errors=True)
    os.replace(tmp, output)
    return output, description


# --- runs ---------------------------------------------------------------------------------------------


def is_rankzero(mode: str) -> bool:
    return mode in ("a", "a0", "ah", "an", "ae", "d", "A") or mode.startswith("a:")


def describe(mode: str) -> str:
    return f"rankzero prepare under RANKZERO_MALLOC={mode[2:]}" if mode.startswith("a:") else MODES[mode]


def command_for(mode: str, corpus: Path, tokenizer: Path, scratch: Path, args: argparse.Namespace) -> tuple[list, dict, Path]:
    num_proc = args.num_proc
    python = sys.executable
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
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
        if num_proc:
            env["DATASET_NUM_PROC"] = str(num_proc)
        if mode == "A":
            return cmd, env, args.against.resolve()
    elif mode == "b":
        cmd = [python, str(BENCH / "baselines" / "runclm_recipe.py"), "--data_files", str(corpus),
               "--tokenizer_path", str(tokenizer), "--block_size", str(SEQUENCE_LENGTH),
               "--num_proc", str(num_proc or usable_cores()), "--output_dir", str(scratch / "grouped")]
        env["HF_DATASETS_CACHE"] = str(scratch / "hf_datasets_cache")  # fresh: no map() result is reused
    elif mode in ("c", "c2"):
        cmd = [python, str(BENCH / "baselines" / "tokenizer_only.py"), str(corpus), str(tokenizer),
               "--engine", "hf" if mode == "c" else "fastokens"]
        if num_proc:
            env["RAYON_NUM_THREADS"] = env["RAYON_RS_NUM_THREADS"] = str(num_proc)
    else:
        cmd = [python, str(BENCH / "baselines" / "kiwi_only.py"), str(corpus),
               "--num_workers", str(num_proc or usable_cores())]
    return cmd, env, REPO


def usable_cores() -> int:
    return len(os.sched_getaffinity(0))


def run_once(mode: str, label: str, corpus: Path, tokenizer: Path, args: argparse.Namespace, run: int) -> dict:
    """One measured run of one mode, in a fresh scratch dir: {wall_s, peak_pss_mb, ...} or {failure}."""
    scratch = Path(tempfile.mkdtemp(prefix=f"run-{label}-", dir=args.workdir))
    try:
        cmd, env, cwd = command_for(mode, corpus, tokenizer, scratch, args)
        print(f"[{label}] run {run + 1}/{args.runs}: {' '.join(cmd)}", file=sys.stderr)
        result = run_measured(cmd, env=env, cwd=str(cwd), timeout_s=args.timeout_s)
        ok, details = result["returncode"] == 0, {}
        if ok and is_rankzero(mode):
            ok, details = check_prepared(result["stdout"])
        if not ok:
            print(f"[{label}] FAILED (exit {result['returncode']}):\n{result['stderr'][-2000:]}", file=sys.stderr)
            return {"cmd": cmd, "failure": {"returncode": result["returncode"], "stdout_tail": result["stdout"][-2000:],
                                            "stderr_tail": result["stderr"][-4000:]}}
        if not is_rankzero(mode):
            details = {"summary": result["stdout"].strip().splitlines()[-1] if result["stdout"].strip() else ""}
        print(f"[{label}] {result['wall_s']:.1f} s, peak PSS {result['peak_pss_mb']:.0f} MB", file=sys.stderr)
        return {"cmd": cmd, "wall_s": result["wall_s"], "peak_pss_mb": result["peak_pss_mb"], **details}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def summarize(mode: str, label: str, corpus: Path, corpus_bytes: int, runs: list[dict]) -> dict:
    """Medians over a mode's runs (or the first failure)."""
    entry = {"mode": mode, "label": label, "what": describe(mode), "corpus": str(corpus), "corpus_bytes": corpus_bytes,
             "cmd": runs[-1]["cmd"], "walls_s": [r["wall_s"] for r in runs if "wall_s" in r],
             "peak_pss_mbs": [r["peak_pss_mb"] for r in runs if "peak_pss_mb" in r]}
    entry.update({k: v for k, v in runs[-1].items() if k not in ("cmd", "wall_s", "peak_pss_mb")})
    if any("failure" in r for r in runs):
        entry["failure"] = next(r["failure"] for r in runs if "failure" in r)
        return entry
    entry["wall_s"] = statistics.median(entry["walls_s"])
    entry["peak_pss_mb"] = statistics.median(entry["peak_pss_mbs"])
    entry["mb_per_s"] = corpus_bytes / 2**20 / entry["wall_s"]
    return entry


def check_prepared(stdout: str) -> tuple[bool, dict]:
    """The contract: the last stdout line is `prepared: <dir>` and <dir>/manifest.json exists."""
    lines = stdout.strip().splitlines()
    if not lines or not lines[-1].startswith("prepared: "):
        return False, {}
    prepared = Path(lines[-1][len("prepared: "):].strip())
    details: dict = {"prepared": str(prepared)}
    manifest_path = prepared / "manifest.json"
    if not manifest_path.is_file():
        return False, details
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    for key in ("docs_in", "docs_kept", "dropped", "tokens", "sequences"):
        details[key] = manifest.get(key)
    details["malloc"] = manifest.get("versions", {}).get("malloc")
    return True, details


# --- report -------------------------------------------------------------------------------------------


def ratio(numerator: dict | None, denominator: dict | None, key: str) -> float | None:
    if not numerator or not denominator or key not in numerator or key not in denominator:
        return None
    return numerator[key] / denominator[key]


def paired_ratios(numerator: dict | None, denominator: dict | None) -> list[float]:
    """Per-round wall-time ratios (round i of one mode against round i of the other)."""
    if not numerator or not denominator or "wall_s" not in numerator or "wall_s" not in denominator:
        return []
    if len(numerator["walls_s"]) != len(denominator["walls_s"]):
        return []
    return [n / d for n, d in zip(numerator["walls_s"], denominator["walls_s"])]


def compute_ratios(results: dict) -> list[dict]:
    """Wall-time ratios are the median of the per-round ratios; the memory ratio is of the medians."""
    a, b, c, d, e = (results.get(mode) for mode in "abcde")
    scaled = next((entry for label, entry in results.items() if label.startswith("a@")), None)
    a0, b_malloc, c_malloc, e_malloc = (results.get(mode) for mode in ("a0", "b+", "c+", "e+"))
    c2, c2_malloc, ah = (results.get(mode) for mode in ("c2", "c2+", "ah"))
    rows = [
        # Issue 10's targets, first as installed by default (glibc: no tcmalloc), then with both sides
        # under the malloc train.py preloads when it is installed.
        ("faster than the HF Rust tokenizer alone, c / a0 (glibc)", (c, a0), ">= 2.5", lambda v: v >= 2.5),
        ("faster than the HF Rust tokenizer alone, c+ / a (tcmalloc)", (c_malloc, a), ">= 2.5", lambda v: v >= 2.5),
        ("faster than the run_clm recipe, b / a0 (glibc)", (b, a0), ">= 6", lambda v: v >= 6),
        ("faster than the run_clm recipe, b+ / a (tcmalloc)", (b_malloc, a), ">= 6", lambda v: v >= 6),
        ("time against fastokens alone, a0 / c2 (glibc)", (a0, c2), "<= 1.5", lambda v: v <= 1.5),
        ("time against fastokens alone, a / c2+ (tcmalloc)", (a, c2_malloc), "<= 1.5", lambda v: v <= 1.5),
        # Beside the targets. Same corpus for (d) and (e): throughput(d) / throughput(e) = wall(e) / wall(d).
        ("throughput with the filter against Kiwi alone, d / e", (e, d), "—", None),
        ("throughput with the filter against Kiwi alone under the same malloc, d / e+", (e_malloc, d), "—", None),
        ("rankzero on the HF tokenizer against fastokens, ah / a", (ah, a), "—", None),
        ("rankzero under glibc malloc against (a), a0 / a", (a0, a), "—", None),
        ("the HF Rust tokenizer against fastokens alone, c / c2", (c, c2), "—", None),
        # Issue 19: near dedup, the default, against none: <= 2 (the aim 1.5).
        ("rankzero with near dedup (the default) against --dedup none, a / an", (a, results.get("an")), "<= 2",
         lambda v: v <= 2),
        ("rankzero with exact dedup against --dedup none, ae / an", (results.get("ae"), results.get("an")), "—", None),
        ("rankzero with near dedup against exact, a / ae", (a, results.get("ae")), "—", None),
        ("rankzero against the --against checkout, a / A", (a, results.get("A")), "—", None),
    ]
    rows += [(f"rankzero under RANKZERO_MALLOC={label[2:]} against (a), {label} / a", (entry, a), "—", None)
             for label, entry in results.items() if label.startswith("a:")]
    out = []
    for name, (numerator, denominator), target, met in rows:
        per_round = paired_ratios(numerator, denominator)
        value = statistics.median(per_round) if per_round else ratio(numerator, denominator, "wall_s")
        if numerator is None and denominator is None or met is None and value is None:
            continue  # neither mode was run, or an informational ratio without its modes
        out.append({"name": name, "value": value, "per_round": per_round, "target": target,
                    "met": None if value is None or met is None else bool(met(value))})
    if a is None and scaled is None:
        return out
    value = ratio(scaled, a, "peak_pss_mb")
    out.append({"name": f"peak PSS {scaled['label'] if scaled else 'a@Nx'} / a", "value": value, "per_round": [],
                "target": "<= 1.2", "met": None if value is None else value <= 1.2})
    return out


def versions() -> dict:
    found = {"python": platform.python_version()}
    for name in ("tokenizers", "datasets", "transformers", "kiwipiepy", "pyarrow"):
        try:
            module = __import__(name)
            found[name] = getattr(module, "__version__", "?")
        except ImportError:
            found[name] = "absent"
    return found


def git_commit() -> str:
    result = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return result.stdout.strip() or "unknown"


def markdown(report: dict) -> str:
    machine, lines = report["machine"], []
    lines.append(f"### Data preparation — {report['date']}")
    lines.append("")
    lines.append(f"- Machine: {machine['cpu']}, {machine['cores']} usable cores "
                 f"({machine['logical_cpus']} logical), {machine['ram_gb']} GiB RAM; commit {report['commit']}")
    lines.append("- Versions: " + ", ".join(f"{k} {v}" for k, v in report["versions"].items()))
    corpus = report["corpus"]
    lines.append(f"- Corpus: `bench/make_corpus.py --size_mb {report['size_mb']:g} --seed {report['seed']}` — "
                 f"{corpus['bytes'] / 2**20:.1f} MiB, {corpus['documents']} documents "
                 f"(korean {corpus['korean']}, english {corpus['english']}, code {corpus['code']}, "
                 f"junk {corpus['junk']}); tokenizer: {report['tokenizer']}")
    lines.append(f"- Whole-process wall time and peak PSS of the process tree (sampled every 50 ms); "
                 f"median of {report['runs']} round(s), each running every mode back to back; "
                 f"workers: {report['num_proc'] or 'each tool default (all cores)'}")
    lines.append("")
    lines.append("| run | what | wall s | MiB/s | peak PSS MB | notes |")
    lines.append("|---|---|---:|---:|---:|---|")
    for label, entry in report["results"].items():
        if "failure" in entry:
            lines.append(f"| ({label}) | {entry['what']} | failed | | | exit {entry['failure']['returncode']} |")
            continue
        notes = ""
        if entry.get("tokens") is not None:
            notes = (f"docs {entry.get('docs_kept')}/{entry.get('docs_in')} kept, {entry['tokens']:,} tokens, "
                     f"{entry.get('sequences')} blocks; malloc {entry.get('malloc')}")
        elif entry.get("summary"):
            notes = entry["summary"]
        size = f" ({entry['corpus_bytes'] / 2**20:.0f} MiB)" if label.startswith("a@") else ""
        lines.append(f"| ({label}) | {entry['what']}{size} | {entry['wall_s']:.1f} | {entry['mb_per_s']:.2f} | "
                     f"{entry['peak_pss_mb']:.0f} | {notes} |")
    lines.append("")
    lines.append("| ratio | value | per round | target | met |")
    lines.append("|---|---:|---|---|---|")
    for row in report["ratios"]:
        value = "n/a" if row["value"] is None else f"{row['value']:.2f}"
        rounds = ", ".join(f"{r:.2f}" for r in row["per_round"])
        met = ("—" if row["target"] == "—" else "n/a") if row["met"] is None else ("yes" if row["met"] else "**no**")
        lines.append(f"| {row['name']} | {value} | {rounds} | {row['target']} | {met} |")
    return "\n".join(lines)


def main() -> None:
    args = parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    corpus, corpus_stats = make_corpus(args.workdir, args.size_mb, args.seed)
    tokenizer, tokenizer_description = prepare_tokenizer(args, corpus)

    # Rounds, not one mode after another: this VM's speed drifts by ±20% over minutes, so each round
    # runs every mode back to back and the ratios are also taken within a round (paired).
    runs: dict[str, list[dict]] = {mode: [] for mode in args.modes}
    for run in range(args.runs):
        for mode in args.modes:
            if not any("failure" in r for r in runs[mode]):
                runs[mode].append(run_once(mode, mode, corpus, tokenizer, args, run))
    results = {mode: summarize(mode, mode, corpus, corpus_stats["bytes"], runs[mode]) for mode in args.modes}
    if "a" in args.modes and args.scale > 1:
        big, big_stats = make_corpus(args.workdir, args.size_mb * args.scale, args.seed)
        label = f"a@{args.scale}x"
        try:
            scaled = [run_once("a", label, big, tokenizer, args, run) for run in range(args.runs)]
            results[label] = summarize("a", label, big, big_stats["bytes"], scaled)
        finally:
            big.unlink(missing_ok=True)  # 4x the corpus on disk is the one thing worth cleaning eagerly

    report = {
        "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "machine": machine_info(), "versions": versions(), "commit": git_commit(),
        "size_mb": args.size_mb, "seed": args.seed, "runs": args.runs, "num_proc": args.num_proc,
        "corpus": corpus_stats, "tokenizer": tokenizer_description, "results": results,
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
