"""The compiled passes' table cache is checked before it is used (issue 47, item 6): a table swapped for another one
(`KeyError`) or with the right keys and other values (silently other rows under the same fingerprint) is built again
after one warning, and the process computes what a fresh cache would give. Each case in a real process on a real
cache. (The passes themselves are built at install, not cached: tests/data/native/test_native.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from helpers import needs_extension
from rankzero.data.native import table_cache

REPO = Path(__file__).resolve().parents[3]
WARNED_TABLE = "is not what was built there"
# What a process computes from the passes and the scan's tables: the scan of a text, and two table entries.
SIGN = ("import json, logging; logging.basicConfig(); from rankzero.data import native; "
        "from rankzero.data.screen import scan as n, reference as r; grams, windows, marks, runs = n.scan(*n.code_points([n.prepare("
        "'Ａ가 하나 둘 셋 넷 다섯 여섯 일곱 여덟 아홉 열 010-1234-5678')]), 3, 8, 4, n.Bitmap.everything()); "
        "print(json.dumps([native.extension() is not None, grams.values.tolist(), marks.tolist(), "
        "int(r.fold_table()[ord('A')]), int(r.kinds_table()[ord('7')])]))")


def sign_in_a_process(cache: Path) -> tuple[int, list | None, str]:
    result = subprocess.run([sys.executable, "-c", SIGN], capture_output=True, text=True, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO), "RANKZERO_TABLE_CACHE": str(cache)})
    return result.returncode, json.loads(result.stdout) if result.returncode == 0 else None, result.stderr


def fresh(cache: Path) -> list:
    code, signed, stderr = sign_in_a_process(cache)
    assert code == 0 and signed[0] is True and signed[3] == ord("a") and signed[4] == 2, stderr
    return signed


def warnings_of(stderr: str, text: str) -> list[str]:
    return [line for line in stderr.splitlines() if text in line]


@needs_extension
def test_a_table_with_the_right_keys_and_other_values_is_built_again(tmp_path):
    first = fresh(tmp_path)
    [table] = tmp_path.glob("ngram_scan-*.npz")
    with np.load(table) as stored:
        arrays = {key: stored[key].copy() for key in stored.files}
    arrays["fold"][ord("A")] = ord("b")  # 'A' would read as 'b': other n-grams, other hashes, other rows
    arrays["kinds"][ord("7")] = 0  # '7' no longer a digit: the scan's marks change
    np.savez(table, **arrays)
    code, again, stderr = sign_in_a_process(tmp_path)
    assert code == 0 and again == first, (again, first, stderr)
    assert len(warnings_of(stderr, WARNED_TABLE)) == 1 and str(table) in stderr, stderr
    with np.load(table) as stored:
        assert stored["fold"][ord("A")] == ord("a")  # replaced by the build


@needs_extension
def test_another_table_under_the_name_is_built_again(tmp_path):
    first = fresh(tmp_path)
    [table] = tmp_path.glob("ngram_scan-*.npz")
    np.savez(table, fold=np.arange(0x10000, dtype=np.uint32))  # another table's keys: "kinds" was a KeyError
    code, again, stderr = sign_in_a_process(tmp_path)
    assert code == 0 and "KeyError" not in stderr and again == first, stderr
    assert len(warnings_of(stderr, WARNED_TABLE)) == 1, stderr


def test_a_table_without_a_digest_is_rebuilt_without_a_word(tmp_path, caplog):
    """An older installation's cache (or a writer that died between its two renames): rebuilt, nothing to warn of."""
    source = tmp_path / "tables.py"
    source.write_text("TABLE = 1\n")
    built = []

    def build():
        built.append(1)
        return {"table": np.arange(5, dtype=np.uint32)}

    table_cache.cached("table", build, [str(source)], directory=tmp_path)
    [digest] = tmp_path.glob("table-*.npz.xxh3")
    digest.unlink()
    assert table_cache.cached("table", build, [str(source)], directory=tmp_path)["table"].tolist() == list(range(5))
    assert len(built) == 2 and digest.exists() and not caplog.records
    table_cache.cached("table", build, [str(source)], directory=tmp_path)
    assert len(built) == 2  # read, digest and all