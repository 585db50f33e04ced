"""Benchmark tools: the corpus generator (scripts/make_corpus.py) is deterministic and sized right; the PSS sampler sees memory; the CPU
poller sees a process tree's CPU that getrusage cannot."""

from __future__ import annotations

import importlib.util
import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from _measure import TreeCPU, run_measured  # noqa: E402
from scripts.make_corpus import generate  # noqa: E402

MIB = 2**20


def test_make_corpus_is_deterministic_and_sized(tmp_path):
    first, second, other = tmp_path / "first.jsonl", tmp_path / "second.jsonl", tmp_path / "other.jsonl"
    stats = generate(2 * MIB, first, seed=0)
    generate(2 * MIB, second, seed=0)
    generate(2 * MIB, other, seed=1)

    assert first.read_bytes() == second.read_bytes()
    assert first.read_bytes() != other.read_bytes()
    size = first.stat().st_size
    assert stats["bytes"] == size
    assert abs(size - 2 * MIB) <= 0.05 * 2 * MIB, size

    texts = [json.loads(line)["text"] for line in first.read_text(encoding="utf-8").splitlines()]
    assert len(texts) == stats["documents"]
    assert all(isinstance(text, str) and text for text in texts)
    hangul = sum(1 for text in texts for char in text if "가" <= char <= "힣")
    assert hangul / sum(len(text) for text in texts) > 0.5  # a Korean corpus, not escaped or English
    assert len(set(texts)) > 0.9 * len(texts)  # not a few documents on repeat
    assert stats["junk"] > 0 and stats["english"] > 0 and stats["korean"] > 0.8 * stats["documents"]


def test_make_corpus_small_size_within_tolerance(tmp_path):
    path = tmp_path / "small.jsonl"
    generate(int(0.5 * MIB), path, seed=3)
    assert abs(path.stat().st_size - 0.5 * MIB) <= 0.05 * 0.5 * MIB


def test_run_measured_sees_a_200mb_child_and_its_exit_code():
    # bytes * n writes every page (a zeroed bytearray would stay unbacked and show no PSS).
    code = "import sys, time; block = b'\\x01' * (200 * 2**20); time.sleep(0.6); print('done'); sys.exit(3)"
    result = run_measured([sys.executable, "-c", code])
    assert result["returncode"] == 3
    assert result["peak_pss_mb"] >= 150, result["peak_pss_mb"]
    assert result["wall_s"] >= 0.6
    assert result["stdout"].strip() == "done"


def test_run_measured_sums_the_process_tree():
    # Parent and grandchild hold 100 MB each: only a sum over the tree reaches 150 MB.
    child = "import time; block = b'\\x02' * (100 * 2**20); time.sleep(1.0)"
    code = ("import subprocess, sys, time; block = b'\\x01' * (100 * 2**20); "
            f"subprocess.run([sys.executable, '-c', {child!r}], check=True)")
    result = run_measured([sys.executable, "-c", code])
    assert result["returncode"] == 0, result["stderr"]
    assert result["peak_pss_mb"] >= 150, result["peak_pss_mb"]


def test_tree_cpu_counts_a_grandchild_that_nobody_here_reaps():
    # The Ray case: the CPU is spent by a grandchild (a raylet's worker) that getrusage here never sees. It burns
    # 0.5 CPU-s between two lines on stdin; the window spans exactly that, so the figure is its burn (to /proc's
    # 10 ms ticks), nothing of the interpreter starts before it, nor the poller's own time.
    grandchild = ("import sys, time; print('ready', flush=True); sys.stdin.readline(); start = time.process_time()\n"
                  "while time.process_time() - start < 0.5: pass\nprint('burnt', flush=True); sys.stdin.readline()")
    code = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {grandchild!r}], check=True)"
    root = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert root.stdout.readline().strip() == "ready"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = TreeCPU(root.pid)
        cpu.start()
        root.stdin.write("\n")
        root.stdin.flush()
        assert root.stdout.readline().strip() == "burnt"
        seconds = cpu.stop()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        root.stdin.write("\n")
        root.stdin.close()
        root.wait()
    assert 0.47 <= seconds < 0.7, seconds
    assert cpu.processes == 2 and cpu.exited == 0
    assert max(cpu.by_process().values()) >= 0.47  # all of it in the grandchild
    assert after.ru_utime - before.ru_utime < 0.1  # what getrusage would have reported


@pytest.mark.parametrize("returncode", [0, 1])
def test_run_measured_reports_failures_with_stderr(returncode):
    code = f"import sys; sys.stderr.write('boom'); sys.exit({returncode})"
    result = run_measured([sys.executable, "-c", code])
    assert result["returncode"] == returncode
    assert result["stderr"] == "boom"


