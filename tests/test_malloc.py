"""train.py re-executes itself once under tcmalloc (rankzero/malloc.py): which library, when, and that
the prepared data is byte-for-byte the same as under glibc malloc."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, prepare_cli, prepared_dir, write_jsonl

from rankzero import malloc

INSTALLED = malloc.resolve("auto")
needs_malloc = pytest.mark.skipif(INSTALLED is None, reason="no tcmalloc/mimalloc/jemalloc installed "
                                  "(.ci/run installs libtcmalloc-minimal4)")


def libdir(tmp_path: Path, *names: str) -> list[Path]:
    for name in names:
        (tmp_path / name).write_bytes(b"")
    return [tmp_path]


def test_auto_prefers_tcmalloc_then_mimalloc_then_jemalloc(tmp_path):
    dirs = libdir(tmp_path, "libjemalloc.so.2", "libtcmalloc_minimal.so.4", "libmimalloc.so.2")
    assert malloc.resolve("auto", dirs) == tmp_path / "libtcmalloc_minimal.so.4"
    (tmp_path / "libtcmalloc_minimal.so.4").unlink()
    assert malloc.resolve("auto", dirs) == tmp_path / "libmimalloc.so.2"
    assert malloc.resolve("jemalloc", dirs) == tmp_path / "libjemalloc.so.2"
    assert malloc.resolve("system", dirs) is None
    assert malloc.resolve("auto", [tmp_path / "empty"]) is None


def test_a_library_asked_for_that_is_missing_is_an_error_naming_the_variable(tmp_path):
    with pytest.raises(malloc.MallocError, match=r"RANKZERO_MALLOC=tcmalloc: tcmalloc not found.*apt install"):
        malloc.resolve("tcmalloc", [tmp_path])
    with pytest.raises(malloc.MallocError, match=r"RANKZERO_MALLOC=/nowhere/libx.so: no such file"):
        malloc.resolve("/nowhere/libx.so", [tmp_path])
    with pytest.raises(malloc.MallocError, match=r"expected auto, system, tcmalloc, mimalloc"):
        malloc.resolve("fast", [tmp_path])


def test_preloaded_reads_ld_preload():
    assert malloc.preloaded("/usr/lib/x86_64-linux-gnu/libmimalloc.so.2") == "mimalloc"
    assert malloc.preloaded("libfoo.so:/opt/lib/libjemalloc.so.2") == "jemalloc"
    assert malloc.preloaded("libfoo.so") is None
    assert malloc.preloaded("") is None


REEXEC_PROBE = ("import sys; sys.path.insert(0, {repo!r}); print('start', flush=True); "
                "from rankzero.malloc import reexec_preloaded, active; reexec_preloaded(); print(active())")


def run_probe(env: dict) -> list[str]:
    code = REEXEC_PROBE.format(repo=str(REPO))
    environ = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", malloc.ENV)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            env={**environ, **env})
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


@needs_malloc
def test_reexecutes_exactly_once_under_the_library():
    lines = run_probe({})
    assert lines[:2] == ["start", "start"], lines  # the code before the re-exec ran twice, then no more
    assert lines[2] == malloc.name_of(str(INSTALLED))


@needs_malloc
def test_no_reexec_when_system_or_already_preloaded():
    assert run_probe({malloc.ENV: "system"}) == ["start", "glibc"]
    lines = run_probe({"LD_PRELOAD": str(INSTALLED)})
    assert lines[0] == "start" and lines[1] != "start" and lines[1] != "glibc", lines


def test_train_py_refuses_a_missing_library_before_any_work(tmp_path, tokenizer_dir):
    corpus = write_jsonl(tmp_path / "c.jsonl", [{"text": "안녕하세요. 반갑습니다."}])
    result = prepare_cli("--dataset", corpus, "--tokenizer_path", tokenizer_dir, "--max_seq_length", 16,
                         "--cache_dir", tmp_path / "cache", env={malloc.ENV: str(tmp_path / "libnone.so")},
                         check=False)
    assert result.returncode == 1
    assert f"error: {malloc.ENV}={tmp_path / 'libnone.so'}: no such file" in result.stderr
    assert not (tmp_path / "cache").exists()


@needs_malloc
def test_prepared_data_is_the_same_under_the_preloaded_malloc_and_glibc(tmp_path, tokenizer_dir):
    from conftest import SAMPLE_TEXTS

    corpus = write_jsonl(tmp_path / "c.jsonl", [{"text": t} for t in SAMPLE_TEXTS * 20])
    outputs = {}
    for setting in ("auto", "system"):
        result = prepare_cli("--dataset", corpus, "--tokenizer_path", tokenizer_dir, "--max_seq_length", 64,
                             "--packing", "--cache_dir", tmp_path / setting, env={malloc.ENV: setting})
        outputs[setting] = prepared_dir(result.stdout)
    manifests = {k: json.loads((v / "manifest.json").read_text()) for k, v in outputs.items()}
    assert manifests["auto"]["versions"]["malloc"] == f"{malloc.name_of(str(INSTALLED))} ({INSTALLED.resolve()})"
    assert manifests["system"]["versions"]["malloc"] == "glibc"
    assert manifests["auto"]["fingerprint"] == manifests["system"]["fingerprint"]
    arrows = {k: sorted(v.glob("*.arrow")) for k, v in outputs.items()}
    assert [p.name for p in arrows["auto"]] == [p.name for p in arrows["system"]] != []
    for ours, theirs in zip(arrows["auto"], arrows["system"]):
        assert ours.read_bytes() == theirs.read_bytes()


RELEASE_PROBE = """import sys; sys.path.insert(0, {repo!r})
import numpy as np
from rankzero import malloc
def rss_mb():
    return int(next(line for line in open("/proc/self/status") if line.startswith("VmRSS")).split()[1]) // 1024
blocks = [np.ones(1 << 17) for _ in range(200)]  # 200 arrays of 1 MiB, written
del blocks
before = rss_mb()
print(malloc.release_free_memory(), before, rss_mb())
"""


@pytest.mark.parametrize("name, symbol", [("tcmalloc", "MallocExtension_ReleaseFreeMemory"), ("mimalloc", "mi_collect"),
                                          ("system", "malloc_trim")])
def test_release_free_memory_gives_freed_pages_back(name, symbol):
    """What the prepare calls after near dedup's decision: the malloc's free pages go back to the kernel
    (tcmalloc kept all 200 MB here; glibc returns blocks this size at free, so there only the call is checked)."""
    library = None if name == "system" else malloc.find(name)
    if name != "system" and library is None:
        pytest.skip(f"{name} is not installed")
    environ = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", malloc.ENV)}
    if library is not None:
        environ["LD_PRELOAD"] = str(library)
    result = subprocess.run([sys.executable, "-c", RELEASE_PROBE.format(repo=str(REPO))], capture_output=True,
                            text=True, timeout=60, env=environ)
    assert result.returncode == 0, result.stderr
    called, before, after = result.stdout.split()
    assert called == symbol
    if library is not None:
        assert int(before) - int(after) >= 150, f"RSS {before} MB before the call, {after} MB after"
