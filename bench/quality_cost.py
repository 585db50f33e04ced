"""What the Korean quality filter costs per GB of real Korean, and whether its verdicts still agree
with another commit's filter: `bench/quality_eval.py --throughput` runs this.

    git worktree add --detach ../base-bec9da6 bec9da6          # the filter before issue 20
    python bench/quality_eval.py --throughput --real ../real_ko ../statutes --against ../base-bec9da6 --rounds 2

1. Verdicts and quality-stage cost, per corpus: each checkout's `QualityFilter` (one Kiwi, no thread
   pool: one core) judges every corpus in a fresh process of its own (`python -c`, run in that checkout),
   which reports its verdicts and the process CPU time of `judge_batch` alone (Kiwi's model load is not
   counted). The checkouts alternate within each round; CPU-s per GB of UTF-8 text is the median over
   rounds. Agreement counts kept→dropped and dropped→kept apart, and the kept rate of every genre and junk
   kind is compared (a move over 1 point is marked).
2. The whole prepare (`train.py --tokenize_only --packing`, as bench/prep_bench.py runs it) of all the
   real Korean together (ko_real_dev and every --real set), with and without `--quality_filter ko`,
   alternating within each round: wall seconds and CPU seconds of the whole process tree
   (RUSAGE_CHILDREN), and their ratio per round.
Corpora: the labelled sample (junk kinds), ko_real_dev, each --real directory's JSONL files (one genre
each, or the records' `genre`), and the bench corpus (scripts/make_corpus.py).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Run inside the checkout under test (cwd): its own rankzero, one Kiwi without a pool.
_JUDGE = """
import json, sys, time
sys.path.insert(0, ".")
from rankzero.data.quality import QualityFilter
quality = QualityFilter()
result = {}
for name, path in json.loads(sys.argv[1]).items():
    with open(path, encoding="utf-8") as handle:
        texts = [json.loads(line)["text"] for line in handle if line.strip()]
    start = time.process_time()
    verdicts = quality.judge_batch(texts)
    result[name] = {"verdicts": verdicts, "cpu_s": time.process_time() - start}
