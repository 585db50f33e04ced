"""What a finished build tells people: the summary of its manifest on stderr, and the warnings it calls for.

    print_summary(manifest, final)      # handoff.py, once the dataset is published

The counts and the manifest itself are made by the build's tally (engines/tally.py), the same on either engine.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from rankzero.data import native
from rankzero.data.engines.tally import reasons_text, removal_cause

logger = logging.getLogger(__name__)

UNTRAINABLE_WARN_SHARE = 0.02  # of the SFT samples read: more than noise (a few answerless chats) at this share
EVAL_REMOVED_WARN_SHARE = 0.1  # of the --eval_dataset documents: the evaluation no longer measures the set given


def print_summary(manifest: dict, final: Path) -> None:
    """The published dataset in a few lines on stderr: what went in, what came out, where the time went."""
    timings = manifest["timings"]
    lines = [f"[prepare] published {final}",
             f"  documents  in {manifest['docs_in']:>12,}   kept {manifest['docs_kept']:>12,}",
             f"  tokens        {manifest['tokens']:>12,}   sequences {manifest['sequences']:>9,} x {manifest['max_seq_length']}"
             f"   (final partial block left out: {manifest['tail_tokens_dropped']:,} tokens)"]
    validation = manifest.get("validation")
    if validation:
        lines.append(f"  validation    {validation['tokens']:>12,}   sequences {validation['sequences']:>9,}   "
                     f"({validation['documents']:,} documents held out, in {final / validation['dir']})")
    evaluation = (validation or {}).get("eval_dataset_documents")
    if evaluation and evaluation["removed"]:
        specs = " ".join(validation["eval_dataset"])
        lines.append(f"  eval set   {specs}: {evaluation['read']:,} documents read, {evaluation['held_out']:,} held out, "
                     f"{sum(evaluation['removed'].values()):,} removed ({reasons_text(evaluation['removed'])})")
    if manifest.get("chat_rendering"):
        lines.append(f"  chats      rendered with {manifest['chat_rendering']}")
    if manifest.get("truncated"):
        lines.append(f"  truncated  {manifest['truncated']:>12,}   samples longer than a row, cut at their end")
    for reason, count in manifest["dropped"].items():
        lines.append(f"  dropped {reason:<28} {count:>10,}")
    lines += [f"  mixing     {line}" for line in mixing_lines(manifest["sources"])]
    lines.append("  seconds    " + "  ".join(f"{k[:-2]} {v:.2f}" for k, v in timings.items() if k.endswith("_s")))
    lines.append(f"  throughput {manifest['throughput']['mb_per_s']} MB/s, {manifest['throughput']['tokens_per_s']:,} tokens/s")
    print("\n".join(lines), file=sys.stderr, flush=True)
    for warning in (untrainable_warning(manifest), eval_removed_warning(manifest), passes_warning()):
        if warning:
            logger.warning(warning)


def passes_warning() -> str | None:
    """A warning when the compiled passes are not installed: said once, here, for the whole prepare (its workers run
    the numpy references without a word)."""
    reason = native.missing()
    if reason is None:
        return None
    return (f"{reason}. Near dedup, --decontaminate and --pii mask ran their numpy versions: the same output, more "
            "CPU time (bench/RESULTS.md, 'The passes built at install').")


def eval_removed_warning(manifest: dict) -> str | None:
    """A warning when the prepare took a large share out of --eval_dataset: the evaluation then measures
    another set than the one given."""
    validation = manifest.get("validation") or {}
    evaluation = validation.get("eval_dataset_documents")
    removed = sum(evaluation["removed"].values()) if evaluation else 0
    if not removed or removed / evaluation["read"] < EVAL_REMOVED_WARN_SHARE:
        return None
    return (f"--eval_dataset {' '.join(validation['eval_dataset'])}: the prepare removed {removed:,} of its "
            f"{evaluation['read']:,} documents ({removed / evaluation['read']:.0%}: {reasons_text(evaluation['removed'])}), "
            f"by {removal_cause(evaluation['removed'])}; the evaluation runs on the other {evaluation['held_out']:,}")


def untrainable_warning(manifest: dict) -> str | None:
    """A warning when many SFT samples had nothing to train on: a --max_seq_length too short for the prompts,
    or chats without answers, usually a mistake rather than noise."""
    count, docs_in = manifest["dropped"].get("no_trainable_tokens", 0), manifest["docs_in"]
    if not docs_in or count / docs_in < UNTRAINABLE_WARN_SHARE:
        return None
    return (f"{count:,} of {docs_in:,} SFT samples ({count / docs_in:.1%}) had no token to train on and were dropped "
            f"(no_trainable_tokens): a prompt that fills --max_seq_length {manifest['max_seq_length']} and cuts the "
            "answer off, or a chat with no (or an empty) assistant turn; raise --max_seq_length or check the data")


def mixing_lines(sources: list[dict]) -> list[str]:
    """One line per weighted source that the mix subsamples or repeats: what a weight costs in data."""
    lines = []
    for source in sources:
        if source["evaluation"] or abs(source["ratio"] - 1) < 1e-6:
            continue
        available = source["docs_kept"] - source["validation_documents"]
        used = source["documents_out"]
        if source["ratio"] < 1:
            lines.append(f"{source['spec']}: {used:,} of its {available:,} documents used, {available - used:,} left "
                         f"out (ratio {source['ratio']:.2f})")
        else:
            lines.append(f"{source['spec']}: its {available:,} documents repeated {source['ratio']:.2f}x "
                         f"({used:,} in the output)")
    return lines
