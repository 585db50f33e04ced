"""A JSONL line byte for byte like a kept document's is dropped before it is parsed (dedup/exact.KeptLines,
StageSpec.skip_kept_lines), where the stage would have counted nothing in it: every count and every output row is
as when each repeat goes through the stage."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import xxhash

from helpers import data_args, korean_documents, prepare
from rankzero.data.dedup.exact import KeptLines
from rankzero.data.stage import StageSpec


def test_kept_lines_hold_what_was_added_until_another_key_takes_the_slot():
    lines = KeptLines(slots=8)
    keys = np.array([3, 11, 2**63 + 5], dtype=np.uint64)  # 3 and 11 share slot 3
    assert not lines.seen(keys).any()
    lines.add(keys[:1])
    assert lines.seen(keys).tolist() == [True, False, False]
    lines.add(keys[1:])
    assert lines.seen(keys).tolist() == [False, True, True]  # 11 took 3's slot: 3 only loses its shortcut
    assert not lines.seen(np.array([0, 13], dtype=np.uint64)).any()  # an empty slot holds no key, not even 0
    with pytest.raises(ValueError, match="power of two"):
        KeptLines(slots=12)


def corpus(tmp_path, newline: str = "\n"):
    """Korean documents, some with a phone number the masker counts, some prompt/completion records (two segments),
    a member list the masker drops as a dump, repeated byte for byte and respelled (ASCII escapes), in a shuffled
    order with no newline after the last line; the lines the masker counts something in."""
    texts = korean_documents(260, seed=3)
    members = "\n".join(f"회원{i} 010-{3000 + i}-{4000 + i}" for i in range(12))
    records = ([{"text": text} for text in texts[:180]]
               + [{"text": f"{text} 문의 010-2345-{6000 + i}"} for i, text in enumerate(texts[180:200])]
               + [{"prompt": prompt, "completion": answer} for prompt, answer in zip(texts[200:230], texts[230:260])]
               + [{"text": members}])
    lines = [json.dumps(record, ensure_ascii=False) for record in records]
    repeats = lines[::2] + lines[1::3] + lines[180:200] * 2 + lines[-1:] * 3 + [json.dumps(r) for r in records[::7]]
    every = lines + repeats
    random.Random(0).shuffle(every)
    path = tmp_path / "crawl.jsonl"
    path.write_bytes(newline.join(every).encode())
    return path, {line.encode() for line in lines[180:200] + lines[-1:]}


def build(tmp_path, tokenizer_dir, path, name, **flags):
    out = prepare(data_args(tokenizer_dir, tmp_path / name, [path], max_seq_length=256, packing=True,
                            dataset_batch_size=40, **flags), seed=0)
    manifest = json.loads((out / "manifest.json").read_text())
    files = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*.arrow"))}
    for key in ("timings", "throughput", "built_at", "build_id", "builder_threads", "files"):
        manifest.pop(key, None)
    return manifest, files


@pytest.mark.parametrize("newline, flags", [("\n", {}), ("\r\n", {"validation_split_percentage": 10})],
                         ids=["lf", "crlf-with-a-validation-split"])
def test_a_kept_line_s_copies_are_dropped_unparsed_and_nothing_counted_changes(tmp_path, tokenizer_dir, monkeypatch,
                                                                                newline, flags):
    path, counted_lines = corpus(tmp_path, newline)
    skipped = []
    seen = KeptLines.seen

    def spy(self, keys):
        found = seen(self, keys)
        skipped.append(found)
        return found

    monkeypatch.setattr(KeptLines, "seen", spy)
    counted_keys = {xxhash.xxh3_64_intdigest(line) for line in counted_lines}
    original_add = KeptLines.add

    def add(self, keys):
        assert not counted_keys & set(keys.tolist()), "a document the masker counted in stood in for its repeats"
        original_add(self, keys)

    monkeypatch.setattr(KeptLines, "add", add)
    with_skip = build(tmp_path, tokenizer_dir, path, "skip", **flags)
    assert sum(int(found.sum()) for found in skipped) > 50  # most of the byte-identical repeats went unparsed
    every = path.read_bytes().decode().split(newline)
    pii = with_skip[0]["pii"]["total"]
    assert pii["documents_touched"] == {"phone": sum("010-2345-" in line for line in every)}  # every repeat counted
    dumps = sum("010-3000-4000" in line for line in every)  # the member list, each time it comes (screened first)
    assert pii["documents_dropped_as_dumps"] == dumps > 1

    monkeypatch.setattr(KeptLines, "seen", lambda self, keys: np.zeros(len(keys), dtype=bool))
    without = build(tmp_path, tokenizer_dir, path, "every-line", **flags)
    assert json.dumps(with_skip[0]) == json.dumps(without[0])  # the same counts, in the same order
    assert with_skip[1] == without[1]
    assert with_skip[0]["docs_kept"] == 230
    assert with_skip[0]["dropped"] == {"pii_dump": dumps, "exact_duplicate": len(every) - 230 - dumps}


def test_only_where_a_repeat_would_count_nothing(tmp_path, tokenizer_dir):
    """Not with --on_decode_error replace (replaced lines are counted), the quality filter (repairs are counted),
    SFT or an evaluation set (repeats are decided after the stage), or without exact dedup."""
    from helpers import plan_of

    path, _ = corpus(tmp_path)

    def spec(**flags):
        return StageSpec.of(plan_of(data_args(tokenizer_dir, tmp_path / "c", [path], **flags), seed=0), "fastokens")

    assert spec().skip_kept_lines
    assert not spec(on_decode_error="replace").skip_kept_lines
    assert not spec(quality_filter="ko").skip_kept_lines
    assert not spec(dedup="none").skip_kept_lines
    assert not spec(mode="sft").skip_kept_lines
    evaluation = tmp_path / "evaluation.jsonl"
    evaluation.write_text(json.dumps({"text": "평가용 문서 하나."}, ensure_ascii=False) + "\n", encoding="utf-8")
    assert not spec(eval_dataset=[str(evaluation)]).skip_kept_lines
