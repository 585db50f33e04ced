"""fastokens' tokenizer built ahead on a thread (rankzero/data/fastokens_ahead.py): taken only for the same
tokenizer.json text, never left behind, and the ids are the ones the engine would give without it."""

from __future__ import annotations

import json
import shutil
import sys
import threading

import pytest

from conftest import SAMPLE_TEXTS
from helpers import korean_documents, run, write_jsonl
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


# A fresh interpreter forks, as train.py's DataLoader workers and Kiwi processes are forked from a process whose only
# extra thread is this builder: forked from pytest's own process, the child would inherit whatever threads earlier
# tests left there (Ray's, a tokenizer pool's) and could hang on a lock one of them held.
FORKED = """
import json, os, select, sys
from rankzero.data import fastokens_ahead
from rankzero.data.encode import FastokensEngine, HFEngine, load_tokenizer
from rankzero.data.fastokens_ahead import building_ahead

directory, texts = sys.argv[1], json.loads(sys.argv[2])
info = load_tokenizer(directory)
with building_ahead(directory, "auto"):
    build = fastokens_ahead._ahead
    build.thread.join()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: not taken (another process), and the ids are still right
        ok = False
        try:
            engine = FastokensEngine(info)
            ok = (engine.tokenizer is not build.tokenizer and fastokens_ahead._ahead is build
                  and engine.encode(texts)[0].tolist() == HFEngine(info).encode(texts)[0].tolist())
        finally:
            os.write(write, b"1" if ok else b"0")
            os._exit(0)
    os.close(write)
    answered = select.select([read], [], [], 120)[0]
    answer = os.read(read, 1) if answered else b"?"
    if not answered:
        os.kill(pid, 9)
    os.waitpid(pid, 0)
    print("child", answer.decode(), "parent takes it", FastokensEngine(info).tokenizer is build.tokenizer)
"""


def test_a_forked_child_builds_its_own(tokenizer_dir):
    """A worker process forked inside the block has the parent's record of the build, not its tokenizer; the parent
    still takes it."""
    result = run([sys.executable, "-c", FORKED, tokenizer_dir, json.dumps(list(SAMPLE_TEXTS), ensure_ascii=False)],
                 timeout=300)
    assert result.stdout.split() == ["child", "1", "parent", "takes", "it", "True"], result.stdout + result.stderr


def test_an_error_in_the_block_leaves_nothing_behind(tokenizer_dir):
    with pytest.raises(KeyError):
        with building_ahead(str(tokenizer_dir), "auto"):
            build = fastokens_ahead._ahead
            raise KeyError("the plan failed")
    assert fastokens_ahead._ahead is None and not build.thread.is_alive()


def test_no_thread_to_be_had_is_no_error(tokenizer_dir, monkeypatch):
    def refuse(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    with building_ahead(str(tokenizer_dir), "auto"):
        assert fastokens_ahead._ahead is None
    monkeypatch.undo()
    assert FastokensEngine(load_tokenizer(tokenizer_dir)).tokenizer is not None  # loaded where it always was


def test_train_py_takes_the_tokenizer_it_built_ahead(tokenizer_dir, tmp_path):
    """The prepare that train.py runs uses the tokenizer loaded on the thread (one engine, taken once)."""
    corpus = write_jsonl(tmp_path / "ko.jsonl", [{"text": t} for t in korean_documents(50)])
    argv = ["train.py", "--tokenize_only", "--dataset", str(corpus), "--tokenizer_path", str(tokenizer_dir),
            "--max_seq_length", "64", "--cache_dir", str(tmp_path / "cache")]
    code = ("import runpy, sys\nfrom rankzero.data import fastokens_ahead\ntaken = []\nreal = fastokens_ahead.take\n"
            "def take(text):\n    tokenizer = real(text)\n    taken.append(tokenizer is not None)\n    return tokenizer\n"
            f"fastokens_ahead.take = take\nsys.argv = {argv!r}\n"
            "try:\n    runpy.run_path('train.py', run_name='__main__')\n"
            "except SystemExit as exit:\n    assert not exit.code\n"
            "print('taken:', taken)\n")
    assert "taken: [True]" in run([sys.executable, "-c", code]).stdout
