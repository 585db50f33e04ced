"""SFT samples that would train on nothing, and fields that are not text (issue 29, items 2 and 6).

A sample whose labels hold no token of its own (a prompt longer than --max_seq_length cuts the answer
off, a chat with no assistant turn, an empty answer) is dropped and counted as `no_trainable_tokens`,
with a warning when there are many; every field read as text follows the text column's rule."""

from __future__ import annotations

import itertools
import json
import logging

import numpy as np
import pytest

from rankzero.data.encode import IGNORE_INDEX
from rankzero.data.inputs.readers import iter_chunks
from rankzero.data.inputs.records import ChatRenderer, chunk_documents
from rankzero.data.inputs.specs import resolve_source
from rankzero.errors import RankzeroError
from helpers import data_args, prepare, write_jsonl


def chat(question: str, answer: str | None) -> dict:
    turns = [{"role": "user", "content": question}]
    return {"messages": turns + ([{"role": "assistant", "content": answer}] if answer is not None else [])}


GOOD = [chat(f"질문 {i}", f"답변 {i}입니다.") for i in range(40)]
UNTRAINABLE = [
    chat("아주 긴 질문입니다. " * 40, "짧은 답."),  # the prompt alone is longer than a row: the answer is cut off
    chat("답이 없는 질문", None),  # a user turn only
    chat("빈 답을 받은 질문", ""),  # an empty answer: not "\n\n" or the template's end tokens as the reply
    chat("공백 답을 받은 질문", "  \n "),
    {"instruction": "번역하세요", "input": "Hello", "output": ""},
]


@pytest.mark.parametrize("template", [True, False], ids=["chat-template", "plain-format"])
def test_samples_with_nothing_to_train_are_dropped_counted_and_warned_about(tmp_path, tokenizer_dir, caplog,
                                                                            template):
    import datasets

    if not template:  # the plain "### User:" format: a tokenizer dir without a chat template
        plain = tmp_path / "plain-tokenizer"
        plain.mkdir()
        for path in tokenizer_dir.iterdir():
            (plain / path.name).write_bytes(path.read_bytes())
        config = json.loads((plain / "tokenizer_config.json").read_text())
        config.pop("chat_template", None)
        (plain / "tokenizer_config.json").write_text(json.dumps(config))
        (plain / "chat_template.jinja").unlink(missing_ok=True)
        tokenizer_dir = plain
    records = list(itertools.chain.from_iterable(zip(GOOD, UNTRAINABLE + [None] * len(GOOD))))
    corpus = write_jsonl(tmp_path / "chat.jsonl", [record for record in records if record is not None])
    with caplog.at_level(logging.WARNING):
        out = prepare(data_args(tokenizer_dir, tmp_path / "cache", [corpus], mode="sft", max_seq_length=48), seed=0)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["dropped"]["no_trainable_tokens"] == len(UNTRAINABLE)
    assert manifest["docs_in"] == len(GOOD) + len(UNTRAINABLE)
    rows = datasets.load_from_disk(str(out))
    samples = 0
    for row in rows:
        labels = np.asarray(row["labels"])
        for start, end in itertools.pairwise(np.cumsum([0, *row["document_lengths"]])):
            trained = labels[start:end] != IGNORE_INDEX
            # Its own tokens, besides the EOS every whole sample ends with (labelled even after no answer).
            assert trained[:-1].any() if labels[end - 1] == row["input_ids"][end - 1] else trained.any()
            samples += 1
    assert samples == len(GOOD)
    warned = [r.getMessage() for r in caplog.records if "no_trainable_tokens" in r.getMessage()]
    assert warned and f"{len(UNTRAINABLE)} of {len(GOOD) + len(UNTRAINABLE)} SFT samples" in warned[0]
    assert "--max_seq_length 48" in warned[0]


def _chunk(tmp_path, records):
    path = write_jsonl(tmp_path / "r.jsonl", records)
    (chunk,) = iter_chunks(resolve_source(str(path)), 0, batch_size=1000)
    return chunk


