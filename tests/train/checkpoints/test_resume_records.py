"""What a resume reads from a checkpoint besides its tensors: the data record and trainer_state.json are
verified with the rest (a damaged one is a damaged checkpoint), and the token count goes on exactly.

Real checkpoints from train.py on CPU (tiny model, 8 steps, checkpoints at 3, 6 and 8, logs every 4)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from rankzero.errors import RankzeroError
from rankzero.train.checkpoints.records import DATA_RECORD
from rankzero.train.checkpoints.resume import resolve_resume
from rankzero.train.checkpoints.verify import verify_checkpoint
from helpers import REPO, log_history, quiet_env, run, train_flags

STEPS = 8


def flags(train_corpus, tokenizer_dir, cache, out, **extra):
    return train_flags(train_corpus, tokenizer_dir, cache, out, **{"max_steps": STEPS, "save_strategy": "steps",
                                                                    "save_steps": 3, "logging_steps": 4, **extra})


@pytest.fixture(scope="module")
def trained(tmp_path_factory, train_corpus, tokenizer_dir):
    """A run dir with checkpoint-3, -6 and -8 and its stdout; copy the dir before changing it."""
    base = tmp_path_factory.mktemp("resume-records")
    result = run([sys.executable, REPO / "train.py", *flags(train_corpus, tokenizer_dir, base / "cache", base / "run")])
    return base, result.stdout


@pytest.fixture
def run_dir(trained, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(trained[0] / "run", copy)
    return copy


def train_py(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "train.py"), *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=quiet_env(), cwd=REPO)


# ------------------------------------------------------------------ the data record (issue 29, item 5)

DAMAGED_RECORDS = {"unparseable": '{"fingerprint": "ab', "empty": "", "a list": "[1, 2, 3]",
                   "no fingerprint": '{"sources": ["a.jsonl"]}', "a number as fingerprint": '{"fingerprint": 7}'}


@pytest.mark.parametrize("content", DAMAGED_RECORDS.values(), ids=DAMAGED_RECORDS.keys())
def test_an_unreadable_data_record_is_a_damaged_checkpoint(run_dir, content):
    (run_dir / "checkpoint-8" / DATA_RECORD).write_text(content)
    [problem] = verify_checkpoint(run_dir / "checkpoint-8")
    assert problem.startswith(f"{DATA_RECORD} ") and "the data this checkpoint was trained on is damaged" in problem
    with pytest.warns(UserWarning, match=r"resuming from checkpoint-6, skipping newer damaged") as caught:
        assert resolve_resume("auto", str(run_dir)) == str(run_dir / "checkpoint-6")
    assert f"checkpoint-8: {DATA_RECORD} " in str(caught[0].message)
    with pytest.raises(RankzeroError, match=f"checkpoint-8 is damaged: {DATA_RECORD} "):
        resolve_resume(str(run_dir / "checkpoint-8"), str(run_dir))


def test_a_missing_data_record_still_only_warns(run_dir):
    (run_dir / "checkpoint-8" / DATA_RECORD).unlink()  # saved by an older rankzero or another tool
    assert verify_checkpoint(run_dir / "checkpoint-8") == []


# ------------------------------------------------------------------ trainer_state.json (item 15)

EDITS = [("global_step", "ten", r"global_step is \"ten\", not a count"),
         ("global_step", -3, r"global_step is -3, not a count"),
         ("max_steps", True, r"max_steps is true, not a count"),
         ("epoch", [1], r"epoch is \[1\], not a number"),
         ("log_history", {"loss": 1}, r"log_history is not a list of objects"),
         ("log_history", [1, 2], r"log_history is not a list of objects"),
         ("stateful_callbacks", {"TrainerControl": 3}, r"stateful_callbacks is not an object of callback states"),
         ("steps_done", 6, r"unknown field 'steps_done'")]


@pytest.mark.parametrize("field,value,expected", EDITS, ids=[f"{f}={v!r}" for f, v, _ in EDITS])
def test_a_hand_edited_trainer_state_is_named(run_dir, field, value, expected):
    path = run_dir / "checkpoint-8" / "trainer_state.json"
    state = json.loads(path.read_text())
    path.write_text(json.dumps({**state, field: value}))
    [problem] = verify_checkpoint(run_dir / "checkpoint-8")
    assert problem.startswith("trainer_state.json: ") and re.search(expected, problem), problem


def test_through_train_py_a_hand_edited_state_is_refused_by_name_and_skipped_by_auto(run_dir, trained, train_corpus,
                                                                                    tokenizer_dir):
    base, _ = trained
    path = run_dir / "checkpoint-8" / "trainer_state.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "global_step": "ten"}))
    named = train_py(*flags(train_corpus, tokenizer_dir, base / "cache", run_dir,
                            resume_from_checkpoint=run_dir / "checkpoint-8"))
    assert named.returncode == 1 and "Traceback" not in named.stderr, named.stderr[-3000:]
    assert re.search(r"^error: --resume_from_checkpoint \S+checkpoint-8 is damaged: trainer_state.json: global_step "
                     r"is \"ten\", not a count", named.stderr, re.M), named.stderr[-2000:]

    (run_dir / "checkpoint-6" / DATA_RECORD).write_text("[1, 2, 3]")  # and the next one's data record
    auto = run([sys.executable, REPO / "train.py", *flags(train_corpus, tokenizer_dir, base / "cache", run_dir,
                                                          max_steps=10, resume_from_checkpoint="auto")])
    assert "resuming from checkpoint-3, skipping newer damaged" in auto.stderr
    assert f"checkpoint-6: {DATA_RECORD} is a JSON list, not an object" in auto.stderr
    assert "step 4/10" in auto.stdout and "step 3/10" not in auto.stdout


# ------------------------------------------------------------------ tokens_seen across a resume (item 14)


def test_a_resumed_run_counts_the_same_tokens_as_an_uninterrupted_one(run_dir, trained, train_corpus,
                                                                       tokenizer_dir):
    base, uninterrupted_stdout = trained
    whole = {entry["step"]: entry["tokens_seen"] for entry in log_history(base / "run") if "tokens_seen" in entry}
    assert {3, 6} <= set(whole)  # a save step is a logging step: the checkpoint's history ends at its step
    shutil.rmtree(run_dir / f"checkpoint-{STEPS}", ignore_errors=True)
    for name in ("model.safetensors", "trainer_state.json"):
        (run_dir / name).unlink()
    result = run([sys.executable, REPO / "train.py", *flags(train_corpus, tokenizer_dir, base / "cache", run_dir,
                                                            resume_from_checkpoint=run_dir / "checkpoint-6")])
    resumed = {entry["step"]: entry["tokens_seen"] for entry in log_history(run_dir) if "tokens_seen" in entry}
    assert resumed[STEPS] == whole[STEPS], (resumed, whole)
    assert f"step {STEPS}/{STEPS} " in result.stdout
    assert (f"done: {STEPS} steps, {whole[STEPS]:,} tokens (resumed at step 6: 2 steps, {whole[STEPS] - whole[6]:,} "
            "tokens in this run)") in result.stdout, result.stdout[-1500:]
    assert f"done: {STEPS} steps, {whole[STEPS]:,} tokens in " in uninterrupted_stdout