def test_quality_breakdown_splits_the_filter_s_cpu_and_kiwi_reads_more_without_the_cascade(tmp_path, capsys,
                                                                                           monkeypatch):
    import quality_eval

    prose = tmp_path / "prose.jsonl"
    texts = ["오늘은 날씨가 맑아서 가족과 함께 공원에 산책을 나갔습니다. 바람이 시원해서 오래 걸었고, 저녁에는 집 근처 "
             f"식당에서 된장찌개를 먹었습니다. 다음 주에도 {day}요일에 다시 가 보려고 합니다." for day in "월화수목금"]
    prose.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts), encoding="utf-8")
    monkeypatch.setattr(sys, "argv", ["quality_eval.py", "--breakdown", str(prose), "--rounds", "1"])
    quality_eval.main()
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines() if line.startswith("| prose")]
    assert [row[1] for row in rows] == ["as shipped", "kiwi_cascade: false"]
    shipped, every = ({"cpu": float(row[4].replace(",", "")), "kiwi": float(row[5].replace(",", "")),
                       "read": int(row[8].rstrip("%"))} for row in rows)
    assert shipped["read"] < every["read"] and 0 < every["kiwi"] <= every["cpu"]


def test_given_corpus_with_copies_holds_each_document_that_many_times(tmp_path):
    """prep_setup.given_corpus(copies=4): every document of the given files exactly four times (75% exact copies),
    shuffled by the seed (the same seed, the same order), as {"text"} rows; one copy keeps the files' order."""
    from prep_setup import given_corpus

    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("".join(json.dumps({"text": f"문서 {i}", "id": i}) + "\n" for i in range(30)), encoding="utf-8")
    second.write_text(json.dumps({"text": "마지막"}) + "\n\n", encoding="utf-8")
    texts = [f"문서 {i}" for i in range(30)] + ["마지막"]

    def rows(path: Path) -> list[str]:
        return [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines()]

    joined, stats = given_corpus(tmp_path, [first, second])
    assert rows(joined) == texts and stats["documents"] == 31
    copied, stats = given_corpus(tmp_path, [first, second], copies=4, seed=3)
    assert sorted(rows(copied)) == sorted(texts * 4) and stats["documents"] == 124
    assert rows(copied) != texts * 4  # shuffled
    (tmp_path / "again").mkdir()
    again, _ = given_corpus(tmp_path / "again", [first, second], copies=4, seed=3)
    assert rows(again) == rows(copied)
    assert json.loads(copied.read_text(encoding="utf-8").splitlines()[0]).keys() == {"text"}


@pytest.mark.skipif(importlib.util.find_spec("fastokens") is None, reason="fastokens is not installed")
def test_the_fastokens_floor_encodes_each_distinct_text_once(tmp_path, tokenizer_dir):
    """(c3) skips a byte-identical line before parsing it and a text seen in another line's JSON after: its documents
    and tokens are those of the distinct texts, which (c2) encodes alone."""
    texts = [json.loads(line)["text"] for line in (BENCH.parent / "data" / "sample" / "ko.jsonl").read_text(
        encoding="utf-8").splitlines()[:40]]
    distinct, copies = tmp_path / "distinct.jsonl", tmp_path / "copies.jsonl"
    distinct.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts), encoding="utf-8")
    lines = [json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts]
    respelled = [json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(texts[::3])]  # ASCII escapes, a new key
    copies.write_text("".join(lines + lines[::2] + respelled + ["\n"]), encoding="utf-8")

    def summary(corpus: Path, *flags: str) -> dict:
        result = subprocess.run([sys.executable, str(BENCH / "baselines" / "tokenizer_only.py"), str(corpus),
                                 str(tokenizer_dir), "--engine", "fastokens", "--batch_size", "7", *flags],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        words = result.stdout.split()
        return {words[i].rstrip(":"): words[i + 1] for i in range(0, 4, 2)}

    assert len(set(texts)) == len(texts)
    assert summary(copies, "--floor") == summary(distinct) == summary(distinct, "--floor")
    assert summary(distinct)["docs"] == str(len(texts))


def test_kernels_bench_runs_every_path_and_their_outputs_agree(tmp_path):
    """bench/kernels_bench.py on a few real-shaped texts: a row per path (compiled, numpy, a cold cache), every
    pass's rate against numpy, and the outputs of every path the same bit for bit (it exits non-zero otherwise)."""
    lines = (BENCH.parent / "data" / "sample" / "ko.jsonl").read_text(encoding="utf-8").splitlines()[:60]
    texts = tmp_path / "ko.jsonl"
    texts.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = subprocess.run([sys.executable, str(BENCH / "kernels_bench.py"), "--rounds", "1", "--repeat", "1",
                           "--batch", "25", str(texts)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "60 texts" in done.stdout and "batches of 25" in done.stdout
    assert "the same outputs on every path: shingles yes, scan yes, scan_texts yes, marks_of yes" in done.stdout
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[1:] for line in done.stdout.splitlines()
            if line.startswith("| ") and "start CPU-s" not in line}
    assert list(rows) == ["compiled", "numpy", "compiled, cold cache"]
    assert all(cell.endswith("(1.00) |") or cell.endswith("(1.00)") for cell in rows["numpy"][2:])
    assert all(float(cell.split()[0]) > 0 for cells in rows.values() for cell in cells[2:])


def test_fresh_setup_refuses_an_unknown_command_before_it_starts(tmp_path):
    """A mistyped command is one line and exit 2, before any clone or /tmp directory is made."""
    done = subprocess.run(["bash", str(BENCH / "fresh_setup.sh"), "demo", "tset"], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "WORK": str(tmp_path / "work")})
    assert done.returncode == 2
    assert done.stderr.strip() == "fresh_setup.sh: unknown command 'tset': use demo or test"
    assert done.stdout == "" and not (tmp_path / "work").exists()
