"""fastokens' tokenizer built ahead on a thread (rankzero/data/fastokens_ahead.py): taken only for the same
tokenizer.json text, never left behind, and the ids are the ones the engine would give without it."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from conftest import SAMPLE_TEXTS
from rankzero.data import encode, fastokens_ahead
from rankzero.data.encode import FastokensEngine, HFEngine, load_tokenizer
from rankzero.data.fastokens_ahead import building_ahead

pytestmark = pytest.mark.skipif(not encode.fastokens_installed(), reason="fastokens is not installed")


def test_the_engine_takes_the_tokenizer_built_ahead_and_gives_the_same_ids(tokenizer_dir):
    info = load_tokenizer(tokenizer_dir)
    with building_ahead(str(tokenizer_dir), "auto"):
        build = fastokens_ahead._ahead
        assert build is not None and build.thread.name == "rankzero-fastokens"
        build.thread.join()
        engine = FastokensEngine(info)
        assert engine.tokenizer is build.tokenizer  # taken, not built again
        assert fastokens_ahead._ahead is None  # taken once
        assert FastokensEngine(info).tokenizer is not build.tokenizer
    ids, lengths = engine.encode(list(SAMPLE_TEXTS))
    expected_ids, expected_lengths = HFEngine(info).encode(list(SAMPLE_TEXTS))
    assert ids.tolist() == expected_ids.tolist() and lengths.tolist() == expected_lengths.tolist()


def test_another_tokenizer_builds_its_own(tokenizer_dir, tmp_path):
    """Built ahead from one tokenizer.json, the engine of another text must not take it: the other ids prove it."""
    other = tmp_path / "other"
    shutil.copytree(tokenizer_dir, other)
    spec = json.loads((other / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = spec["model"]["vocab"]
    first, second = sorted(vocab, key=vocab.get)[-2:]  # swap two ids: a different tokenizer, the same shape
    vocab[first], vocab[second] = vocab[second], vocab[first]
    (other / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    info = load_tokenizer(other)
    with building_ahead(str(tokenizer_dir), "auto"):
        build = fastokens_ahead._ahead
        engine = FastokensEngine(info)
        assert engine.tokenizer is not build.tokenizer and fastokens_ahead._ahead is build
    texts = list(SAMPLE_TEXTS) + [first, second]
    assert engine.encode(texts)[0].tolist() == HFEngine(info).encode(texts)[0].tolist()
    assert fastokens_ahead._ahead is None and not build.thread.is_alive()  # waited for and dropped on leaving


@pytest.mark.parametrize("requested, may_build", [("hf", True), ("auto", False)])
def test_nothing_is_built_for_the_hf_engine_or_a_rank_that_will_not_build(tokenizer_dir, requested, may_build):
    with building_ahead(str(tokenizer_dir), requested, may_build):
        assert fastokens_ahead._ahead is None


def test_a_directory_without_tokenizer_json_starts_nothing(tmp_path):
    with building_ahead(str(tmp_path), "auto"):
        assert fastokens_ahead._ahead is None


def test_a_forked_child_builds_its_own(tokenizer_dir):
    """A worker process forked while the build runs has the parent's record of it but not its thread."""
    info = load_tokenizer(tokenizer_dir)
    with building_ahead(str(tokenizer_dir), "auto"):
        build = fastokens_ahead._ahead
        build.thread.join()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: not taken (another process), and the ids are still right
            engine = FastokensEngine(info)
            ok = engine.tokenizer is not build.tokenizer and fastokens_ahead._ahead is build
            ok = ok and engine.encode(list(SAMPLE_TEXTS))[0].tolist() == HFEngine(info).encode(list(SAMPLE_TEXTS))[0].tolist()
            os.write(write, b"1" if ok else b"0")
            os._exit(0)
        os.close(write)
        assert os.read(read, 1) == b"1"
        os.waitpid(pid, 0)
        assert FastokensEngine(info).tokenizer is build.tokenizer  # the parent still takes it