def test_an_empty_answer_between_real_ones_trains_nothing(tmp_path, tokenizer_dir):
    from rankzero.data.encode import load_tokenizer

    info = load_tokenizer(tokenizer_dir)
    record = {"messages": [{"role": "user", "content": "첫 질문"}, {"role": "assistant", "content": ""},
                           {"role": "user", "content": "둘째 질문"}, {"role": "assistant", "content": "둘째 답"}]}
    for renderer in (ChatRenderer(info.chat_template, info.special_tokens), ChatRenderer(None)):
        [segments] = chunk_documents(_chunk(tmp_path, [record]), None, renderer, with_masks=True).documents
        trained = [text for text, trainable in segments if trainable]
        assert len(trained) == 1 and trained[0].startswith("둘째 답"), segments


NOT_TEXT = [
    ({"instruction": True, "output": "답"}, "'instruction' holds true (bool), not text"),
    ({"instruction": "질문", "input": [1], "output": "답"}, "'input' holds a list with 1 (int) in it"),
    ({"instruction": "질문", "output": {"text": "답"}}, "'output' is an object with fields ['text'], not text"),
    ({"prompt": 12345, "completion": "답"}, "'prompt' holds 12345 (int), not text"),
    ({"prompt": "앞", "completion": float("nan")}, "'completion' holds NaN (float), not text"),
    ({"prompt": "질문", "response": 1.5}, "'response' holds 1.5 (float), not text"),
    ({"question": "질문", "answer": False}, "'answer' holds false (bool), not text"),
    ({"instruction": "질문", "output": "답", "system": 7}, "'system' holds 7 (int), not text"),
    ({"messages": [{"role": "user", "content": True}]}, "messages[0].content holds true (bool), not text"),
    ({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": {"a": 1}}]},
     "messages[1].content is an object with fields ['a'], not text"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "x"}]}]},
     "messages[0].content holds a list with {\"type\": \"image_url\""),
    ({"messages": [{"role": 3, "content": "q"}]}, "messages[0].role holds 3, not a role name"),
    ({"messages": ["질문"]}, "messages[0] is \"질문\", not a message object"),
    ({"conversations": [{"from": "human", "value": 12345}]}, "conversations[0].value holds 12345 (int), not text"),
]


@pytest.mark.parametrize("record,expected", NOT_TEXT, ids=[e.split(" ")[0] for _, e in NOT_TEXT])
def test_a_field_that_is_not_text_is_an_error_naming_file_line_and_field(tmp_path, record, expected):
    chunk = _chunk(tmp_path, [{"text": "좋은 문장"}, record])
    with pytest.raises(RankzeroError) as caught:
        chunk_documents(chunk, None, ChatRenderer(None), with_masks=True)
    assert str(caught.value).startswith(f"{tmp_path / 'r.jsonl'}:2: {expected}"), str(caught.value)
    out = chunk_documents(chunk, None, ChatRenderer(None), with_masks=True, skip_bad_records=True)
    assert out.bad_records == 1 and len(out.documents) == 1


def test_text_content_parts_and_null_fields_are_still_text(tmp_path):
    record = {"messages": [{"role": "user", "content": [{"type": "text", "text": "첫 줄"}, "둘째 줄"]},
                           {"role": "assistant", "content": "답"}], "system": None}
    [segments] = chunk_documents(_chunk(tmp_path, [record]), None, ChatRenderer(None), with_masks=True).documents
    assert "첫 줄\n둘째 줄" in "".join(text for text, _ in segments)
    [segments] = chunk_documents(_chunk(tmp_path, [{"instruction": "질문", "input": None, "output": "답"}]), None,
                                 ChatRenderer(None), with_masks=True).documents
    assert "".join(text for text, trainable in segments if trainable) == "답\n\n"


def test_through_prepare_a_boolean_answer_stops_at_its_line(tmp_path, tokenizer_dir):
    corpus = write_jsonl(tmp_path / "sft.jsonl", GOOD[:3] + [{"prompt": "질문", "response": True}])
    with pytest.raises(RankzeroError, match=rf"{tmp_path / 'sft.jsonl'}:4: 'response' holds true \(bool\), not text"):
        prepare(data_args(tokenizer_dir, tmp_path / "cache", [corpus], mode="sft"), seed=0)
