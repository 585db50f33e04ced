"""native/: passes.c built once per installation by the system's compiler, loaded without the GIL held, and a
process without a compiler on the numpy references with the same numbers."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import needs_compiler
from rankzero.data import native

REPO = Path(__file__).resolve().parents[1]
TEXTS = ["하나 둘 셋 넷 다섯 여섯 ㅋㅋ…", "Ａ Ｂ Ｃ Ｄ Ｅ Ｆ", "전화 010-1234-5678 여권 M12345678 kim@example.com"]
SIGN = ("import json, logging; logging.basicConfig(); from rankzero.data import native; from rankzero.data.screen import scan as n; "
        "from rankzero.data.dedup import minhash; texts = json.loads(input()); "
        "grams, windows, marks, runs = n.scan(*n.code_points([n.prepare(t) for t in texts]), 3, 8, 4, "
        "n.Bitmap.everything()); print(json.dumps([native.library() is not None, "
        "minhash.shingle_hashes(texts)[0].tolist(), grams.values.tolist(), windows.values.tolist(), "
        "marks.tolist(), runs.tolist()]))")


def sign_in_a_process(**env: str) -> tuple[list, str]:
    result = subprocess.run([sys.executable, "-c", SIGN], input=json.dumps(TEXTS), capture_output=True, text=True,
                            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), **env})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), result.stderr


@needs_compiler
def test_a_fresh_process_builds_the_library_once_and_the_next_one_loads_it(tmp_path):
    first, _ = sign_in_a_process(RANKZERO_KERNEL_CACHE=str(tmp_path))
    assert first[0] is True
    assert [path.name.split("-")[0] for path in tmp_path.glob("passes-*.so")] == ["passes"]
    assert not list(tmp_path.glob(".passes-*"))  # no temporary file left behind
    # A compiler that fails: the second process must not need it.
    second, _ = sign_in_a_process(RANKZERO_KERNEL_CACHE=str(tmp_path), CC="false")
    assert second == first


@needs_compiler
def test_no_compiler_runs_the_numpy_references_to_the_same_numbers(tmp_path):
    compiled, _ = sign_in_a_process(RANKZERO_KERNEL_CACHE=str(tmp_path / "a"))
    fallback, stderr = sign_in_a_process(RANKZERO_KERNEL_CACHE=str(tmp_path / "b"), CC="no-such-compiler")
    assert fallback[0] is False and fallback[1:] == compiled[1:]
    assert stderr.count("compiled passes are unavailable") == 1 and "no-such-compiler" in stderr
    assert not list((tmp_path / "b").glob("*.so")) and not list((tmp_path / "b").glob(".passes-*"))


@needs_compiler
def test_a_source_that_does_not_compile_names_the_compiler_and_its_error(tmp_path, monkeypatch):
    monkeypatch.setattr(native, "full_source", lambda: "this is not C;\n")
    try:
        native.build(tmp_path)
    except native.CompileError as error:
        assert "error" in str(error) and "exited" in str(error)
    else:
        raise AssertionError("compiled")
    assert not list(tmp_path.iterdir())


@needs_compiler
def test_an_edited_source_is_another_library(tmp_path, monkeypatch):
    first = native.build(tmp_path)
    source = native.full_source()
    monkeypatch.setattr(native, "full_source", lambda: source + "\n/* edited */\n")
    second = native.build(tmp_path)
    assert first != second and first.exists() and second.exists()


@needs_compiler
def test_no_writable_cache_builds_in_the_process(tmp_path):
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    ours, _ = sign_in_a_process(RANKZERO_KERNEL_CACHE=str(not_a_directory / "cache"))
    assert ours == sign_in_a_process(RANKZERO_KERNEL_CACHE=str(tmp_path / "cache"))[0]


@needs_compiler
def test_a_call_releases_the_gil():
    """The stage's encode threads run while another thread is in a pass: ctypes drops the GIL for a call into a
    CDLL (a PyDLL, or a C-API module, would hold it)."""
    library = native.library()
    assert isinstance(library, ctypes.CDLL) and not isinstance(library, ctypes.PyDLL)


@needs_compiler
def test_cc_with_arguments_is_split_as_make_splits_it(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", "cc -w")  # as CC="ccache gcc" would be
    assert native.build(tmp_path).exists()


@needs_compiler
def test_a_cached_library_that_does_not_load_is_built_again(tmp_path):
    """Something else under the cached name (a copy that failed, another platform's build): the next process builds
    it again (tests/test_cache_digests.py: a library cut short, or another library, under the name)."""
    first, _ = sign_in_a_process(RANKZERO_KERNEL_CACHE=str(tmp_path))
    [cached] = tmp_path.glob("passes-*.so")
    cached.write_bytes(b"not a shared library")
    again, stderr = sign_in_a_process(RANKZERO_KERNEL_CACHE=str(tmp_path))
    assert again == first and again[0] is True and "unavailable" not in stderr
    assert cached.stat().st_size > 1000  # the build, again


def test_a_build_killed_before_its_rename_is_cleared_by_the_next_one(tmp_path):
    """A `.passes-*` file (the library's or its digest's) unchanged for longer than any compile may run is a dead
    build's: removed. One written to just now (another process compiling) is left alone, and so is the library."""
    dead, compiling, built = tmp_path / ".passes-dead.so", tmp_path / ".passes-busy.so", tmp_path / "passes-key.so"
    dead_digest = tmp_path / ".passes-key.so.xxh3.dead.tmp"
    for path in (dead, compiling, built, dead_digest):
        path.write_bytes(b"bytes")
    old = dead.stat().st_mtime - 2 * native.COMPILE_TIMEOUT_S - 1
    for path in (dead, built, dead_digest):
        os.utime(path, (old, old))
    native.remove_dead_temporaries(tmp_path, ".passes-*", 2 * native.COMPILE_TIMEOUT_S)
    assert not dead.exists() and not dead_digest.exists() and compiling.exists() and built.exists()


@needs_compiler
def test_the_next_build_clears_them(tmp_path, monkeypatch):
    cleared = []
    monkeypatch.setattr(native, "remove_dead_temporaries", lambda *args: cleared.append(args))
    assert native.build(tmp_path).exists() and cleared == [(tmp_path, ".passes-*", 2 * native.COMPILE_TIMEOUT_S)]
