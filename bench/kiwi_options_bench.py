"""Kiwi's own options and CPU paths against the quality filter's cost and verdicts (issue 20's lever
"Kiwi's own options"): what each buys per GB of real Korean, and what it changes.

    python bench/real_korean_sets.py --repos DIR --out ../real_ko      # the eleven genres (see its --help)
    python bench/kiwi_options_bench.py --real ../real_ko --rounds 3

Each candidate is the filter as shipped (`QualityFilter()`, one Kiwi, no pool: one core) with the Kiwi it
builds given other constructor arguments, other attributes after construction, or another
`KIWI_ARCH_TYPE` (Kiwi's CPU dispatch, read once per process). Every candidate runs in a fresh process of its
own, the candidates in a new order each round; the quality stage's process CPU time (`judge_batch` alone,
the model load not counted) per GB of UTF-8 text is the median over rounds, the speed-up the median of the
per-round ratios to the default. Verdicts are compared with the default's document by document (kept →
dropped and dropped → kept) and each genre's kept rate with the default's (a move over 1 point is marked).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CANDIDATES = {
    "default": {},
    "arch avx512vnni": {"env": {"KIWI_ARCH_TYPE": "avx512vnni"}},
    "arch avx2": {"env": {"KIWI_ARCH_TYPE": "avx2"}},
    "arch sse4_1": {"env": {"KIWI_ARCH_TYPE": "sse4_1"}},
    "no typo dictionary": {"kwargs": {"load_typo_dict": False}},
    "no multi-word dictionary": {"kwargs": {"load_multi_dict": False}},
    "integrate_allomorph off": {"kwargs": {"integrate_allomorph": False}},
    "cutoff_threshold 4": {"attrs": {"cutoff_threshold": 4.0}},
    "model cong-global": {"kwargs": {"model_type": "cong-global"}},
}

# Runs in a fresh process: the filter as shipped, its Kiwi built with the candidate's arguments.
_JUDGE = """
import json, sys, time
sys.path.insert(0, sys.argv[3])
import kiwipiepy
candidate, paths = json.loads(sys.argv[1]), json.loads(sys.argv[2])
_Kiwi = kiwipiepy.Kiwi
def Kiwi(*args, **kwargs):
    kiwi = _Kiwi(*args, **{**kwargs, **candidate.get("kwargs", {})})
    for name, value in candidate.get("attrs", {}).items():
        setattr(kiwi, name, value)
    return kiwi
kiwipiepy.Kiwi = Kiwi
from rankzero.data.quality import QualityFilter
quality = QualityFilter()
texts = [json.loads(line)["text"] for path in paths for line in open(path, encoding="utf-8") if line.strip()]
start = time.process_time()
verdicts = quality.judge_batch(texts)
json.dump({"cpu_s": time.process_time() - start, "verdicts": verdicts}, sys.stdout)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--real", type=Path, required=True, help="a directory of JSONL files, one genre each")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="+", choices=sorted(CANDIDATES), help="these candidates (and the default)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    paths = sorted(str(path) for path in args.real.glob("*.jsonl"))
    if not paths:
        raise SystemExit(f"--real {args.real}: no .jsonl file in it (see bench/real_korean_sets.py)")
    genres, size_bytes = [], 0
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    genres.append(Path(path).stem)
                    size_bytes += len(json.loads(line)["text"].encode("utf-8"))
    size_gb = size_bytes / 1e9
    names = ["default"] + [name for name in CANDIDATES if name != "default" and (not args.only or name in args.only)]
    rng = random.Random(args.seed)
    cpu, verdicts = defaultdict(list), {}
    for round_index in range(args.rounds):
        order = names[:]
        rng.shuffle(order)
        for name in order:
            candidate = CANDIDATES[name]
            env = {**os.environ, **candidate.get("env", {})}
            result = subprocess.run([sys.executable, "-c", _JUDGE, json.dumps(candidate), json.dumps(paths), str(REPO)],
                                    capture_output=True, text=True, env=env, cwd=REPO)
            if result.returncode != 0:
                print(f"{name}: failed\n{result.stderr[-1500:]}", file=sys.stderr)
                continue
            output = json.loads(result.stdout)
            cpu[name].append(output["cpu_s"])
            verdicts.setdefault(name, output["verdicts"])
            print(f"round {round_index + 1} {name}: {output['cpu_s']:.2f} CPU-s", file=sys.stderr)
    report(names, cpu, verdicts, genres, size_gb, args)


def report(names, cpu, verdicts, genres, size_gb, args) -> None:
    base = verdicts["default"]
    kept_base = _kept_rates(base, genres)
    print(f"{len(genres):,} documents, {size_gb * 1e3:.2f} MB, {args.rounds} rounds, one core "
          f"(`python bench/kiwi_options_bench.py --real {args.real} --rounds {args.rounds}`)\n")
    print("| candidate | CPU-s per GB | speed vs default (rounds) | kept → dropped | dropped → kept | genres moved > 1 point |")
    print("|---|---:|---|---:|---:|---|")
    for name in names:
        if name not in verdicts:
            print(f"| {name} | failed | | | | |")
            continue
        ratios = [cpu["default"][i] / cpu[name][i] for i in range(min(len(cpu["default"]), len(cpu[name])))]
        ours = verdicts[name]
        to_drop = sum(a is None and b is not None for a, b in zip(base, ours))
        to_keep = sum(a is not None and b is None for a, b in zip(base, ours))
        moved = [f"{genre} {100 * (rate - kept_base[genre]):+.1f}" for genre, rate in _kept_rates(ours, genres).items()
                 if abs(rate - kept_base[genre]) > 0.01]
        print(f"| {name} | {statistics.median(cpu[name]) / size_gb:,.0f} | {statistics.median(ratios):.2f}x "
              f"({', '.join(f'{r:.2f}' for r in ratios)}) | {to_drop} | {to_keep} | {', '.join(moved) or 'none'} |")


def _kept_rates(verdicts: list, genres: list[str]) -> dict[str, float]:
    kept, total = defaultdict(int), defaultdict(int)
    for verdict, genre in zip(verdicts, genres):
        total[genre] += 1
        kept[genre] += verdict is None
    return {genre: kept[genre] / total[genre] for genre in total}


if __name__ == "__main__":
    main()
