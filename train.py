"""rankzero entry point: arguments → runtime → data (prepare once, or wait) → model → Trainer.

    python train.py --tokenize_only --dataset data/sample/ko.jsonl --tokenizer_path DIR --max_seq_length 512
    torchrun --nproc_per_node 2 train.py --dataset ... --tokenizer_path DIR --model_config configs/model_config_tiny.json \
        --output_dir runs/tiny --max_steps 100
    python train.py configs/recipes/demo.yaml --max_steps 10      # a YAML recipe, CLI flags win

The data is prepared by one rank (per node when nodes share no filesystem) before any process group
exists; the other ranks wait on its marker file, so a long preparation never trips a collective timeout.
"""

from __future__ import annotations

import os
import sys
import time

# numpy's bundled OpenBLAS starts one thread per core at import, and they spin for ~0.1 CPU-s each
# before sleeping; nothing here calls numpy's BLAS (torch brings its own MKL/cuBLAS).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main(argv: list[str] | None = None) -> int:
    from rankzero.args import parse_args
    from rankzero.logging_utils import setup_logging
    from rankzero.runtime import Runtime
    from rankzero.train.output_dir import hold_output_dir  # stdlib only: the --tokenize_only path stays light

    runtime = Runtime.from_env()
    setup_logging(runtime)
    args = parse_args(argv)  # every problem in the arguments, before any data work (and before torch, for ours)
    if args.replayed and runtime.is_main:  # a run's recipe.yaml replayed into this one: what it took, and why not more
        from rankzero.recipe import describe

        for line in describe(args.replayed):
            print(line, flush=True)
    if args.tokenize_only and runtime.is_main:  # a training run prints these with the Trainer's defaults
        for name, value in args.defaults.items():
            print(f"[prepare] --{name} {value}: set because not given", file=sys.stderr, flush=True)

    from rankzero.data.fastokens_ahead import building_ahead

    # Held from before the prepare, so that a second job given this output dir stops at once.
    with hold_output_dir(None if args.tokenize_only else args.training.output_dir, runtime):
        # Every builder is a local rank 0 (handoff.is_builder): the fastokens tokenizer it will check is built on
        # a thread beside the imports and the plan below, not after them.
        with building_ahead(args.stage.tokenizer_path, args.stage.tokenizer_engine,
                            may_build=runtime.local_rank == 0):
            from rankzero.data.handoff import prepare_or_wait
            from rankzero.data.plan import make_plan

            started = time.perf_counter()
            plan = make_plan(args.sources, args.stage, args.packing, args.dedup, args.workers, args.seed)
            prepared = prepare_or_wait(plan, args.cache, runtime)
        # --tokenize_only: every rank says where the data is (a scheduler's script may read any rank's stdout);
        # a training launch says it once, as it prints the rest of its set-up.
        if args.tokenize_only or runtime.is_main:
            print(f"[prepare] data ready in {time.perf_counter() - started:.2f} s", file=sys.stderr, flush=True)
            print(f"prepared: {prepared}", flush=True)
        if args.tokenize_only:
            return 0

        from rankzero.train.run import train

        train(args, runtime, prepared)
    return 0


if __name__ == "__main__":
    from rankzero.errors import run_cli
    from rankzero.malloc import reexec_preloaded

    # First thing: re-execute under tcmalloc when it is installed (rankzero/malloc.py says why); this
    # returns only when the process is not replaced.
    status = run_cli(reexec_preloaded)
    sys.exit(status or run_cli(main))
