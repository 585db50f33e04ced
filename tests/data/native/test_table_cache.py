"""The compiled passes' code point tables, cached once per user (rankzero/data/native/table_cache.py): a second
process reads what the first built, every code point as its one-at-a-time definition says, and a stale, broken or
unwritable cache never gives a wrong table."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

import numpy as np

from rankzero.data.dedup import kernel, shingles
from rankzero.data.native import table_cache, unicode_context
from rankzero.data.screen import reference
from rankzero.data.screen.pii_forms import cluster_separators

REPO = Path(__file__).resolve().parents[3]

# Every table a process reads, as a digest per cache name; each builder replaced by one that fails when
# BUILD_FAILS is set, so a process that prints digests under it read them all from the cache.
PROBE = """
import os, sys, xxhash
from rankzero.data.dedup import kernel, shingles
from rankzero.data.native import unicode_context
from rankzero.data.screen import pii_forms, reference, scan as ngram_scan
def fail():
    raise SystemExit("built, not read: " + sys.argv[1])
if os.environ.get("BUILD_FAILS"):
    reference._build_tables = kernel._build_normalising_table = unicode_context.build_composing_seconds = fail
    ngram_scan._build_normalising_table = fail
    shingles._build_fold_table = pii_forms._build_separator_codes = fail
tables = {"ngram_scan": [reference.fold_table(), reference.kinds_table()],
          "shingles": [shingles.fold_table()],
          "dedup_kernel": list(kernel.normalising_table()[:2]),
          "composing_seconds": [sorted(unicode_context.composing_seconds())],
          "ngram_nfkc": list(ngram_scan._normalising_table()),
          "pii_separators": list(pii_forms.separator_codes().values())}
for name, arrays in tables.items():
    print(name, xxhash.xxh3_64_hexdigest(repr([a.tolist() if hasattr(a, "tolist") else a for a in arrays]).encode()))
"""


def run_probe(cache: Path, build_fails: bool) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "RANKZERO_TABLE_CACHE": str(cache)}
    if build_fails:
        env["BUILD_FAILS"] = "1"
    return subprocess.run([sys.executable, "-c", PROBE, "probe"], env=env, capture_output=True, text=True)


def test_a_second_process_reads_the_tables_the_first_built(tmp_path):
    first = run_probe(tmp_path, build_fails=False)
    assert first.returncode == 0, first.stderr
    written = sorted(path.name.split("-")[0] for path in tmp_path.rglob("*.npz"))
    assert written == ["composing_seconds", "dedup_kernel", "ngram_nfkc", "ngram_scan", "pii_separators", "shingles"]
    assert not list(tmp_path.rglob(".*"))  # no temporary file left behind
    second = run_probe(tmp_path, build_fails=True)  # any table built instead of read stops it
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout


def test_the_cached_tables_are_their_definitions_on_every_basic_plane_code_point(tmp_path, monkeypatch):
    """Read back from a cache file (what every process after the first uses), against the definitions one code
    point at a time (normalising_table's: tests/data/dedup/test_dedup_kernel.py)."""
    monkeypatch.setattr(table_cache, "cache_directory", lambda: tmp_path)
    for function in (reference._tables, shingles.fold_table):
        function.cache_clear()
        function()
        function.cache_clear()
    try:
        fold, kinds, folds = reference.fold_table(), reference.kinds_table(), shingles.fold_table()
    finally:
        reference._tables.cache_clear()
        shingles.fold_table.cache_clear()
    # (the kinds read the number separators' table: built here too where this process had not read it yet)
    assert {path.name.split("-")[0] for path in tmp_path.glob("*.npz")} - {"pii_separators"} == {"ngram_scan", "shingles"}
    for code in range(0x10000):
        char = chr(code)
        lower = char.lower()
        assert fold[code] == (ord(lower) if len(lower) == 1 and lower.isalnum() else 0), hex(code)
        assert kinds[code] == (2 if char.isdecimal() else 1 if char in cluster_separators() else 0), hex(code)
        assert folds[code] == shingles.fold(code), hex(code)
    expected = frozenset(unicode_context.build_composing_seconds()["codes"].tolist())
    assert unicode_context.composing_seconds() == expected


def test_another_python_or_other_source_is_another_file(tmp_path, monkeypatch):
    source = tmp_path / "tables.py"
    source.write_text("TABLE = 1\n")
    key = table_cache._key([str(source)])
    source.write_text("TABLE = 2\n")
    assert table_cache._key([str(source)]) != key
    edited = table_cache._key([str(source)])
    monkeypatch.setattr(unicodedata, "unidata_version", "99.0.0")
    assert table_cache._key([str(source)]) not in (key, edited)


def test_a_broken_file_is_rebuilt_and_replaced(tmp_path):
    source = tmp_path / "tables.py"
    source.write_text("TABLE = 1\n")
    built = []

    def build():
        built.append(1)
        return {"table": np.arange(7, dtype=np.uint32)}

    path = tmp_path / f"table-{table_cache._key([str(source)])}.npz"
    for broken in (b"", b"PK\x03\x04 cut short by a crash"):
        path.write_bytes(broken)
        arrays = table_cache.cached("table", build, [str(source)], directory=tmp_path)
        assert arrays["table"].tolist() == list(range(7))
    assert len(built) == 2
    assert table_cache.cached("table", build, [str(source)], directory=tmp_path)["table"].tolist() == list(range(7))
    assert len(built) == 2  # the replaced file is read


def test_they_are_kept_in_the_user_cache_never_in_the_package(tmp_path, monkeypatch):
    monkeypatch.delenv("RANKZERO_TABLE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert table_cache.cache_directory() == tmp_path / "cache" / "rankzero" / "tables"
    monkeypatch.setenv("RANKZERO_TABLE_CACHE", str(tmp_path / "shared"))
    assert table_cache.cache_directory() == tmp_path / "shared"


def test_no_writable_place_builds_per_process(tmp_path, monkeypatch):
    blocked = tmp_path / "not_a_directory"
    blocked.write_text("")  # the user cache cannot be made under a file
    monkeypatch.delenv("RANKZERO_TABLE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    assert table_cache.cache_directory() is None
    built = []

    def build():
        built.append(1)
        return {"table": np.zeros(3)}

    for _ in range(2):
        assert table_cache.cached("table", build, [str(blocked / "tables.py")]).keys() == {"table"}
    assert len(built) == 2


def test_a_writer_killed_before_its_rename_leaves_nothing_for_good(tmp_path):
    """The temporary of a table write killed before its rename (SIGKILL) is removed by the next process that reads the
    table, whether it finds the table or builds it; one written to just now (another process building) is left, and so
    is another table's."""
    source = tmp_path / "tables.py"
    source.write_text("TABLE = 1\n")

    def build():
        return {"table": np.arange(3, dtype=np.uint32)}

    for table_exists in (False, True):
        dead, writing, other = (tmp_path / name for name in (".table-dead.npz", ".table-busy.npz", ".other-dead.npz"))
        for path in (dead, writing, other):
            path.write_bytes(b"PK\x03\x04 cut short by a SIGKILL")
        old = time.time() - table_cache.DEAD_TABLE_WRITE_S - 1
        for path in (dead, other):
            os.utime(path, (old, old))
        arrays = table_cache.cached("table", build, [str(source)], directory=tmp_path)
        assert arrays["table"].tolist() == [0, 1, 2]
        assert (tmp_path / f"table-{table_cache._key([str(source)])}.npz").exists()
        assert not dead.exists() and writing.exists() and other.exists(), table_exists
        writing.unlink()