json.dump(result, sys.stdout)
"""


def load_groups(path: Path, default_group: str) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    return [{"text": record["text"],
             "group": record.get("genre") or (f"{record['label']}/{record['kind']}" if "kind" in record else
                                              default_group)} for record in records]


def corpora(sample: Path, dev: Path | None, real: list[Path], bench_corpus: Path | None) -> dict[str, list[dict]]:
    """name -> records {"text", "group"}: the sample, ko_real_dev, each --real directory, the bench corpus."""
    sets = {"labelled sample": load_groups(sample, "sample")}
    if dev and dev.is_dir():
        sets["ko_real_dev"] = [record for path in sorted(dev.glob("*.jsonl")) for record in load_groups(path, path.stem)]
    for directory in real:
        files = sorted(directory.glob("*.jsonl"))
        if not files:
            raise SystemExit(f"--real {directory}: no .jsonl files there (scripts/real_korean_sets.py, "
                             "scripts/korean_statutes.py write them)")
        sets[directory.name] = [record for path in files for record in load_groups(path, path.stem)]
    if bench_corpus:
        sets[f"bench corpus ({bench_corpus.stat().st_size / 2**20:.0f} MiB)"] = load_groups(bench_corpus, "bench")
    return sets


def judge_in(checkout: Path, paths: dict[str, str], timeout_s: float) -> dict:
    environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "LD_PRELOAD")}
    result = subprocess.run([sys.executable, "-c", _JUDGE, json.dumps(paths)], cwd=checkout, env=environment,
                            capture_output=True, text=True, timeout=timeout_s)
    if result.returncode != 0:
        raise SystemExit(f"judging in {checkout} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout)


def report_verdicts(sets: dict[str, list[dict]], against: Path | None, workdir: Path, rounds: int,
                    timeout_s: float) -> None:
    paths = {}
    for name, records in sets.items():
        path = workdir / f"judge-{len(paths)}.jsonl"
        with open(path, "w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps({"text": record["text"]}, ensure_ascii=False) + "\n")
        paths[name] = str(path)
    checkouts = {"this checkout": REPO, **({str(against): against.resolve()} if against else {})}
    runs = defaultdict(list)
    for round_index in range(rounds):
        for name in (list(checkouts) if round_index % 2 == 0 else list(checkouts)[::-1]):
            runs[name].append(judge_in(checkouts[name], paths, timeout_s))
            print(f"round {round_index + 1}: judged in {name}", file=sys.stderr)
    here = runs["this checkout"]
    print(f"## Quality stage: CPU seconds per GB, one core (process CPU time of judge_batch, median of "
          f"{rounds} rounds)\n")
    print("| corpus | docs | MB (UTF-8) | this checkout | " + (f"{against} | ratio |" if against else "") +
          "\n|---|---:|---:|---:|" + ("---:|---:|" if against else ""))
    real_bytes, real_cpu = 0, defaultdict(float)
    for name, records in sets.items():
        size = sum(len(record["text"].encode("utf-8")) for record in records)
        cost = {checkout: statistics.median(run[name]["cpu_s"] for run in runs[checkout]) / size * 1e9
                for checkout in checkouts}
        if name != "labelled sample" and not name.startswith("bench corpus"):
            real_bytes += size
            for checkout in checkouts:
                real_cpu[checkout] += cost[checkout] * size / 1e9
        row = f"| {name} | {len(records)} | {size / 1e6:.2f} | {cost['this checkout']:,.0f} |"
        if against:
            row += f" {cost[str(against)]:,.0f} | {cost[str(against)] / cost['this checkout']:.1f}x |"
        print(row)
    if real_bytes:
        total = {checkout: real_cpu[checkout] / real_bytes * 1e9 for checkout in checkouts}
        row = f"| **all real Korean** (ko_real_dev, --real) | | {real_bytes / 1e6:.2f} | **{total['this checkout']:,.0f}** |"
        if against:
            row += f" {total[str(against)]:,.0f} | {total[str(against)] / total['this checkout']:.1f}x |"
        print(row)
    if against:
        report_agreement(sets, here[-1], runs[str(against)][-1], against)


def report_agreement(sets: dict[str, list[dict]], here: dict, there: dict, against: Path) -> None:
    print(f"\n## Verdicts of this checkout against {against}\n")
    print("| corpus | docs | same keep/drop | kept there → dropped here | dropped there → kept here | same reason |"
          "\n|---|---:|---:|---:|---:|---:|")
    moved = []
    for name, records in sets.items():
        new, old = here[name]["verdicts"], there[name]["verdicts"]
        same = sum((a is None) == (b is None) for a, b in zip(new, old))
        newly_dropped = sum(a is not None and b is None for a, b in zip(new, old))
        newly_kept = sum(a is None and b is not None for a, b in zip(new, old))
        same_reason = sum(a == b for a, b in zip(new, old))
        print(f"| {name} | {len(records)} | {same / len(records):.2%} | {newly_dropped} | {newly_kept} | "
              f"{same_reason / len(records):.2%} |")
        kept_new, kept_old, sizes = Counter(), Counter(), Counter()
        for record, a, b in zip(records, new, old):
            sizes[record["group"]] += 1
            kept_new[record["group"]] += a is None
            kept_old[record["group"]] += b is None
        for group in sorted(sizes):
            moved.append((name, group, sizes[group], kept_old[group] / sizes[group], kept_new[group] / sizes[group]))
    print("\nKept rate per genre and junk kind (there → here; ⚠ where it moved by more than 1 point):\n")
    print("| corpus | genre / kind | docs | kept there | kept here |\n|---|---|---:|---:|---:|")
    for name, group, size, old, new in moved:
        mark = " ⚠" if abs(new - old) > 0.01 else ""
        print(f"| {name} | {group} | {size} | {old:.1%} | {new:.1%}{mark} |")
    print()


def _run_tree(command: list[str], cwd: Path, timeout_s: float) -> tuple[float, float, str]:
    """(wall s, CPU s of the whole process tree, stdout) of one command."""
    from _measure import run_measured  # bench/ is on sys.path: quality_eval.py, the only caller, puts it there

    environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "LD_PRELOAD")}
    result = run_measured(command, env=environment, cwd=str(cwd), timeout_s=timeout_s)
    if result["returncode"] != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result['stderr'][-3000:]}")
    return result["wall_s"], result["cpu_s"], result["stdout"]


def report_prepare(sets: dict[str, list[dict]], workdir: Path, rounds: int, timeout_s: float) -> None:
    """The whole prepare of all real Korean, with and without the filter, alternating in each round."""
    sys.path.insert(0, str(REPO / "bench"))
    from prep_bench import SEQUENCE_LENGTH
    from prep_setup import train_tokenizer

    corpus = workdir / "real_korean.jsonl"
    with open(corpus, "w", encoding="utf-8") as handle:
        for name, records in sets.items():
            if name != "labelled sample" and not name.startswith("bench corpus"):
                for record in records:
                    handle.write(json.dumps({"text": record["text"]}, ensure_ascii=False) + "\n")
    tokenizer = workdir / "tokenizer-real"
    if not (tokenizer / "tokenizer.json").is_file():
        print("training the benchmark tokenizer ...", file=sys.stderr)
        train_tokenizer(corpus, tokenizer)
    systems = {"without the filter": [], "--quality_filter ko": ["--quality_filter", "ko"]}
    measured = defaultdict(list)
    for round_index in range(rounds):
        for name in (list(systems) if round_index % 2 == 0 else list(systems)[::-1]):
            scratch = Path(tempfile.mkdtemp(prefix="prepare-", dir=workdir))
            try:
                command = [sys.executable, "train.py", "--tokenize_only", "--dataset", str(corpus), "--tokenizer_path",
                           str(tokenizer), "--max_seq_length", str(SEQUENCE_LENGTH), "--packing", "--cache_dir",
                           str(scratch / "cache"), *systems[name]]
                wall, cpu, stdout = _run_tree(command, REPO, timeout_s)
                prepared = Path(stdout.strip().splitlines()[-1].removeprefix("prepared: "))
                manifest = json.loads((prepared / "manifest.json").read_text(encoding="utf-8"))
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            measured[name].append((wall, cpu, manifest["docs_kept"], manifest["docs_in"]))
            print(f"round {round_index + 1} {name}: {wall:.1f} s wall, {cpu:.1f} CPU s", file=sys.stderr)
    size = corpus.stat().st_size
    print(f"## Whole prepare of all real Korean ({size / 1e6:.1f} MB, {measured[list(systems)[0]][0][3]} documents), "
          f"`train.py --tokenize_only --packing`, {rounds} rounds alternating, {len(os.sched_getaffinity(0))} cores\n")
    print("| prepare | wall s per round | CPU s per round (process tree) | CPU s per GB | docs kept |\n"
          "|---|---|---|---:|---:|")
    for name, values in measured.items():
        cpus = [cpu for _, cpu, _, _ in values]
        print(f"| {name} | {', '.join(f'{wall:.1f}' for wall, _, _, _ in values)} | {', '.join(f'{c:.1f}' for c in cpus)} "
              f"| {statistics.median(cpus) / size * 1e9:,.0f} | {values[-1][2]} |")
    off, on = measured["without the filter"], measured["--quality_filter ko"]
    wall_ratios = [b[0] / a[0] for a, b in zip(off, on)]
    cpu_ratios = [b[1] / a[1] for a, b in zip(off, on)]
    print(f"\nwith the filter / without, median of per-round ratios: wall **{statistics.median(wall_ratios):.2f}x** "
          f"({', '.join(f'{r:.2f}' for r in wall_ratios)}), CPU **{statistics.median(cpu_ratios):.2f}x** "
          f"({', '.join(f'{r:.2f}' for r in cpu_ratios)})\n")


def compare_prepare(other: Path, corpus: Path, workdir: Path, rounds: int, timeout_s: float) -> None:
    """The filtered prepare of this checkout and of `other`, same corpus and tokenizer, alternating."""
    sys.path.insert(0, str(REPO / "bench"))
    from _measure import machine_info, run_measured
    from prep_bench import SEQUENCE_LENGTH
    from prep_setup import train_tokenizer

    tokenizer = workdir / "tokenizer"
    if not (tokenizer / "tokenizer.json").is_file():
        print("training the benchmark tokenizer ...", file=sys.stderr)
        train_tokenizer(corpus, tokenizer)
    checkouts = {"this checkout": REPO, f"{other}": other.resolve()}
    runs = defaultdict(list)
    for round_index in range(rounds):
        order = list(checkouts) if round_index % 2 == 0 else list(checkouts)[::-1]
        for name in order:
            scratch = Path(tempfile.mkdtemp(prefix="prepare-", dir=workdir))
            command = [sys.executable, "train.py", "--tokenize_only", "--dataset", str(corpus), "--tokenizer_path",
                       str(tokenizer), "--max_seq_length", str(SEQUENCE_LENGTH), "--packing", "--cache_dir",
                       str(scratch / "cache"), "--quality_filter", "ko"]
            environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "LD_PRELOAD")}
            try:
                result = run_measured(command, env=environment, cwd=str(checkouts[name]), timeout_s=timeout_s)
                if result["returncode"] != 0:
                    raise SystemExit(f"{name}: the prepare failed:\n{result['stderr'][-3000:]}")
                prepared = Path(result["stdout"].strip().splitlines()[-1].removeprefix("prepared: "))
                manifest = json.loads((prepared / "manifest.json").read_text(encoding="utf-8"))
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            runs[name].append({"wall_s": result["wall_s"], "docs_kept": manifest["docs_kept"],
                               "docs_in": manifest["docs_in"], "dropped": manifest["dropped"]})
            print(f"round {round_index + 1} {name}: {result['wall_s']:.1f} s, kept {manifest['docs_kept']}",
                  file=sys.stderr)
    this, base = runs["this checkout"], runs[f"{other}"]
    ratios = [b["wall_s"] / t["wall_s"] for t, b in zip(this, base)]
    info = machine_info()
    size = corpus.stat().st_size
    print(f"## Filtered prepare, this checkout against {other} ({info['cpu']}, {info['cores']} cores)\n")
    print(f"corpus {corpus.name} ({size / 2**20:.1f} MiB); `train.py --tokenize_only --packing --max_seq_length "
          f"{SEQUENCE_LENGTH} --quality_filter ko`, {rounds} rounds, the order alternating\n")
    print("| checkout | wall s per round | median MiB/s | docs kept |\n|---|---|---:|---:|")
    for name, values in runs.items():
        walls = [run["wall_s"] for run in values]
        print(f"| {name} | {', '.join(f'{w:.1f}' for w in walls)} | {size / 2**20 / statistics.median(walls):.3f} | "
              f"{values[-1]['docs_kept']} of {values[-1]['docs_in']} |")
    print(f"\nthroughput of this checkout / {other}: **{statistics.median(ratios):.2f}x** "
          f"(median of per-round ratios {', '.join(f'{r:.2f}' for r in ratios)})")
    print(f"dropped here: {json.dumps(this[-1]['dropped'], ensure_ascii=False)}")
    print(f"dropped there: {json.dumps(base[-1]['dropped'], ensure_ascii=False)}\n")


def report_breakdown(corpus: list[Path], rounds: int, error) -> None:
    """--breakdown: where the filter's CPU time goes, per genre: Kiwi's analysis, the statistics computed from it,
    and the rest (mojibake check, the cheap rule families, the surface cascade, the Python between them) (issue 48).

    One `QualityFilter` without a thread pool (one core, as bench/quality_cost.py times it) judges each file's texts in
    this process, in rounds (the median is reported). Kiwi's `tokenize` and `korean.prose_statistics` are wrapped to add
    up their own process CPU time; everything else in `judge_batch` is "the rest". Kiwi's model load and first call are
    timed apart: every process that filters pays them once (each spawned worker too). Each genre is judged as shipped and
    with `kiwi_cascade: false` (Kiwi reads every Korean document's sample, as it does where the surface statistics cannot
    decide): text the surface cannot vouch for costs what the second row says.
    """
    import dataclasses
    import time

    if missing := [str(path) for path in corpus if not path.is_file()]:
        error(f"--breakdown: no such file: {', '.join(missing)}")  # argparse's: one line, exit 2
    from rankzero.data.quality import QualityFilter, korean

    started = time.process_time()
    quality = QualityFilter()  # builds Kiwi and makes its first call (the lazy model load)
    load_s = time.process_time() - started
    spent = defaultdict(float)
    kiwi_chars = defaultdict(int)
    tokenize, prose_statistics = quality._kiwi.tokenize, korean.prose_statistics

    def timed_tokenize(text, *rest, **options):
        begin = time.process_time()
        try:
            return tokenize(text, *rest, **options)
        finally:
            spent["kiwi"] += time.process_time() - begin
            kiwi_chars["now"] += len(text)

    def timed_statistics(*values, **options):
        begin = time.process_time()
        try:
            return prose_statistics(*values, **options)
        finally:
            spent["statistics"] += time.process_time() - begin

    quality._kiwi.tokenize, korean.prose_statistics = timed_tokenize, timed_statistics
    filters = {"as shipped": quality,
               "kiwi_cascade: false": quality.with_config(dataclasses.replace(quality.config, kiwi_cascade=False))}
    rows = []
    for path in corpus:
        texts = [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        size = sum(len(text.encode("utf-8")) for text in texts)
        chars = sum(map(len, texts))
        for setting, judge in filters.items():
            measured = []
            for _ in range(rounds):
                spent.clear()
                kiwi_chars.clear()
                begin = time.process_time()
                verdicts = judge.judge_batch(texts)
                total = time.process_time() - begin
                measured.append((total, spent["kiwi"], spent["statistics"], kiwi_chars["now"]))
            total, kiwi, stats = (statistics.median(m[i] for m in measured) for i in range(3))
            rows.append((path.stem, setting, len(texts), size, total, kiwi, stats, measured[0][3] / chars,
                         sum(v is not None for v in verdicts), kiwi / max(measured[0][3], 1) * 1e6))
            print(f"{path.stem}, {setting}: {total:.2f} CPU-s", file=sys.stderr)
    print(f"Kiwi's build and first call: {load_s:.2f} CPU-s, once per filtering process.\n")
    print("| genre | filter | docs | MB | CPU-s per GB | Kiwi | statistics from Kiwi | the rest | characters Kiwi "
          "reads | Kiwi µs per character read | dropped |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, setting, docs, size, total, kiwi, stats, share, dropped, per_char in rows:
        print(f"| {name} | {setting} | {docs} | {size / 1e6:.2f} | {total / size * 1e9:,.0f} | "
              f"{kiwi / size * 1e9:,.0f} | {stats / size * 1e9:,.0f} | {(total - kiwi - stats) / size * 1e9:,.0f} | "
              f"{share:.0%} | {per_char:.1f} | {dropped} |")
    for setting in filters:
        mine = [row for row in rows if row[1] == setting]
        size, total, kiwi, stats = (sum(row[i] for row in mine) for i in (3, 4, 5, 6))
        print(f"| **all** | {setting} | {sum(row[2] for row in mine)} | {size / 1e6:.2f} | "
              f"**{total / size * 1e9:,.0f}** | {kiwi / size * 1e9:,.0f} | {stats / size * 1e9:,.0f} | "
              f"{(total - kiwi - stats) / size * 1e9:,.0f} | | | {sum(row[8] for row in mine)} |")

