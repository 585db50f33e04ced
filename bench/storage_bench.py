"""Bytes per token of the prepared dataset: input_ids as uint16 (shipped, vocabularies under 65,536 ids)
against int32 (the format before), same corpus, tokenizer and blocks; and the cost of reading them back.

    python bench/storage_bench.py                   # 50 MiB bench corpus, 32k tokenizer, 3 read rounds
    python bench/storage_bench.py --size_mb 5 --rounds 2

Both datasets are built in this process by the same prepare; the baseline only has `plan.token_dtype`
return "int32". Checked: the two hold the same blocks (every row equal as int64). Read: every row through
`datasets.load_from_disk(...).with_format("numpy")` in batches of 64 rows, as the Trainer's loader reads
them, widened to int64 as the collator does; alternating order per round, page cache warm for both.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

import numpy as np

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from _measure import machine_info  # noqa: E402
from prep_bench import SEQUENCE_LENGTH  # noqa: E402
from prep_setup import make_corpus, train_tokenizer  # noqa: E402


def build(corpus: Path, tokenizer: Path, cache: Path, dtype: str | None) -> Path:
    from rankzero.args import parse_args
    from rankzero.data import plan as plan_module
    from rankzero.data.handoff import prepare_or_wait
    from rankzero.runtime import Runtime

    args = parse_args(["--tokenize_only", "--dataset", str(corpus), "--tokenizer_path", str(tokenizer),
                       "--max_seq_length", str(SEQUENCE_LENGTH), "--packing", "--cache_dir", str(cache)])
    patch = mock.patch.object(plan_module, "token_dtype", lambda _: dtype) if dtype else mock.patch.dict({})
    with patch:
        plan = plan_module.make_plan(args.sources, args.stage, args.packing, args.dedup, args.workers, 0)
        return prepare_or_wait(plan, args.cache, Runtime(0, 1, 0, 1, 0, "bench"))


def data_bytes(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.glob("data-*.arrow"))


def read_all(directory: Path) -> tuple[float, int]:
    import datasets

    dataset = datasets.load_from_disk(str(directory)).with_format("numpy", columns=["input_ids"])
    start, tokens = time.perf_counter(), 0
    for first in range(0, len(dataset), 64):
        for row in dataset[first:first + 64]["input_ids"]:
            tokens += len(np.asarray(row, dtype=np.int64))
    return time.perf_counter() - start, tokens


def same_blocks(first: Path, second: Path) -> bool:
    import datasets

    a, b = (datasets.load_from_disk(str(d)).with_format("numpy", columns=["input_ids"]) for d in (first, second))
    return len(a) == len(b) and all(np.array_equal(np.asarray(x, np.int64), np.asarray(y, np.int64))
                                    for x, y in zip(a["input_ids"], b["input_ids"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size_mb", type=float, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=BENCH / "out" / "storage")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    corpus, _ = make_corpus(args.workdir, args.size_mb, args.seed)
    tokenizer = args.workdir / "tokenizer"
    if not (tokenizer / "tokenizer.json").is_file():
        train_tokenizer(corpus, tokenizer)
    with tempfile.TemporaryDirectory(dir=args.workdir) as scratch:
        outputs = {"uint16 (shipped)": build(corpus, tokenizer, Path(scratch) / "narrow", None),
                   "int32 (before)": build(corpus, tokenizer, Path(scratch) / "wide", "int32")}
        assert same_blocks(*outputs.values()), "the two formats hold different blocks"
        seconds: dict[str, list[float]] = {name: [] for name in outputs}
        tokens = 0
        for round_index in range(args.rounds):
            for name in (list(outputs) if round_index % 2 == 0 else list(outputs)[::-1]):
                elapsed, tokens = read_all(outputs[name])
                seconds[name].append(elapsed)
        sizes = {name: data_bytes(path) for name, path in outputs.items()}
        info = machine_info()
        print(f"## Stored bytes per token ({info['cpu']}, {info['cores']} cores)\n")
        print(f"{corpus.name} ({corpus.stat().st_size / 2**20:.1f} MiB), max_seq_length {SEQUENCE_LENGTH}, "
              f"{tokens:,} tokens in blocks; read: every row, {args.rounds} rounds alternating\n")
        print("| input_ids | data files, bytes | bytes per token | read s per round (median) |\n|---|---:|---:|---:|")
        for name in outputs:
            print(f"| {name} | {sizes[name]:,} | {sizes[name] / tokens:.3f} | "
                  f"{', '.join(f'{s:.2f}' for s in seconds[name])} ({statistics.median(seconds[name]):.2f}) |")
        narrow, wide = outputs
        reads = [n / w for n, w in zip(seconds[narrow], seconds[wide])]
        print(f"\nbytes uint16 / int32: **{sizes[narrow] / sizes[wide]:.3f}**; read time uint16 / int32: "
              f"{statistics.median(reads):.2f} (median of per-round ratios {', '.join(f'{r:.2f}' for r in reads)}); "
              "same blocks: yes")


if __name__ == "__main__":
    main()
