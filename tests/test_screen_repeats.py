"""A repeat of a kept text the screen left untouched is dropped before the screen (stage.py, local.py): what the
screen reports, what is dropped and what is kept are exactly what screening it would have given."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import data_args, korean_documents, plan_of, write_jsonl
from test_prepare_pii import planted_corpus

from rankzero.data.readers import iter_chunks
from rankzero.data.screen import Screen
from rankzero.data.stage import Stage, StageSpec


@pytest.fixture
def chunks(tmp_path, tokenizer_dir):
    """The planted corpus (personal data in 4 documents, 2 benchmark questions, a contact dump), then the same
    documents again with new ones between them: the second chunk's repeats, touched or not, of the first's."""
    corpus, benchmark = planted_corpus(tmp_path)
    first = corpus.read_text(encoding="utf-8").splitlines()
    fresh = [f'{{"text": "{text}"}}' for text in korean_documents(30, seed=9)]
    again = tmp_path / "again.jsonl"
    again.write_text("\n".join(line for pair in zip(first, fresh * 4) for line in pair) + "\n", encoding="utf-8")
    args = data_args(tokenizer_dir, tmp_path / "cache", [corpus, again], decontaminate=[str(benchmark)])
    return args, [next(iter_chunks(source, index, 1000)) for index, source in enumerate(plan_of(args).sources)]


def test_the_screen_skips_untouched_repeats_and_nothing_else_changes(chunks, monkeypatch):
    args, (first_chunk, second_chunk) = chunks
    plan = plan_of(args)
    spec = StageSpec.of(plan, "hf")
    assert spec.drop_repeats and spec.eval_overlap is None
    stage = Stage(spec, plan.tokenizer)
    first = stage(first_chunk)
    assert first.touched.sum() >= 4  # the personal data, masked or counted
    kept, touched = first.hashes, first.hashes[first.touched]

    def seen(hashes):
        return np.isin(hashes, kept)

    screened = []
    real = Screen.__call__
    monkeypatch.setattr(Screen, "__call__", lambda self, documents, *rest: screened.append(len(documents))
                        or real(self, documents, *rest))
    plain = stage(second_chunk, seen)
    skipping = stage(second_chunk, seen, lambda hashes: np.isin(hashes, touched))
    assert screened[1] == screened[0] - (len(kept) - len(touched))  # every untouched repeat skipped the screen
    assert skipping.screen == plain.screen and skipping.dropped == plain.dropped
    assert skipping.screen["pii"]["masked"]  # the touched repeats were screened, and counted again
    for name in ("ids", "lengths", "hashes", "signatures", "shingles", "touched"):
        assert np.array_equal(getattr(skipping, name), getattr(plain, name)), name
