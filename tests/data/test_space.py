"""The disk a build needs (rankzero/data/space.py): the estimate made before it starts covers what the build really
holds at its peak, --dedup near's files included (issue 29: 6.7 MB free against "needs about 6.1 MB", then out of
space, while the same build with --dedup none fit)."""

from __future__ import annotations

import os

import pytest

from helpers import data_args, korean_documents, plan_of, prepare, write_jsonl


def _bytes_under(directory) -> int:
    return sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(directory) for name in names)


@pytest.mark.parametrize("spills", [False, True])
def test_the_space_estimate_covers_near_dedups_files_at_their_peak(tmp_path, tokenizer_dir, monkeypatch, spills):
    """The peak: when near dedup decides, the staged tokens, every signature and (past the memory budget) every
    band key spilled as sorted runs are on disk at once, in the build dir."""
    from rankzero.data.dedup import near as neardup
    from rankzero.data.plan import Plan
    from rankzero.data.space import space_needed

    if spills:
        monkeypatch.setattr(Plan, "dedup_memory_bytes", property(lambda plan: 64 << 10))
    # Five sentences a document: the prose-like token density the estimate's bytes per token is set for.
    corpus = write_jsonl(tmp_path / "ko.jsonl", [{"text": t} for t in korean_documents(3000, seed=2, sentences=5)])
    cache = tmp_path / "cache"
    peak = []
    decide = neardup.NearDuplicates.decide

    def measured(self):
        peak.append(_bytes_under(cache))
        return decide(self)

    monkeypatch.setattr(neardup.NearDuplicates, "decide", measured)
    args = data_args(tokenizer_dir, cache, [corpus], max_seq_length=64)
    plan = plan_of(args)
    out = prepare(args)
    assert len(peak) == 1 and (out / "manifest.json").exists()
    needed = space_needed(plan.sources, plan.with_labels, plan.dedup.dedup_threshold, plan.dedup_memory_bytes)
    tokens_only = space_needed(plan.sources, plan.with_labels)
    assert tokens_only < peak[0] <= needed, (tokens_only, peak[0], needed)
    assert needed < 2 * peak[0]  # an estimate, not a refusal of every build
