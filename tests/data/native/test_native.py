"""native/: passes.c built at install into the extension `_passes` (setup.py), with the constants of their Python
definitions; a process or a whole prepare without it on the numpy references, to the same bytes, said once; and
nothing written into the package while rankzero runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import korean_documents, needs_extension, prepared_dir, write_jsonl
from rankzero.data import native
from rankzero.data.native import constants

REPO = Path(__file__).resolve().parents[3]
PACKAGE = REPO / "rankzero"
TEXTS = ["하나 둘 셋 넷 다섯 여섯 ㅋㅋ…", "Ａ Ｂ Ｃ Ｄ Ｅ Ｆ", "전화 010-1234-5678 여권 M12345678 kim@example.com"]
SIGN = ("import json, sys; from rankzero.data import native; from rankzero.data.screen import scan as n; "
        "from rankzero.data.dedup import minhash; texts = json.loads(input()); "
        "grams, windows, marks, runs = n.scan(*n.code_points([n.prepare(t) for t in texts]), 3, 8, 4, "
        "n.Bitmap.everything()); print(json.dumps(['rankzero.data.native._passes' in sys.modules, "
        "minhash.shingle_hashes(texts)[0].tolist(), grams.values.tolist(), windows.values.tolist(), "
        "n.scan_texts(texts, 3, 8, 4, n.Bitmap.everything())[0].values.tolist(), n.marks_of(texts)[0].tolist(), "
        "marks.tolist(), runs.tolist()]))")


def sign_in_a_process(**env: str) -> tuple[list, str]:
    result = subprocess.run([sys.executable, "-c", SIGN], input=json.dumps(TEXTS), capture_output=True, text=True,
                            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), **env})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), result.stderr


@needs_extension
def test_the_extension_reports_the_constants_of_their_python_definitions():
    """setup.py writes constants.py's values into the header the extension is compiled with; the module reports
    what it was compiled with, and the digest of the sources it was built from."""
    passes = native.passes()
    assert passes.CONSTANTS == {name: getattr(constants, name) for name in constants.C_CONSTANTS}
    assert passes.SOURCE_DIGEST == native.source_digest()
    assert Path(passes.__file__).parent == PACKAGE / "data" / "native"


@needs_extension
def test_without_the_extension_a_process_computes_the_same_numbers_and_says_nothing():
    compiled, _ = sign_in_a_process()
    reference, stderr = sign_in_a_process(RANKZERO_PASSES="numpy")
    assert compiled[0] is True and reference[0] is False  # the references ran: the module was never imported
    assert reference[1:] == compiled[1:] and all(compiled[1:])
    assert stderr == ""  # a worker says nothing: the prepare's summary does, once


@needs_extension
def test_an_extension_built_from_other_sources_is_refused(monkeypatch):
    """An editable install whose passes.c was edited after its build: its machine code is not that source's, so
    the numpy references run and missing() says to rebuild it."""
    monkeypatch.setattr(native, "source_digest", lambda: "0" * 64)
    native._built.cache_clear()
    try:
        assert native.extension() is None
        assert "built from other sources" in native.missing() and "rebuild it" in native.missing()
        with pytest.raises(RuntimeError, match="built from other sources"):
            native.passes()
    finally:
        monkeypatch.undo()
        native._built.cache_clear()
    assert native.extension() is not None


def test_an_unknown_switch_names_its_values(monkeypatch):
    monkeypatch.setenv("RANKZERO_PASSES", "c")
    with pytest.raises(ValueError, match="RANKZERO_PASSES=c: use compiled .* or numpy"):
        native.extension()


@needs_extension
def test_an_array_of_another_type_is_a_type_error_not_a_wild_read():
    import numpy as np

    codes, offsets = native.code_points(["하나 둘"])
    table = np.zeros(0x10000, np.uint32)
    arguments = dict(codes=codes, offsets=offsets, table=table, expansions=np.zeros(1, np.uint32), most_words=1,
                     astral_codes=np.zeros(0, np.uint32), astral_folds=np.zeros(0, np.uint32),
                     words=np.zeros(8, np.uint64), counts=np.zeros(1, np.int64))
    assert native.passes().word_hashes(*arguments.values()) == 0  # every code point a break: no word
    with pytest.raises(TypeError, match="word_hashes\\(\\): offsets must be a C-contiguous int64 array"):
        native.passes().word_hashes(*{**arguments, "offsets": offsets.astype(np.int32)}.values())
    with pytest.raises(TypeError, match="argument counts"):  # read-only: the pass writes it
        native.passes().word_hashes(*{**arguments, "counts": np.frombuffer(bytes(8), np.int64)}.values())
    with pytest.raises(ValueError, match="offsets must rise from 0 to at most len\\(codes\\)"):
        native.passes().word_hashes(*{**arguments, "offsets": np.array([0, 99], np.int64)}.values())
    with pytest.raises(ValueError, match="counts is shorter"):
        native.passes().word_hashes(*{**arguments, "offsets": np.array([0, 1, 2], np.int64)}.values())


def prepare_in(root: Path, tmp_path: Path, name: str, tokenizer_dir: Path, corpus: Path, benchmark: Path,
               **env: str) -> tuple[Path, str]:
    """`train.py --tokenize_only` from `root` (a checkout) with near dedup, --decontaminate and two workers; its
    published dir and stderr."""
    argv = ["train.py", "--tokenize_only", "--dataset", str(corpus), "--tokenizer_path", str(tokenizer_dir),
            "--cache_dir", str(tmp_path / f"cache-{name}"), "--max_seq_length", "64", "--dedup", "near",
            "--decontaminate", str(benchmark), "--dataset_num_proc", "2"]
    result = subprocess.run([sys.executable, *argv], cwd=root, capture_output=True, text=True, env={
        **os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1", "XDG_CACHE_HOME": str(tmp_path / name),
        "RANKZERO_TABLE_CACHE": "", **env})
    assert result.returncode == 0, result.stderr[-3000:]
    return prepared_dir(result.stdout), result.stderr


def files_under(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*") if path.is_file()}


@needs_extension
def test_a_prepare_without_the_extension_publishes_the_same_bytes_and_says_so_once(tmp_path, tokenizer_dir):
    """A checkout where the install built no extension (a copy without the module) prepares with the numpy
    references in every worker: the same Arrow files byte for byte, and one warning, in the summary. The prepare
    with the extension writes nothing into the package (listed before and after)."""
    texts = korean_documents(80, seed=11)
    texts[5] += " 연락처 010-1234-5678, kim@example.com"
    texts[9] = texts[8] + " 끝"  # a near copy
    corpus = write_jsonl(tmp_path / "ko.jsonl", [{"text": text} for text in texts])
    benchmark = tmp_path / "kmmlu"
    benchmark.mkdir()
    (benchmark / "Law-test.csv").write_text(f"question,A,B,C,D,answer\n{texts[20][:60]},가,나,다,라,1\n",
                                            encoding="utf-8")
    before = files_under(PACKAGE)
    compiled, compiled_err = prepare_in(REPO, tmp_path, "compiled", tokenizer_dir, corpus, benchmark)
    assert files_under(PACKAGE) == before
    assert not [name for name in files_under(PACKAGE) if name.endswith(".npz") or "/passes-" in name]
    assert "compiled passes" not in compiled_err and "not built" not in compiled_err

    bare = tmp_path / "bare"
    shutil.copytree(PACKAGE, bare / "rankzero", ignore=shutil.ignore_patterns("_passes*", "__pycache__"))
    shutil.copy(REPO / "train.py", bare / "train.py")
    reference, reference_err = prepare_in(bare, tmp_path, "reference", tokenizer_dir, corpus, benchmark)
    warned = [line for line in reference_err.splitlines() if "is not built" in line]
    assert len(warned) == 1 and "numpy versions" in warned[0], reference_err[-3000:]

    arrow = sorted(path.relative_to(compiled) for path in compiled.rglob("*.arrow"))
    assert arrow and arrow == sorted(path.relative_to(reference) for path in reference.rglob("*.arrow"))
    for name in arrow:
        assert (compiled / name).read_bytes() == (reference / name).read_bytes(), name
    manifests = [json.loads((out / "manifest.json").read_text()) for out in (compiled, reference)]
    for key in ("dropped", "docs_kept", "tokens", "near_dedup", "decontamination", "pii", "fingerprint"):
        assert manifests[0].get(key) == manifests[1].get(key), key
    dropped = manifests[0]["dropped"]
    assert dropped.get("near_duplicate") and dropped.get("benchmark_contamination"), dropped  # both passes ran
