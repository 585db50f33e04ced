"""Preparation, end to end: sources → records→text → quality → tokens → blocks → shuffled Arrow shards.

    manifest = build_dataset(plan, out_dir)      # handoff.py, on the rank that builds (plan.py: make_plan)

The pieces, in the order data flows through them:

    plan.py        sources, tokenizer, quality settings and fingerprint, resolved once; the tokenizer
                   engine (fastokens or HF) chosen by checking its ids on a sample
    stage.py       the per-chunk stage, the same on every engine: records → text → quality → tokens
    duplicates.py  exact duplicates, first one wins: one decision for both engines
    split.py       the validation split: held-out documents by the hash of their text, --eval_dataset whole
    mixing.py      SPEC@WEIGHT: mixing ratios and weighted passes, for both engines
    local.py       the local engine: threads or worker processes on this machine, exact dedup, mixing,
                   packing into blocks and a uniform seeded shuffle into shards
    ray_engine.py  the Ray engine (--prep_engine ray): the same stage as tasks on a Ray cluster's
    ray_tasks.py   actor pool (ray_tasks.py: how sources become tasks, what one task does)
    shards.py      staging files, bucket scatter, shuffled shards and save_to_disk metadata
    report.py      progress while it runs, the manifest when it is done

The handoff (`handoff.py`) decides which rank builds, gives it a private directory and publishes it
atomically under the fingerprint once `build_dataset` returns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from rankzero.data.local import build_local
from rankzero.data.plan import Plan


def build_dataset(plan: Plan, out_dir: Path, on_progress: Callable[[dict], None] | None = None) -> dict:
    """Build the planned dataset into `out_dir` (a private tmp dir); return its manifest."""
    if plan.workers.prep_engine == "ray":
        from rankzero.data.ray_engine import build_ray

        return build_ray(plan, out_dir, on_progress)
    return build_local(plan, out_dir, on_progress)
