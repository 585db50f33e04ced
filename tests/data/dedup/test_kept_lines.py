"""What the builder remembers of raw JSONL lines (dedup/exact.LineVerdicts): a line byte for byte like a kept
document's is dropped before it is parsed (StageSpec.skip_kept_lines), where the stage would have counted nothing in
it; and the quality filter judges a line once, its copies taking the first copy's verdict. Every count, every output
row and every quality sample is as when each repeat goes through the stage and is judged on its own."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import xxhash

from helpers import REPO, data_args, korean_documents, prepare
from rankzero.data.dedup.exact import LineVerdicts
from rankzero.data.quality import REASONS, QualityFilter
from rankzero.data.stage import STANDS_IN


def test_line_verdicts_hold_each_key_s_code_until_another_key_takes_the_slot():
    lines = LineVerdicts(slots=8)
    keys = np.array([3, 11, 2**63 + 5], dtype=np.uint64)  # 3 and 11 share slot 3
    assert lines.look_up(keys).tolist() == [0, 0, 0]
    lines.add(keys[:1], 7)
    assert lines.look_up(keys).tolist() == [7, 0, 0]
    lines.add(keys[1:], np.array([1, 2], dtype=np.uint8))
    assert lines.look_up(keys).tolist() == [0, 1, 2]  # 11 took 3's slot: 3 only loses its shortcut
    assert lines.look_up(np.array([0, 13], dtype=np.uint64)).tolist() == [0, 0]  # an empty slot holds no key, not 0
    # Four keys for one slot in one call: the slot holds one of them with its own code, never one's key with another's.
    rivals = np.array([4, 12, 20, 28], dtype=np.uint64)
    lines.add(rivals, np.array([5, 6, 7, 8], dtype=np.uint8))
    found = lines.look_up(rivals).tolist()
    held = [index for index, code in enumerate(found) if code]
    assert len(held) == 1 and found[held[0]] == 5 + held[0]
    with pytest.raises(ValueError, match="power of two"):
        LineVerdicts(slots=12)


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
    flags = {"max_seq_length": 256, "packing": True, "dataset_batch_size": 40, **flags}
    out = prepare(data_args(tokenizer_dir, tmp_path / name, [path], **flags), seed=0)
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
    look_up = LineVerdicts.look_up

    def spy(self, keys):
        codes = look_up(self, keys)
        skipped.append(int((codes == STANDS_IN).sum()))
        return codes

    monkeypatch.setattr(LineVerdicts, "look_up", spy)
    counted_keys = {xxhash.xxh3_64_intdigest(line) for line in counted_lines}
    original_add = LineVerdicts.add

    def add(self, keys, codes):
        standing = keys[np.broadcast_to(np.asarray(codes) == STANDS_IN, keys.shape)]
        assert not counted_keys & set(standing.tolist()), "a document the masker counted in stood in for its repeats"
        original_add(self, keys, codes)

    monkeypatch.setattr(LineVerdicts, "add", add)
    with_skip = build(tmp_path, tokenizer_dir, path, "skip", **flags)
    assert sum(skipped) > 50  # most of the byte-identical repeats went unparsed
    every = path.read_bytes().decode().split(newline)
    pii = with_skip[0]["pii"]["total"]
    assert pii["documents_touched"] == {"phone": sum("010-2345-" in line for line in every)}  # every repeat counted
    dumps = sum("010-3000-4000" in line for line in every)  # the member list, each time it comes (screened first)
    assert pii["documents_dropped_as_dumps"] == dumps > 1

    monkeypatch.setattr(LineVerdicts, "look_up", lambda self, keys: np.zeros(len(keys), dtype=np.uint8))
    without = build(tmp_path, tokenizer_dir, path, "every-line", **flags)
    assert json.dumps(with_skip[0]) == json.dumps(without[0])  # the same counts, in the same order
    assert with_skip[1] == without[1]
    assert with_skip[0]["docs_kept"] == 230
    assert with_skip[0]["dropped"] == {"pii_dump": dumps, "exact_duplicate": len(every) - 230 - dumps}


def test_only_where_a_repeat_would_count_nothing(tmp_path, tokenizer_dir):
    """Not with --on_decode_error replace (replaced lines are counted), SFT or an evaluation set (repeats are decided
    after the stage), or without exact dedup. With the quality filter (whose repairs the stage leaves out) too; and
    with the filter the lines are keyed whatever the rest, for its verdicts."""
    from helpers import plan_of

    path, _ = corpus(tmp_path)

    def spec(**flags):
        return plan_of(data_args(tokenizer_dir, tmp_path / "c", [path], **flags), seed=0).stage_spec("fastokens")

    assert spec().skip_kept_lines
    assert not spec(on_decode_error="replace").skip_kept_lines
    assert spec(quality_filter="ko").skip_kept_lines
    assert not spec(dedup="none").skip_kept_lines and not spec(dedup="none").keys_lines
    assert spec(dedup="none", quality_filter="ko").keys_lines and spec(mode="sft", quality_filter="ko").keys_lines
    assert not spec(mode="sft").skip_kept_lines
    evaluation = tmp_path / "evaluation.jsonl"
    evaluation.write_text(json.dumps({"text": "평가용 문서 하나."}, ensure_ascii=False) + "\n", encoding="utf-8")
    assert not spec(eval_dataset=[str(evaluation)]).skip_kept_lines


def crawl_to_judge(tmp_path):
    """The labelled quality sample (kept and dropped by many rules), Korean documents (some with a phone number the
    masker counts) and their mojibake twins (repaired, kept, counted), each line repeated byte for byte or respelled
    (ASCII escapes), shuffled; the number of lines, of distinct lines, and of lines holding a twin."""
    sample = [json.loads(line)["text"] for line in (REPO / "data" / "quality_sample.jsonl").read_text().splitlines()]
    texts = korean_documents(30, seed=5)
    twins = [text.encode("utf-8").decode("latin-1") for text in texts[:6]]
    records = [{"text": text} for text in sample[::3] + texts[6:20] + twins] + [
        {"text": f"{text} 문의 010-2345-{6000 + i}"} for i, text in enumerate(texts[20:])]
    lines = [json.dumps(record, ensure_ascii=False) for record in records]
    every = lines + lines[::2] + lines[1::3] + lines[-16:] * 2 + [json.dumps(r) for r in records[::7]]
    random.Random(1).shuffle(every)
    path = tmp_path / "crawl.jsonl"
    path.write_text("\n".join(every) + "\n", encoding="utf-8")
    twin_lines = sum(any(json.loads(line)["text"] == twin for twin in twins) for line in every)
    return path, len(every), len(set(every)), twin_lines


def test_the_filter_judges_a_line_once_and_every_count_row_and_sample_is_as_when_each_copy_is_judged(
        tmp_path, tokenizer_dir, monkeypatch):
    """The same shuffled crawl with copies, built three ways: each text judged on its own in every copy (as before
    issue 48), and judging each line once, in the builder and in two spawned worker processes. The same manifest
    (counts and reasons, in order), Arrow bytes and quality samples; the filter judged at most one copy of each text
    line in the builder (a respelled copy is a line of its own), and the worker processes were told the verdicts of
    lines judged before."""
    from rankzero.data.engines import local_encode

    path, lines, distinct, twin_lines = crawl_to_judge(tmp_path)
    # Small chunks: the worker processes have 8 in flight, whose lines are not known yet when each is sent.
    flags = {"quality_filter": "ko", "dataset_num_proc": 1, "dataset_batch_size": 10}
    judge_and_repair = QualityFilter.judge_and_repair

    def each_on_its_own(self, texts, known=None):
        judged = [judge_and_repair(self, [text]) for text in texts]
        return [verdicts[0] for verdicts, _ in judged], [fixed[0] for _, fixed in judged]

    with monkeypatch.context() as patch:
        patch.setattr(QualityFilter, "judge_and_repair", each_on_its_own)
        patch.setattr(LineVerdicts, "look_up", lambda self, keys: np.zeros(len(keys), dtype=np.uint8))
        every_copy = build(tmp_path, tokenizer_dir, path, "every-copy", **flags)

    judged = []
    reason_before_kiwi = QualityFilter._reason_before_kiwi
    monkeypatch.setattr(QualityFilter, "_reason_before_kiwi",
                        lambda self, text: judged.append(text) or reason_before_kiwi(self, text))
    once = build(tmp_path, tokenizer_dir, path, "once", **flags)
    assert 0 < len(judged) <= distinct < lines - 100
    monkeypatch.undo()

    known = []
    known_lines = local_encode.known_lines

    def spy(verdicts, chunk):
        found = known_lines(verdicts, chunk)
        known.append(int((found[1] > 0).sum()))
        return found

    monkeypatch.setattr(local_encode, "known_lines", spy)
    in_workers = build(tmp_path, tokenizer_dir, path, "in-workers", **{**flags, "dataset_num_proc": 4})
    assert sum(known) > 100  # lines whose verdict (or stand-in) the workers were given

    dropped = every_copy[0]["dropped"]
    assert dropped["mojibake_repaired (kept)"] == twin_lines > 6  # every copy of a repaired document counted
    assert len([reason for reason in dropped if reason in REASONS]) >= 5
    for built in (every_copy, once, in_workers):
        assert built[0]["settings"].pop("num_proc") in (1, 4)  # the only setting that differs
    for built in (once, in_workers):
        assert json.dumps(built[0]) == json.dumps(every_copy[0])
        assert built[1] == every_copy[1]
    samples = {name: next((tmp_path / name).glob("*/quality_samples.jsonl")).read_bytes()
               for name in ("every-copy", "once", "in-workers")}
    assert samples["once"] == samples["in-workers"] == samples["every-copy"] and samples["once"].count(b"\n") >= 10
