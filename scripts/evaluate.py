"""Score a model dir on Korean multiple-choice benchmarks, as lm-evaluation-harness scores them.

    python scripts/evaluate.py runs/demo --benchmarks kmmlu/ kobest_copa-test.jsonl --benchmark_shots 5
    python scripts/evaluate.py base-model/ --benchmarks haerae.jsonl --benchmark_max_items 500 --output before.json
    torchrun --nproc_per_node 2 scripts/evaluate.py runs/demo --benchmarks kmmlu/          # items split over ranks
    torchrun --nproc_per_node 8 scripts/evaluate.py runs/8b --benchmarks kmmlu/ --fsdp     # each layer sharded

MODEL_DIR is any Hugging Face causal LM dir with its tokenizer: a run's --output_dir (its final model) or a base
model. The benchmark files and the shapes read are in rankzero/data/screen/benchmark_files.py, the scoring in
rankzero/train/benchmarks.py (the same code the training loop runs). Rank 0 prints a table and, with --output,
writes the scores and every item's prediction as JSON. A benchmark file that cannot be scored is one error line
(exit 2) before the model is loaded.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from rankzero.errors import RankzeroError


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("model_dir", help="a dir with the model and its tokenizer (a run's --output_dir, a base model)")
    parser.add_argument("--benchmarks", nargs="+", required=True, metavar="PATH",
                        help="benchmark files or directories (one benchmark per path; KMMLU CSV, KoBEST / HAE-RAE / "
                             "CLIcK JSON or JSONL)")
    parser.add_argument("--benchmark_shots", type=int, default=0,
                        help="examples before each item (lm-eval's num_fewshot)")
    parser.add_argument("--benchmark_max_items", type=int, default=None,
                        help="score a fixed, seeded subset of this many items per benchmark (default: all)")
    parser.add_argument("--seed", type=int, default=1234, help="draws the shots and the subset (lm-eval's default)")
    parser.add_argument("--batch_size", type=int, default=8, help="requests (item × choice) per forward")
    parser.add_argument("--fsdp", action="store_true", help="shard the model over the ranks (FSDP2, one unit per "
                                                            "decoder layer) for a model too large for one device")
    parser.add_argument("--output", type=Path, default=None, help="write the scores and predictions here (JSON)")
    args = parser.parse_args(argv)
    for name in ("benchmark_shots", "batch_size", "benchmark_max_items"):
        value = getattr(args, name)
        if value is not None and value < (0 if name == "benchmark_shots" else 1):
            parser.error(f"--{name} {value}: give {'0' if name == 'benchmark_shots' else '1'} or more")
    model_dir = Path(args.model_dir)
    if not (model_dir / "config.json").is_file():
        parser.error(f"{model_dir}: no config.json here; give a model dir (a finished run's --output_dir; a sharded "
                     "checkpoint is exported by scripts/export_checkpoint.py)")
    return args


def _shard(model) -> None:
    """FSDP2 as training shards: each decoder layer (the model's `_no_split_modules`) one unit, then the rest."""
    from torch.distributed.fsdp import fully_shard

    layer_classes = set(getattr(model, "_no_split_modules", None) or [])
    for module in model.modules():
        if type(module).__name__ in layer_classes:
            fully_shard(module)
    fully_shard(model)


def _table(scores: dict, seconds: float) -> str:
    lines = [f"{'benchmark':<24} {'items':>7} {'shots':>5} {'acc':>7} {'acc_norm':>8}"]
    for name, score in scores.items():
        lines.append(f"{name:<24} {score['items']:>7} {score['shots']:>5} {score['acc']:>7.4f} "
                     f"{score['acc_norm']:>8.4f}")
    items = sum(score["items"] for score in scores.values())
    lines.append(f"{items} items in {seconds:.1f} s ({1000 * seconds / max(items, 1):.1f} s per 1,000 items)")
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    from rankzero.data.screen.benchmark_files import read_suites

    try:  # before torch and the model: a bad file costs a second, not a model load
        suites = read_suites(args.benchmarks, shots=args.benchmark_shots, max_items=args.benchmark_max_items,
                             seed=args.seed)
    except RankzeroError as error:
        if rank == 0:
            print(f"error: {error}", file=sys.stderr, flush=True)
        return 2

    import torch
    import torch.distributed as dist
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rankzero.train.benchmarks import score_suites

    cuda = torch.cuda.is_available()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")
    if world > 1:
        if cuda:
            torch.cuda.set_device(device)
        dist.init_process_group("nccl" if cuda else "gloo")
    try:
        tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
        model = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=torch.float32).to(device)
        if args.fsdp:
            if world == 1:
                print("warning: --fsdp on one process shards nothing; run under torchrun to split the model",
                      file=sys.stderr, flush=True)
            else:
                _shard(model)
        started = time.perf_counter()
        scores = score_suites(model, tokenizer, suites, batch_size=args.batch_size)
        seconds = time.perf_counter() - started
        if rank == 0:
            print(_table(scores, seconds), flush=True)
            if args.output:
                settings = {"model_dir": str(args.model_dir), "benchmarks": [str(p) for p in args.benchmarks],
                            "shots": args.benchmark_shots, "max_items": args.benchmark_max_items, "seed": args.seed,
                            "ranks": world, "fsdp": args.fsdp, "seconds": round(seconds, 3)}
                partial = args.output.with_name(args.output.name + ".partial")
                partial.write_text(json.dumps({"settings": settings, "benchmarks": scores}, ensure_ascii=False,
                                              indent=1), encoding="utf-8")
                os.replace(partial, args.output)  # a reader never sees half a file
                print(f"wrote {args.output}", flush=True)
    except RankzeroError as error:  # score_suites raises it on every rank alike: said once
        if rank == 0:
            print(f"error: {error}", file=sys.stderr, flush=True)
        return 1
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
