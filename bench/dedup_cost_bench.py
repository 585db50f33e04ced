"""What near dedup costs: the build's CPU time with `--dedup near` against `--dedup none`, on real Korean (issue 30).

    python bench/dedup_cost_bench.py --real_dir ../shared/corpora/ko_real_dev --rounds 5 [--tokenizer TOK]
    python bench/dedup_cost_bench.py --real_dir /work/real_ko --engines local ray --rounds 3 --max_load 3

Two corpora from the real documents: as they are, and with planted exact copies (every document four times,
in a seeded random order: 75% of the documents repeat an earlier one, as in the peer corpus of issue 30).
Each measurement is a fresh process that makes the plan (and for `--engines ray` starts a local Ray cluster of
`--ray_cpus`, the tests' 2, and runs a throwaway Ray Data job so Ray Data's per-session actors exist); the bench
waits until its process tree idles (Ray prestarts workers), and then times `build_dataset` alone; build_ray joins the
cluster that is up. The figure is the user + system CPU of the whole process tree over that call — the driver,
and with Ray its gcs_server, raylet and every worker — read from this process by polling /proc every 25 ms
(_measure.TreeCPU: getrusage in the driver cannot see Ray's workers), so the start-up, the imports, the
tokenizer-engine check and the cluster's start are left out of both sides. Before each build the settled tree
is watched `--idle_s` seconds: its idle rate (Ray's daemons) is reported beside, not subtracted. The driver's
own getrusage is reported too (for the local engine the two must agree). Rounds pair `none` with `near` in
alternating order after `--max_load` waiting; the ratio reported is the median of the per-round ratios (the
VM's speed drifts). The local builder runs with the given `--num_proc` (default 1: the stage's own cost, not
the thread pool's). The builds run under glibc malloc (train.py's tcmalloc re-exec is not on this path) unless
LD_PRELOAD names another. The markdown printed at the end is ready for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

from _measure import TreeCPU, machine_info  # noqa: E402
from prep_bench import usable_cores, wait_for_quiet  # noqa: E402

MEASURE = """
import json, logging, os, resource, sys, tempfile, time
from pathlib import Path
protocol = os.fdopen(os.dup(1), "w", buffering=1)  # the bench's lines; anything the build prints goes to stderr
os.dup2(2, 1)
corpus, tokenizer, dedup, num_proc, numpy, engine, ray_cpus, task_mb = sys.argv[1:9]
if numpy:  # as in a process without a C compiler: the numpy references (native.py)
    from rankzero.data import native
    native.library = lambda: None
from rankzero.args import parse_args
from rankzero.data.pipeline import build_dataset
from rankzero.data.plan import make_plan
flags = ["--tokenize_only", "--dataset", corpus, "--tokenizer_path", tokenizer, "--dedup", dedup,
         "--max_seq_length", "1024", "--dataset_num_proc", num_proc, "--cache_dir", tempfile.mkdtemp(),
         "--prep_engine", engine]
if engine == "ray":
    import ray, ray.data
    # The cluster the tests use (2 CPUs), started here so that its start is outside the window: build_ray joins
    # a cluster that is already up and leaves it up. A throwaway dataset starts Ray Data's per-session actors.
    ray.init(num_cpus=int(ray_cpus), object_store_memory=256 << 20, include_dashboard=False,
             logging_level=logging.ERROR, log_to_driver=False)
    ray.data.range(2, override_num_blocks=2).map_batches(lambda batch: batch).take_all()
    flags += ["--ray_task_mb", task_mb]
args = parse_args(flags)
plan = make_plan(args.sources, args.stage, args.packing, args.dedup, args.workers, args.seed)
plan.choose_engine()  # the check's encode, outside the timing (build_dataset makes it again, cheaply warm)
protocol.write("ready\\n")
sys.stdin.readline()  # the bench waits for the tree to idle, reads the idle rate, then its baseline, then says go
before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
out = Path(tempfile.mkdtemp()) / "out"
out.mkdir()
manifest = build_dataset(plan, out)
wall, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF)
protocol.write("done\\n")
sys.stdin.readline()
cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
if engine == "ray":
    ray.shutdown()
protocol.write(json.dumps({"driver_cpu_s": cpu, "wall_s": wall, "dropped": manifest["dropped"],
                           "docs_kept": manifest["docs_kept"], "sequences": manifest["sequences"],
                           "stage_s": manifest["timings"]["encode_stage_seconds_summed_over_workers"]}) + "\\n")
