"""bench/quality_cost.py: the agreement it reports counts both directions and marks moved kept rates."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import quality_cost  # noqa: E402


def test_agreement_counts_each_direction_and_marks_moved_rates(capsys):
    records = [{"text": str(index), "group": "review" if index < 4 else "spam"} for index in range(6)]
    sets = {"corpus": records}
    here = {"corpus": {"verdicts": [None, "kiwi_no_final_endings", None, None, "menu", None], "cpu_s": 1.0}}
    there = {"corpus": {"verdicts": [None, None, "dup_lines", None, "menu", "menu"], "cpu_s": 1.0}}
    quality_cost.report_agreement(sets, here, there, Path("../base"))
    output = capsys.readouterr().out
    # Documents 1 (kept there, dropped here), 2 and 5 (dropped there, kept here) differ: 3 of 6 agree.
    assert "| corpus | 6 | 50.00% | 1 | 2 | 50.00% |" in output
    assert "| corpus | review | 4 | 75.0% | 75.0% |" in output  # one each way: the rate did not move
    assert "| corpus | spam | 2 | 0.0% | 50.0% ⚠ |" in output


def test_corpora_groups_by_genre_or_file(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "petition.jsonl").write_text('{"text": "청원"}\n{"text": "법", "genre": "statute"}\n',
                                                      encoding="utf-8")
    sample = tmp_path / "sample.jsonl"
    sample.write_text('{"text": "메뉴", "label": "junk", "kind": "menu"}\n', encoding="utf-8")
    sets = quality_cost.corpora(sample, None, [tmp_path / "real"], None)
    assert [record["group"] for record in sets["labelled sample"]] == ["junk/menu"]
    assert [record["group"] for record in sets["real"]] == ["petition", "statute"]
