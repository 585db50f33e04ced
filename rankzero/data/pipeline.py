"""Preparation, end to end: sources → records→text → quality → tokens → blocks → shuffled Arrow shards.

    manifest = build_dataset(plan, out_dir)      # handoff.py, on the rank that builds (plan.py: make_plan)

The pieces, in the order data flows through them:

    plan.py        sources, tokenizer, quality settings and fingerprint, resolved once; the tokenizer
                   engine (fastokens or HF) chosen by checking its ids on a sample
    stage.py       the per-chunk stage, the same on every engine: records → text → quality → tokens
    dedup/exact.py  exact duplicates, first one wins: one decision for both engines
    split.py       the validation split: held-out documents by the hash of their text, --eval_dataset whole
    mixing.py      SPEC@WEIGHT: mixing ratios and weighted passes, for both engines
    tally.py       what both engines count and decide over the whole corpus, and the manifest made from it
    local.py       the local engine: threads or worker processes on this machine (local_encode.py: stage A,
                   the chunks encoded and consumed in order), exact dedup, mixing, packing into blocks and a
                   uniform seeded shuffle into shards
    ray_engine.py  the Ray engine (--prep_engine ray): the same stage as tasks on a Ray cluster's
    ray_tasks.py   pooled workers (ray_tasks.py: how sources become tasks, what one task does;
    ray_work.py    ray_work.py: the work dir's files, and the earlier tasks' texts a stage task reads)
    shards.py      staging files, bucket scatter, shuffled shards and save_to_disk metadata
    progress.py    the progress line while it runs
    report.py      the summary when it is done (tally.py makes the manifest)

The handoff (`handoff.py`) decides which rank builds, gives it a private directory and publishes it
atomically under the fingerprint once `build_dataset` returns.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from rankzero.data.engines.local import build_local
from rankzero.data.inputs.readers import check_hub_sources
from rankzero.data.plan import Plan
from rankzero.errors import RankzeroError


def build_dataset(plan: Plan, out_dir: Path, on_progress: Callable[[dict], None] | None = None) -> dict:
    """Build the planned dataset into `out_dir` (a private tmp dir); return its manifest. The inputs are
    checked again afterwards: one that changed meanwhile stops the build, whatever was read of it."""
    if plan.workers.prep_engine != "ray":  # Ray refuses hub sources outright, with its own advice (plan_tasks)
        check_hub_sources(plan.sources)  # offline, a hub source fails now and in one line, not after retries
    try:
        if plan.workers.prep_engine == "ray":
            from rankzero.data.engines.ray_engine import build_ray

            manifest = build_ray(plan, out_dir, on_progress)
        else:
            manifest = build_local(plan, out_dir, on_progress)
    except RankzeroError as error:
        # A file cut short by a copy still running reads as a damaged stream or a malformed last line: the
        # cause to name is the change.
        changed = changed_inputs(plan.inputs)
        if changed:
            raise RankzeroError(f"{_changed_message(changed)} (the build stopped on: {error})") from None
        raise
    changed = changed_inputs(plan.inputs)
    if changed:
        raise RankzeroError(_changed_message(changed))
    return manifest


def _changed_message(changed: list[str]) -> str:
    more = f" and {len(changed) - 5} more" if len(changed) > 5 else ""
    return (f"input files changed while they were being prepared: {'; '.join(changed[:5])}{more}. What was read "
            "no longer matches the fingerprint, so nothing was published: run again once the files are complete")


def changed_inputs(inputs: dict) -> list[str]:
    """Input files whose size or mtime now differ from what the fingerprint recorded before the build (a file
    still being written or copied), each described."""
    changed = []
    for group in ("sources", "eval_sources"):
        for source in inputs.get(group, []):
            for recorded in source["identity"].get("files", []):
                path = recorded["path"]
                try:
                    info = os.stat(path)
                except FileNotFoundError:
                    changed.append(f"{path} was removed")
                    continue
                if info.st_size != recorded["size"]:
                    changed.append(f"{path} went from {recorded['size']:,} to {info.st_size:,} bytes")
                elif info.st_mtime_ns != recorded["mtime_ns"]:
                    changed.append(f"{path} was modified (same size)")
    return changed
