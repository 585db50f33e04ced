"""The compiled passes' cache is checked before it is used (issue 47, item 6): a library cut short (the loader died on
it, SIGBUS, no message) or replaced by another (`undefined symbol`), a table swapped for another one (`KeyError`) or
with the right keys and other values (silently other rows under the same fingerprint) is built again after one
warning, and the process computes what a fresh cache would give. Each case in a real process on a real cache."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np

from helpers import needs_compiler
from rankzero.data import native
from rankzero.data.native import table_cache

REPO = Path(__file__).resolve().parents[1]
WARNED_LIBRARY = "are not the library built there"
WARNED_TABLE = "is not what was built there"
# What a process computes from the library and the scan's tables: the scan of a text, and two table entries.
SIGN = ("import json, logging; logging.basicConfig(); from rankzero.data import native; "
        "from rankzero.data.screen import scan as n, reference as r; grams, windows, marks, runs = n.scan(*n.code_points([n.prepare("
        "'Ａ가 하나 둘 셋 넷 다섯 여섯 일곱 여덟 아홉 열 010-1234-5678')]), 3, 8, 4, n.Bitmap.everything()); "
        "print(json.dumps([native.library() is not None, grams.values.tolist(), marks.tolist(), "
        "int(r._fold_table()[ord('A')]), int(r._kinds_table()[ord('7')])]))")


def sign_in_a_process(cache: Path) -> tuple[int, list | None, str]:
    result = subprocess.run([sys.executable, "-c", SIGN], capture_output=True, text=True, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO), "RANKZERO_KERNEL_CACHE": str(cache)})
    return result.returncode, json.loads(result.stdout) if result.returncode == 0 else None, result.stderr


def fresh(cache: Path) -> list:
    code, signed, stderr = sign_in_a_process(cache)
    assert code == 0 and signed[0] is True and signed[3] == ord("a") and signed[4] == 2, stderr
    return signed


def warnings_of(stderr: str, text: str) -> list[str]:
    return [line for line in stderr.splitlines() if text in line]


@needs_compiler
def test_a_library_cut_short_is_built_again_not_mapped(tmp_path):
    first = fresh(tmp_path)
    [library] = tmp_path.glob("passes-*.so")
    whole = library.read_bytes()
    library.write_bytes(whole[:len(whole) // 2])  # the ELF header whole, the segments it names past the end
    code, again, stderr = sign_in_a_process(tmp_path)
    assert code == 0, (code, stderr)  # the loader used to die on it: -7 (SIGBUS), exit 135 under a shell
    assert again == first and len(warnings_of(stderr, WARNED_LIBRARY)) == 1, stderr
    assert library.read_bytes() == whole  # gcc builds the same bytes from the same source
    code, third, stderr = sign_in_a_process(tmp_path)
    assert third == first and not warnings_of(stderr, WARNED_LIBRARY)  # the rebuilt one is trusted again


@needs_compiler
def test_another_library_under_the_name_is_built_again(tmp_path):
    first = fresh(tmp_path)
    [library] = tmp_path.glob("passes-*.so")
    other = tmp_path / "other.c"
    other.write_text("int other(void) { return 1; }\n")
    compiler = shlex.split(os.environ.get("CC") or "cc")
    subprocess.run([*compiler, "-shared", "-fPIC", str(other), "-o", str(library)], check=True)
    code, again, stderr = sign_in_a_process(tmp_path)
    assert code == 0 and "undefined symbol" not in stderr, stderr
    assert again == first and len(warnings_of(stderr, WARNED_LIBRARY)) == 1, stderr


@needs_compiler
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


@needs_compiler
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


@needs_compiler
def test_a_coloured_compiler_error_reaches_the_log_without_escape_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(native, "full_source", lambda: "int broken( {\n")
    monkeypatch.setenv("CC", f"{os.environ.get('CC') or 'cc'} -fdiagnostics-color=always")
    try:
        native.build(tmp_path)
    except native.CompileError as error:
        message = str(error)
    else:
        raise AssertionError("compiled")
    assert "exited 1" in message and "error" in message, message
    assert not any(ord(char) < 32 and char not in "\n\t" for char in message), repr(message)