"""


def write_corpora(real_dir: Path, work: Path, seed: int) -> dict[str, Path]:
    texts = [json.loads(line)["text"] for path in sorted(real_dir.glob("*.jsonl"))
             for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not texts:
        raise SystemExit(f"--real_dir {real_dir}: no *.jsonl documents there")
    copies = texts * 4
    random.Random(seed).shuffle(copies)
    corpora = {}
    for name, documents in (("real", texts), ("real, 75% exact copies", copies)):
        path = work / f"{len(corpora)}.jsonl"
        path.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in documents), encoding="utf-8")
        corpora[name] = path
    return corpora


class BuildFailed(Exception):
    pass


def measure(repo: Path, corpus: Path, tokenizer: Path, dedup: str, engine: str, args, attempts: int = 3) -> dict:
    """`measure_once`, again on a failure: on a loaded machine a local Ray cluster can time out starting."""
    for attempt in range(attempts):
        try:
            return measure_once(repo, corpus, tokenizer, dedup, engine, args)
        except BuildFailed as failure:
            if attempt == attempts - 1:
                raise SystemExit(str(failure)) from None
            print(f"{failure}\n(attempt {attempt + 1} of {attempts}: again)", file=sys.stderr, flush=True)


def measure_once(repo: Path, corpus: Path, tokenizer: Path, dedup: str, engine: str, args) -> dict:
    """One build in a fresh process: the CPU of its whole process tree (the driver, and with Ray the cluster it
    started) from the moment it calls build_dataset until it returns, read from here (TreeCPU)."""
    command = [sys.executable, "-c", MEASURE, str(corpus), str(tokenizer), dedup, str(args.num_proc),
               "1" if args.numpy else "", engine, str(args.ray_cpus),
               str(args.ray_task_mb)]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | {"PYTHONPATH": str(repo)}
    with tempfile.TemporaryFile("w+") as stderr:
        child = subprocess.Popen(command, cwd=repo, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=stderr, text=True)

        def expect(word: str) -> str:
            line = child.stdout.readline()
            if word and line.strip() != word:
                child.kill()
                child.wait()
                stderr.seek(0)
                raise BuildFailed(f"the build failed ({repo}, --dedup {dedup}, {engine}):\n{stderr.read()[-3000:]}")
            return line

        expect("ready")
        cpu = TreeCPU(child.pid)
        settle_start = time.monotonic()
        while time.monotonic() - settle_start < 60:  # Ray prestarts workers that import for a second or two
            cpu.start()
            time.sleep(1.0)
            if cpu.stop() < 0.05:
                break
        settled_s = time.monotonic() - settle_start
        cpu.start()  # the idle rate: what the settled tree (Ray's daemons) burns doing nothing
        time.sleep(args.idle_s)
        idle_rate = cpu.stop() / args.idle_s
        cpu.start()
        child.stdin.write("go\n")
        child.stdin.flush()
        expect("done")
        tree_cpu = cpu.stop()
        child.stdin.write("go\n")
        child.stdin.flush()
        result = json.loads(expect(""))
        child.wait()
    return result | {"cpu_s": tree_cpu, "settle_s": settled_s, "idle_cores": idle_rate, "processes": cpu.processes,
                     "exited": cpu.exited,
                     "by_process": {name: round(seconds, 3) for name, seconds in cpu.by_process().items()
                                    if seconds >= 0.005}}


def paired_rounds(name: str, engine: str, corpus: Path, tokenizer: Path, args) -> dict:
    """`args.rounds` rounds of none and near, the order alternating, each after waiting for a quieter machine."""
    rounds = []
    for index in range(args.rounds):
        load = wait_for_quiet(args.max_load, args.max_wait_s)
        order = ("none", "near") if index % 2 == 0 else ("near", "none")
        result = {mode: measure(args.repo, corpus, tokenizer, mode, engine, args) for mode in order}
        ratio = result["near"]["cpu_s"] / result["none"]["cpu_s"]
        rounds.append({"load": load, "order": order, "ratio": ratio, **result})
        print(f"{name}, {engine}, round {index} ({' first, '.join(order)} second, load {load:.2f}): none "
              f"{result['none']['cpu_s']:.3f} CPU-s, near {result['near']['cpu_s']:.3f}, ratio {ratio:.3f}; "
              + "; ".join(f"{mode}: wall {r['wall_s']:.2f} s, driver {r['driver_cpu_s']:.3f} CPU-s, "
                          f"{r['processes']} processes ({r['exited']} exited), idle {r['idle_cores']:.3f} cores"
                          for mode, r in result.items()), file=sys.stderr, flush=True)
    return {"corpus": name, "engine": engine, "rounds": rounds}


def table_row(series: dict) -> str:
    rounds = series["rounds"]
    med = {mode: statistics.median(r[mode]["cpu_s"] for r in rounds) for mode in ("none", "near")}
    wall = {mode: statistics.median(r[mode]["wall_s"] for r in rounds) for mode in ("none", "near")}
    ratios = [r["ratio"] for r in rounds]
    ratio = statistics.median(ratios)
    loads = ", ".join(f"{r['load']:.1f}" for r in rounds)
    # Sanity: the tree cannot burn more than the machine's cores over the window.
    busy = max(r[mode]["cpu_s"] / (r[mode]["wall_s"] * usable_cores()) for r in rounds for mode in ("none", "near"))
    return (f"| {series['corpus']} | {series['engine']} | {med['none']:.2f} | {med['near']:.2f} | "
            f"**{ratio:.2f}** ({', '.join(f'{x:.2f}' for x in ratios)}) | {'yes' if ratio <= 1.2 else '**no**'} | "
            f"{loads} | {wall['none']:.1f} / {wall['near']:.1f} | "
            f"{statistics.median(r['none']['idle_cores'] for r in rounds):.3f} | {busy:.2f} | "
            f"{rounds[-1]['near']['dropped']} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--real_dir", type=Path, required=True, help="a directory of real Korean JSONL (text field)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--num_proc", type=int, default=1, help="--dataset_num_proc of the local engine's build")
    parser.add_argument("--engines", nargs="+", default=["local"], choices=["local", "ray"])
    parser.add_argument("--ray_cpus", type=int, default=2, help="CPUs of the local Ray cluster (the tests' 2)")
    parser.add_argument("--ray_task_mb", type=float, default=4,
                        help="--ray_task_mb of the Ray builds: small enough that both actors get tasks")
    parser.add_argument("--idle_s", type=float, default=2.0, help="seconds the settled tree is watched idle")
    parser.add_argument("--max_load", type=float, default=None, help="wait before a round until the load is below")
    parser.add_argument("--max_wait_s", type=float, default=300, help="the longest --max_load waits")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tokenizer", type=Path, default=None, help="HF tokenizer dir (default: one trained here)")
    parser.add_argument("--repo", type=Path, default=REPO, help="the rankzero checkout measured (another commit's)")
    parser.add_argument("--corpora", nargs="+", default=["real", "real, 75% exact copies"],
                        choices=["real", "real, 75% exact copies"], help="which of the two corpora to measure")
    parser.add_argument("--numpy", action="store_true",
                        help="the numpy references instead of the compiled passes (as without a C compiler)")
    parser.add_argument("--out", type=Path, default=None, help="write every round as JSON here")
    args = parser.parse_args()
    from prep_setup import train_tokenizer

    work = Path(tempfile.mkdtemp(prefix="dedup-cost-"))
    corpora = write_corpora(args.real_dir, work, args.seed)
    tokenizer = args.tokenizer
    if tokenizer is None:
        tokenizer = work / "tokenizer"
        print(f"tokenizer: {train_tokenizer(corpora['real'], tokenizer)}", file=sys.stderr)
    started = datetime.datetime.now(datetime.timezone.utc)
    series = [paired_rounds(name, engine, corpus, tokenizer, args)
              for name, corpus in corpora.items() if name in args.corpora for engine in args.engines]
    if args.out:
        args.out.write_text(json.dumps(series, indent=1), encoding="utf-8")
    info = machine_info()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=args.repo, capture_output=True, text=True).stdout
    print(f"\n{started:%Y-%m-%d %H:%M} UTC, {info}, rankzero at {commit.strip()}, {args.rounds} paired rounds, "
          f"--dataset_num_proc {args.num_proc}, Ray: a local cluster of {args.ray_cpus} CPUs, --ray_task_mb "
          f"{args.ray_task_mb:g}" + (", --numpy" if args.numpy else "") + "\n")
    print("| corpus | engine | none CPU-s | near CPU-s | near / none (rounds) | ≤ 1.2x | load per round | "
          "wall s none / near | idle cores | CPU / (wall x cores), max | near dropped |")
    print("|---|---|---:|---:|---:|---|---|---:|---:|---:|---|")
    print("\n".join(table_row(s) for s in series))


if __name__ == "__main__":
    main()
