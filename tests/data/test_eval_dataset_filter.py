"""What the quality filter takes out of `--eval_dataset` is said, in the manifest and on screen, and an eval
set it removes whole is an error about that set (issue 29, item 12).

The eval sets are records of the shipped quality sample, labelled clean or junk (every clean one is kept
and every junk one dropped: test_quality.py checks it)."""

from __future__ import annotations

import json
import logging

import pytest

from rankzero.errors import RankzeroError
from helpers import REPO, data_args, korean_documents, prepare, write_jsonl

SAMPLE = REPO / "data" / "quality_sample.jsonl"


def sample(label: str, count: int) -> list[dict]:
    records = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [{"text": record["text"]} for record in records if record["label"] == label][:count]


@pytest.fixture
def training(tmp_path):
    return write_jsonl(tmp_path / "train.jsonl", [{"text": text} for text in korean_documents(300)])


def test_the_eval_sets_filtered_share_is_in_the_manifest_and_on_screen(tmp_path, tokenizer_dir, training, caplog,
                                                                       capsys):
    clean, junk = sample("clean", 30), sample("junk", 60)
    evaluation = write_jsonl(tmp_path / "eval.jsonl", clean + junk)
    with caplog.at_level(logging.WARNING):
        out = prepare(data_args(tokenizer_dir, tmp_path / "cache", [training], eval_dataset=[evaluation],
                                quality_filter="ko", max_seq_length=16), seed=0)
    validation = json.loads((out / "manifest.json").read_text())["validation"]
    counts = validation["eval_dataset_documents"]
    assert counts["read"] == 90 and counts["held_out"] == 30 and sum(counts["removed"].values()) == 60
    assert validation["documents"] == 30
    printed = capsys.readouterr().err
    assert f"eval set   {evaluation}: 90 documents read, 30 held out, 60 removed (" in printed, printed[-2000:]
    [warning] = [r.getMessage() for r in caplog.records if "--eval_dataset" in r.getMessage()]
    assert f"--eval_dataset {evaluation}: the prepare removed 60 of its 90 documents (67%:" in warning
    assert "evaluation runs on the other 30" in warning


def test_an_eval_set_removed_whole_is_an_error_about_that_set(tmp_path, tokenizer_dir, training):
    evaluation = write_jsonl(tmp_path / "junk.jsonl", sample("junk", 40))
    with pytest.raises(RankzeroError) as caught:
        prepare(data_args(tokenizer_dir, tmp_path / "cache", [training], eval_dataset=[evaluation],
                          quality_filter="ko"), seed=0)
    message = str(caught.value)
    assert message.startswith(f"validation: all 40 documents of --eval_dataset {evaluation} were removed (")
    assert "quality filter" in message and "give --eval_dataset" not in message
