"""What near dedup costs: the build's CPU time with `--dedup near` against `--dedup none`, on real Korean (issue 30).

    python bench/dedup_cost_bench.py --real_dir ../shared/corpora/ko_real_dev --rounds 5 [--tokenizer TOK]

Two corpora from the real documents: as they are, and with planted exact copies (every document four times,
in a seeded random order: 75% of the documents repeat an earlier one, as in the peer corpus of issue 30).
Each measurement is a fresh process that makes the plan, then times `build_dataset` alone: CPU seconds of
every thread of the process (getrusage), so the start-up, the imports and the tokenizer-engine check, which do
not depend on the dedup, are left out of both sides. Rounds pair `none` with `near` in alternating order; the
ratio reported is the median of the per-round ratios (the VM's speed drifts). The builder runs with the
given `--num_proc` (default 1: the stage's own cost, not the thread pool's). The markdown printed at the end
is ready for bench/RESULTS.md.
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
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

from _measure import machine_info  # noqa: E402

MEASURE = """
import json, resource, sys, tempfile
from pathlib import Path
from rankzero.args import parse_args
from rankzero.data.pipeline import build_dataset
from rankzero.data.plan import make_plan
corpus, tokenizer, dedup, num_proc, numpy_chars = sys.argv[1:6]
if numpy_chars:  # what a process hashes with numpy before the compiled pass (minhash.shingle_hashes)
    from rankzero.data.dedup import minhash
    minhash._numpy_chars_left = int(numpy_chars)
args = parse_args(["--tokenize_only", "--dataset", corpus, "--tokenizer_path", tokenizer, "--dedup", dedup,
                   "--max_seq_length", "1024", "--dataset_num_proc", num_proc, "--cache_dir", tempfile.mkdtemp()])
plan = make_plan(args.sources, args.stage, args.packing, args.dedup, args.workers, args.seed)
plan.choose_engine()  # the check's encode, outside the timing (build_dataset makes it again, cheaply warm)
before = resource.getrusage(resource.RUSAGE_SELF)
out = Path(tempfile.mkdtemp()) / "out"
out.mkdir()
manifest = build_dataset(plan, out)
after = resource.getrusage(resource.RUSAGE_SELF)
cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
print(json.dumps({"cpu_s": cpu, "dropped": manifest["dropped"], "docs_kept": manifest["docs_kept"],
                  "stage_s": manifest["timings"]["encode_stage_seconds_summed_over_workers"]}))
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


def measure(repo: Path, corpus: Path, tokenizer: Path, dedup: str, num_proc: int, numpy_chars: int | None) -> dict:
    result = subprocess.run([sys.executable, "-c", MEASURE, str(corpus), str(tokenizer), dedup, str(num_proc),
                             "" if numpy_chars is None else str(numpy_chars)],
                            cwd=repo, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(repo)})
    if result.returncode:
        raise SystemExit(f"the build failed ({repo}, --dedup {dedup}):\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--real_dir", type=Path, required=True, help="a directory of real Korean JSONL (text field)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--num_proc", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tokenizer", type=Path, default=None, help="HF tokenizer dir (default: one trained here)")
    parser.add_argument("--repo", type=Path, default=REPO, help="the rankzero checkout measured (another commit's)")
    parser.add_argument("--corpora", nargs="+", default=["real", "real, 75% exact copies"],
                        choices=["real", "real, 75% exact copies"], help="which of the two corpora to measure")
    parser.add_argument("--numpy_chars", type=int, default=None,
                        help="characters a process hashes with numpy before the compiled pass (default: "
                             "minhash.NUMPY_CHARS; 0: the compiled pass from the first character)")
    args = parser.parse_args()
    from prep_setup import train_tokenizer

    work = Path(tempfile.mkdtemp(prefix="dedup-cost-"))
    corpora = write_corpora(args.real_dir, work, args.seed)
    tokenizer = args.tokenizer
    if tokenizer is None:
        tokenizer = work / "tokenizer"
        print(f"tokenizer: {train_tokenizer(corpora['real'], tokenizer)}", file=sys.stderr)
    started = datetime.datetime.now(datetime.timezone.utc)
    rows = []
    for name, corpus in corpora.items():
        if name not in args.corpora:
            continue
        ratios, cpu, last = [], {"none": [], "near": []}, {}
        for round_index in range(args.rounds):
            order = ("none", "near") if round_index % 2 == 0 else ("near", "none")
            result = {mode: measure(args.repo, corpus, tokenizer, mode, args.num_proc, args.numpy_chars)
                      for mode in order}
            for mode in order:
                cpu[mode].append(result[mode]["cpu_s"])
            ratios.append(result["near"]["cpu_s"] / result["none"]["cpu_s"])
            last = result
            print(f"{name} round {round_index}: none {result['none']['cpu_s']:.3f} s, near "
                  f"{result['near']['cpu_s']:.3f} s, ratio {ratios[-1]:.3f}", file=sys.stderr)
        rows.append(f"| {name} | {statistics.median(cpu['none']):.3f} | {statistics.median(cpu['near']):.3f} | "
                    f"**{statistics.median(ratios):.2f}** ({', '.join(f'{r:.2f}' for r in ratios)}) | "
                    f"{last['near']['dropped']} | {json.dumps({k: round(v, 3) for k, v in last['near']['stage_s'].items()})} |")
    info = machine_info()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=args.repo, capture_output=True, text=True).stdout
    print(f"\n{started:%Y-%m-%d %H:%M} UTC, {info}, rankzero at {commit.strip()}, {args.rounds} paired rounds, "
          f"--dataset_num_proc {args.num_proc}"
          + ("" if args.numpy_chars is None else f", --numpy_chars {args.numpy_chars}") + "\n")
    print("| corpus | none CPU-s | near CPU-s | near / none (rounds) | near dropped | near stage seconds |")
    print("|---|---:|---:|---:|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
