"""quality_samples.jsonl: what each quality rule dropped, where it was, and the values against the thresholds."""

from __future__ import annotations

import json
import operator
from collections import Counter

from helpers import REPO, data_args, prepare, write_jsonl
from rankzero.data.quality.filter import REASONS
from rankzero.data.quality.samples import MEASURES, SAMPLES_PER_RULE, TEXT_CHARS

COMPARE = {"<": operator.lt, ">": operator.gt, ">=": operator.ge}


def test_every_rule_names_what_it_measures():
    assert set(MEASURES) == set(REASONS)


def test_samples_name_file_and_line_and_each_rule_crossing_its_threshold_and_each_file_is_counted(tmp_path, tokenizer_dir):
    sample = [json.loads(line) for line in (REPO / "data" / "quality_sample.jsonl").read_text().splitlines()]
    half = len(sample) // 2
    (tmp_path / "in").mkdir()
    # Two files behind one glob: every sample must name its own file and line.
    for name, part in (("a.jsonl", sample[:half]), ("b.jsonl", sample[half:])):
        write_jsonl(tmp_path / "in" / name,
                    [{"text": r["text"]} for r in part])
    # --pii off: each sample is checked against its line as written (under the default mask its digits are
    # placeholders; tests/data/test_prepare_pii.py checks that no raw value reaches this file).
    out = prepare(data_args(tokenizer_dir, tmp_path / "c", [tmp_path / "in" / "*.jsonl"], quality_filter="ko",
                            dataset_batch_size=40, pii="off"), seed=0)
    manifest = json.loads((out / "manifest.json").read_text())
    samples = [json.loads(line) for line in (out / "quality_samples.jsonl").read_text().splitlines()]
    rules = Counter(s["rule"] for s in samples)
    dropped = {rule: count for rule, count in manifest["dropped"].items() if rule in REASONS}
    assert len(dropped) >= 5, dropped
    assert rules == {rule: min(count, SAMPLES_PER_RULE) for rule, count in dropped.items()}
    assert {s["path"] for s in samples} == {str(tmp_path / "in" / "a.jsonl"), str(tmp_path / "in" / "b.jsonl")}
    for entry in samples:
        lines = open(entry["path"], encoding="utf-8").read().splitlines()
        assert entry["text"] == json.loads(lines[entry["line"] - 1])["text"].strip()[:TEXT_CHARS], entry
        if entry["rule"].startswith("kiwi_") or entry["rule"] in ("mojibake", "placeholder_text", "gambling_ad"):
            assert entry["measures"] and all("value" in m for m in entry["measures"])
            continue
        crossed = []
        for measure in entry["measures"]:
            comparison, _, threshold = measure["drops_if"].split(" (")[0].split(" ")
            crossed.append(COMPARE[comparison](measure["value"], float(threshold)))
        assert any(crossed), entry
    assert manifest["quality_samples"].startswith("quality_samples.jsonl")

    # The glob is one source; its manifest entry counts each file on its own.
    [source] = manifest["sources"]
    files = source["files"]
    assert list(files) == [str(tmp_path / "in" / "a.jsonl"), str(tmp_path / "in" / "b.jsonl")]
    assert [files[f]["docs_in"] for f in files] == [half, len(sample) - half]
    assert sum(files[f]["bytes_in"] for f in files) == source["bytes_in"]
    for rule, count in dropped.items():
        assert sum(files[f]["dropped"].get(rule, 0) for f in files) == count, rule
    by_file = Counter(s["path"] for s in samples)
    assert all(by_file[f] > 0 for f in files)
