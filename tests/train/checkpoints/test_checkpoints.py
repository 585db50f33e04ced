"""Checkpoints a resume can trust: damaged files found cheaply and
named, `auto` falling back past them, the data fingerprint checked on resume, a full disk during a save
reported as one with the staging removed, a read-only output dir found before the prepare.

Real checkpoints come from train.py on CPU (tiny model, a few steps); a full or read-only disk is a
tmpfs in a private mount namespace (`unshare -rm`), skipped visibly where that is not allowed, with
the same decisions also checked on faked errors everywhere."""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rankzero.errors import RankzeroError
from rankzero.train.checkpoints.records import DATA_RECORD
from rankzero.train.checkpoints.resume import resolve_resume
from rankzero.train.checkpoints.verify import verify_checkpoint
from helpers import REPO, free_port, losses, quiet_env, run, train_flags, write_corpus

STEPS = 4  # checkpoints at 2 and 4


@pytest.fixture(scope="module")
def trained(tmp_path_factory, train_corpus, tokenizer_dir):
    """A finished run dir holding checkpoint-2 and checkpoint-4, and its cache dir; copy before changing."""
    base = tmp_path_factory.mktemp("trained")
    run([sys.executable, REPO / "train.py", *flags(train_corpus, tokenizer_dir, base / "cache", base / "run")])
    return base


def flags(train_corpus, tokenizer_dir, cache, out, **extra):
    return train_flags(train_corpus, tokenizer_dir, cache, out, **{"max_steps": STEPS, "save_strategy": "steps",
                                                             "save_steps": 2, "logging_steps": 1, **extra})


@pytest.fixture
def run_dir(trained, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(trained / "run", copy)
    return copy


def cut(path: Path, keep: int | None = None) -> None:
    """Truncate `path` to `keep` bytes (default: half), as a kill or a full disk mid-write leaves it."""
    size = path.stat().st_size
    os.truncate(path, size // 2 if keep is None else keep)


def train_py(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "train.py"), *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=env or quiet_env(), cwd=REPO)


def error_lines(result: subprocess.CompletedProcess, code: int = 1) -> list[str]:
    """The `error:` lines of a run that failed with `code` (1; 2 for an argument error) and no traceback."""
    assert result.returncode == code and "Traceback" not in result.stderr, result.stderr[-3000:]
    return [line for line in result.stderr.splitlines() if line.startswith("error:")]


# ------------------------------------------------------------------ damaged checkpoints


def test_an_intact_checkpoint_passes_without_any_tensor_loaded(run_dir, monkeypatch):
    import safetensors
    import safetensors.torch
    import torch

    def refuse(*args, **kwargs):
        raise AssertionError("verification must not load tensors")

    for module, name in ((torch, "load"), (safetensors, "safe_open"), (safetensors.torch, "load_file")):
        monkeypatch.setattr(module, name, refuse)
    checkpoint = run_dir / "checkpoint-4"
    assert {"model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json",
            DATA_RECORD} <= {p.name for p in checkpoint.iterdir()}
    assert verify_checkpoint(checkpoint) == []


DAMAGES = [
    ("model.safetensors", "half", r"model.safetensors is [\d,]+ bytes, its header describes [\d,]+ \(cut short\)"),
    ("model.safetensors", "last byte", r"model.safetensors is [\d,]+ bytes, its header describes [\d,]+ \(cut short\)"),
    ("model.safetensors", "empty", r"model.safetensors is 0 bytes: cut short"),
    ("optimizer.pt", "half", r"optimizer.pt \([\d,]+ bytes\) is cut short: no zip directory at its end"),
    ("optimizer.pt", "last byte", r"optimizer.pt \([\d,]+ bytes\) is cut short"),
    ("optimizer.pt", "deleted", r"optimizer.pt is missing"),
    ("scheduler.pt", "half", r"scheduler.pt \([\d,]+ bytes\) is cut short"),
    ("rng_state.pth", "last byte", r"rng_state.pth \([\d,]+ bytes\) is cut short"),
    ("training_args.bin", "half", r"training_args.bin \([\d,]+ bytes\) is cut short"),
    ("trainer_state.json", "half", r"trainer_state.json does not parse"),
    ("trainer_state.json", "deleted", r"trainer_state.json is missing"),
    ("config.json", "half", r"config.json does not parse"),
]


@pytest.mark.parametrize("name,damage,expected", DAMAGES, ids=[f"{n}-{d}" for n, d, _ in DAMAGES])
def test_each_damaged_file_is_named(run_dir, name, damage, expected):
    import re

    path = run_dir / "checkpoint-4" / name
    if damage == "deleted":
        path.unlink()
    else:
        cut(path, {"half": None, "last byte": path.stat().st_size - 1, "empty": 0}[damage])
    problems = verify_checkpoint(run_dir / "checkpoint-4")
    assert len(problems) == 1 and re.search(expected, problems[0]), problems


def test_sharded_weights_are_checked_through_their_index(run_dir):
    from transformers import AutoModelForCausalLM

    checkpoint = run_dir / "checkpoint-4"
    model = AutoModelForCausalLM.from_pretrained(checkpoint)
    (checkpoint / "model.safetensors").unlink()
    model.save_pretrained(checkpoint, max_shard_size="300KB")
    shards = sorted(checkpoint.glob("model-*.safetensors"))
    assert len(shards) >= 3 and (checkpoint / "model.safetensors.index.json").is_file()
    assert verify_checkpoint(checkpoint) == []
    cut(shards[1])
    shards[2].unlink()
    problems = verify_checkpoint(checkpoint)
    assert any(p.startswith(f"{shards[1].name} is ") and "cut short" in p for p in problems), problems
    assert f"{shards[2].name} is missing (named by model.safetensors.index.json)" in problems


def test_auto_falls_back_to_the_newest_intact_checkpoint_and_says_what_it_skipped(run_dir):
    cut(run_dir / "checkpoint-4" / "optimizer.pt")
    with pytest.warns(UserWarning) as caught:
        assert resolve_resume("auto", str(run_dir)) == str(run_dir / "checkpoint-2")
    message = str(caught[0].message)
    assert "resuming from checkpoint-2" in message and f"{run_dir / 'checkpoint-4'}: optimizer.pt (" in message

    cut(run_dir / "checkpoint-2" / "model.safetensors")  # nothing intact left: no silent fresh start
    with pytest.raises(RankzeroError, match="every checkpoint in .* is damaged") as error:
        resolve_resume("auto", str(run_dir))
    assert "checkpoint-2: model.safetensors" in str(error.value) and "checkpoint-4: optimizer.pt" in str(error.value)


def test_a_damaged_checkpoint_given_by_name_is_an_error_naming_the_file(run_dir):
    cut(run_dir / "checkpoint-2" / "scheduler.pt", 100)
    with pytest.raises(RankzeroError, match=r"--resume_from_checkpoint .*checkpoint-2 is damaged: scheduler.pt "
                                            r"\(100 bytes\) is cut short"):
        resolve_resume(str(run_dir / "checkpoint-2"), str(run_dir))
    with pytest.raises(RankzeroError, match="is damaged: optimizer.pt is missing .not a checkpoint-N dir"):
        resolve_resume(str(run_dir), str(run_dir))  # the run dir given for one of its checkpoints


def test_through_train_py_auto_resumes_past_a_cut_checkpoint(run_dir, trained, train_corpus, tokenizer_dir):
    cut(run_dir / "checkpoint-4" / "optimizer.pt")
    result = run([sys.executable, REPO / "train.py", *flags(train_corpus, tokenizer_dir, trained / "cache", run_dir,
                                                            max_steps=6, resume_from_checkpoint="auto")])
    assert "step 3/6" in result.stdout and "step 2/6" not in result.stdout  # resumed from checkpoint-2
    assert f"{run_dir / 'checkpoint-4'}: optimizer.pt (" in result.stderr
    assert verify_checkpoint(run_dir / "checkpoint-4") == []  # saved again at step 4, whole
    assert set(losses(run_dir)) >= {3, 4, 5, 6}

    cut(run_dir / "checkpoint-6" / "rng_state.pth")
    damaged = train_py(*flags(train_corpus, tokenizer_dir, trained / "cache", run_dir, max_steps=8,
                              resume_from_checkpoint=run_dir / "checkpoint-6"))
    [line] = error_lines(damaged)
    assert "checkpoint-6 is damaged: rng_state.pth (" in line and "resolved configuration" not in damaged.stdout


# ------------------------------------------------------------------ the data a checkpoint was trained on


def test_resume_on_changed_data_stops_with_both_fingerprints_unless_allowed(run_dir, trained, train_corpus,
                                                                              tokenizer_dir, tmp_path):
    before = json.loads((run_dir / "checkpoint-4" / DATA_RECORD).read_text())
    assert before["fingerprint"] == Path(before["prepared_dir"]).name and before["sources"] == [str(train_corpus)]
    more = write_corpus(tmp_path / "more.jsonl", copies=7)  # another file: other data
    changed = flags(more, tokenizer_dir, trained / "cache", run_dir, max_steps=6, resume_from_checkpoint="auto")
    result = train_py(*changed)
    [line] = error_lines(result)
    prepared = next(l.split("prepared: ")[1] for l in result.stdout.splitlines() if l.startswith("prepared: "))
    after = Path(prepared).name
    assert after != before["fingerprint"]
    assert f"was trained on other data: data fingerprint {before['fingerprint']} ({before['prepared_dir']}, from " \
           f"{train_corpus}); this run's is {after} ({prepared}, from {more}); they differ in sources" in line
    assert "--allow_data_change" in line and "resolved configuration" not in result.stdout

    allowed = run([sys.executable, REPO / "train.py", *changed, "--allow_data_change", "true"])
    assert "continuing, as --allow_data_change asks" in allowed.stderr and "step 6/6" in allowed.stdout
    assert json.loads((run_dir / "checkpoint-6" / DATA_RECORD).read_text())["fingerprint"] == after
    assert json.loads((run_dir / "checkpoint-4" / DATA_RECORD).read_text())["fingerprint"] == before["fingerprint"]
    # The earlier run's record of its data is kept, not overwritten; the new one is not replayed by a resume.
    [earlier] = (run_dir / "run_history").glob("*-run_config.json")
    assert json.loads(earlier.read_text())["sources"]["dataset"] == [str(train_corpus)]
    assert json.loads((run_dir / "run_config.json").read_text())["sources"]["dataset"] == [str(more)]
    assert "allow_data_change" not in (run_dir / "recipe.yaml").read_text()


def test_the_data_check_decisions(run_dir):
    from rankzero.train.checkpoints.records import data_record

    saved = json.loads((run_dir / "checkpoint-4" / DATA_RECORD).read_text())
    same = data_record(saved["prepared_dir"])
    assert same["fingerprint"] == saved["fingerprint"]
    assert resolve_resume("auto", str(run_dir), same) == str(run_dir / "checkpoint-4")  # no warning, no error
    other = {**same, "fingerprint": "0" * 20, "prepared_dir": "/elsewhere/" + "0" * 20,
             "fingerprint_inputs": {**same["fingerprint_inputs"], "max_seq_length": 128, "seed": 1}}
    with pytest.raises(RankzeroError, match=f"data fingerprint {saved['fingerprint']} .*this run's is {'0' * 20} "
                                            r"\(/elsewhere/0+, from .*\); they differ in max_seq_length, seed"):
        resolve_resume("auto", str(run_dir), other)
    with pytest.warns(UserWarning, match="continuing, as --allow_data_change asks"):
        resolve_resume("auto", str(run_dir), other, allow_data_change=True)
    (run_dir / "checkpoint-4" / DATA_RECORD).unlink()  # a checkpoint from an older rankzero
    with pytest.warns(UserWarning, match="records no data fingerprint"):
        assert resolve_resume("auto", str(run_dir), other) == str(run_dir / "checkpoint-4")


# ------------------------------------------------------------------ a full disk during a save


def _in_tmpfs(options: str, mount_point: Path, listing: Path, command: list) -> list:
    """`command` in a private mount namespace with a tmpfs at mount_point; what it held at the end goes to
    `listing` (the tmpfs vanishes with the namespace)."""
    script = ('mount -t tmpfs -o "$1" tmpfs "$2" || exit 99; dir=$2; listing=$3; shift 3; "$@"; status=$?; '
              'ls -A "$dir" > "$listing"; exit $status')
    return ["unshare", "-rm", "sh", "-c", script, "sh", options, str(mount_point), str(listing), *map(str, command)]


def _needs_tmpfs(tmp_path: Path) -> None:
    probe = tmp_path / "probe-mount"
    probe.mkdir()
    try:
        ok = shutil.which("unshare") is not None and subprocess.run(
            _in_tmpfs("size=1m", probe, tmp_path / "probe-listing", ["true"]), capture_output=True,
            timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    if not ok:
        pytest.skip("needs a private mount namespace (unshare -rm) for a small tmpfs")


def test_a_full_disk_during_a_checkpoint_save_is_one_line_and_leaves_no_staging(tmp_path, train_corpus, tokenizer_dir):
    _needs_tmpfs(tmp_path)
    out, listing = tmp_path / "out", tmp_path / "listing"
    out.mkdir()
    # 2 MB: the run files and the model's 0.9 MB fit, the optimizer's 1.9 MB does not. torch.save says
    # only "iostream error" there; the probe write after it finds the full disk.
    command = [sys.executable, REPO / "train.py", *flags(train_corpus, tokenizer_dir, tmp_path / "cache", out)]
    result = subprocess.run(_in_tmpfs("size=2m", out, listing, command), capture_output=True, text=True,
                            timeout=300, cwd=REPO, env=quiet_env())
    [line] = error_lines(result)
    assert line.startswith(f"error: --output_dir {out}: no space left on the device while saving checkpoint-2 (")
    assert "were free when the save started; a checkpoint takes about" in line, line
    assert "the partial checkpoint was removed" in line and "basic_ios" not in result.stderr
    left = set(listing.read_text().split())
    assert {"run_config.json", "recipe.yaml"} <= left and not left & {".checkpoint-staging", "checkpoint-2"}, left


def test_a_full_disk_on_one_rank_stops_every_rank_with_the_same_message(tmp_path, train_corpus, tokenizer_dir):
    """Two scheduler-style ranks: rank 0 runs out of space writing the optimizer; rank 1, whose own files
    fit, hears it in the gather that ends the save and stops with the same line, not a gloo error."""
    _needs_tmpfs(tmp_path)
    out, logs = tmp_path / "out", tmp_path / "logs"
    out.mkdir()
    logs.mkdir()
    script = ('mount -t tmpfs -o size=2m tmpfs "$1" || exit 99; out=$1; logs=$2; shift 2; '
              'RANK=0 LOCAL_RANK=0 "$@" > "$logs/rank0" 2>&1 & first=$!; '
              'RANK=1 LOCAL_RANK=1 "$@" > "$logs/rank1" 2>&1; second=$?; wait $first; '
              'echo $? $second > "$logs/status"; ls -A "$out" > "$logs/listing"')
    command = [sys.executable, REPO / "train.py", *flags(train_corpus, tokenizer_dir, tmp_path / "cache", out)]
    subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", out, logs, *map(str, command)], timeout=300,
                   cwd=REPO, env=quiet_env(WORLD_SIZE=2, LOCAL_WORLD_SIZE=2, MASTER_ADDR="127.0.0.1",
                                           MASTER_PORT=free_port()))
    printed = [(logs / f"rank{rank}").read_text() for rank in (0, 1)]
    assert (logs / "status").read_text().split() == ["1", "1"], printed[1][-3000:]
    lines = [[line for line in text.splitlines() if line.startswith("error:")] for text in printed]
    assert lines[0] == lines[1] and len(lines[0]) == 1, lines
    assert f"--output_dir {out}: no space left on the device while saving checkpoint-2" in lines[0][0]
    assert not any("Traceback" in text for text in printed)
    assert not set((logs / "listing").read_text().split()) & {".checkpoint-staging", "checkpoint-2"}


def _tiny_trainer(output_dir: Path, tokenizer_dir, **extra):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rankzero.runtime import Runtime
    from rankzero.train.collator import BlockCollator
    from rankzero.train.model import load_config
    from rankzero.train.throughput import ThroughputCallback
    from rankzero.train.trainer import RankzeroTrainer
    from rankzero.train.training_args import TrainingArguments, set_up_devices
    from helpers import TINY

    model = AutoModelForCausalLM.from_config(load_config(TINY), attn_implementation="sdpa")
    dataset = Dataset.from_dict({"input_ids": [list(range(10, 26))] * 8}).with_format("numpy")
    args = TrainingArguments(output_dir=str(output_dir), max_steps=2, save_steps=1, per_device_train_batch_size=2,
                             use_cpu=True, report_to="none", disable_tqdm=True, remove_unused_columns=False)
    set_up_devices(args, Runtime(0, 1, 0, 1, 0, "h"))
    return RankzeroTrainer(model=model, args=args, train_dataset=dataset, data_collator=BlockCollator(),
                           processing_class=AutoTokenizer.from_pretrained(tokenizer_dir),
                           meter=ThroughputCallback(model, seq_length=16), **extra)


def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


class SafetensorError(Exception):
    """What safetensors raises: not an OSError, the errno only in the text."""


def _safetensors_full(*args, **kwargs):
    raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")


def _torch_full(*args, **kwargs):
    raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")


def _stage(stage: str):
    """(object, attribute) of what writes each part of a checkpoint."""
    import transformers

    import rankzero.train.trainer as trainer_module

    return {"model": (transformers.Trainer, "_save"),
            "optimizer and scheduler": (transformers.Trainer, "_save_optimizer_and_scheduler"),
            "rng state": (transformers.Trainer, "_save_rng_state"),
            "trainer state": (transformers.TrainerState, "save_to_json"),
            "data record": (trainer_module, "write_data_record")}[stage]


FAULTS = [("model", "ENOSPC"), ("optimizer and scheduler", "ENOSPC"), ("rng state", "ENOSPC"),
          ("trainer state", "ENOSPC"), ("data record", "ENOSPC"),
          ("model", "safetensors"), ("optimizer and scheduler", "torch with a full disk")]


@pytest.mark.parametrize("stage,fault", FAULTS, ids=[f"{s}-{f}" for s, f in FAULTS])
def test_enospc_at_every_stage_of_a_save_is_reported_and_the_staging_removed(tmp_path, tokenizer_dir, monkeypatch,
                                                                              stage, fault):
    import rankzero.train.checkpoints.full_disk as checkpoints

    raiser = {"ENOSPC": _enospc, "safetensors": _safetensors_full, "torch with a full disk": _torch_full}[fault]
    monkeypatch.setattr(*_stage(stage), raiser)
    if fault == "torch with a full disk":  # the probe write after the failure finds the disk full
        monkeypatch.setattr(checkpoints, "disk_full", lambda directory: True)
    out = tmp_path / "out"
    trainer = _tiny_trainer(out, tokenizer_dir, data_record={"fingerprint": "f"})
    with pytest.raises(RankzeroError) as error:
        trainer.train()
    assert str(error.value).startswith(f"--output_dir {out}: no space left on the device while saving checkpoint-1 (")
    assert "the partial checkpoint was removed" in str(error.value)
    assert not (out / ".checkpoint-staging").exists() and not (out / "checkpoint-1").exists()


def test_another_save_failure_is_not_called_a_full_disk(tmp_path, tokenizer_dir, monkeypatch):
    import transformers

    from rankzero.train.checkpoints.full_disk import disk_full

    assert not disk_full(tmp_path)  # the real probe: this disk has room
    monkeypatch.setattr(transformers.Trainer, "_save_optimizer_and_scheduler", _torch_full)
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="unexpected pos 576 vs 534"):
        _tiny_trainer(out, tokenizer_dir).train()
    assert not (out / ".checkpoint-staging").exists()


def test_a_full_disk_saving_the_final_model(tmp_path):
    from rankzero.train.checkpoints.full_disk import full_disk_reported

    with pytest.raises(RankzeroError, match=rf"--output_dir {tmp_path}: no space left on the device while saving the "
                                            r"final model \([\d.,]+ [MG]B were free when the save started"):
        with full_disk_reported(tmp_path, "the final model", "its files there are incomplete"):
            _enospc()
    with pytest.raises(KeyError):  # anything else passes through untouched
        with full_disk_reported(tmp_path, "the final model", "its files there are incomplete"):
            raise KeyError("x")


# ------------------------------------------------------------------ a read-only output dir


def test_a_read_only_output_dir_stops_before_the_prepare(tmp_path, train_corpus, tokenizer_dir):
    _needs_tmpfs(tmp_path)
    out, cache = tmp_path / "out", tmp_path / "cache"
    out.mkdir()
    cache.mkdir()
    command = [sys.executable, REPO / "train.py", *flags(train_corpus, tokenizer_dir, cache, out)]
    result = subprocess.run(_in_tmpfs("ro,size=1m", out, tmp_path / "listing", command), capture_output=True,
                            text=True, timeout=300, cwd=REPO, env=quiet_env())
    assert error_lines(result, code=2) == ["error: invalid arguments:"]
    assert f"  - --output_dir {out}: not writable: Read-only file system; choose another --output_dir" \
           in result.stderr.splitlines()
    assert list(cache.iterdir()) == [] and "[prepare]" not in result.stderr  # nothing prepared

    script = ("from rankzero.train.output_dir import output_dir_problems as p; import sys; "
              "print(p(sys.argv[1] + '/new/run'))")
    nested = subprocess.run(_in_tmpfs("ro,size=1m", out, tmp_path / "listing",
                                      [sys.executable, "-c", script, out]),
                            capture_output=True, text=True, timeout=120, cwd=REPO, env=quiet_env())
    assert f"--output_dir {out}/new/run: not writable (cannot create it in {out}): Read-only file system" \
           in nested.stdout, nested.stderr
    assert not (out / "new").exists()


def test_an_output_dir_under_a_file_is_an_argument_error(tmp_path):
    from rankzero.train.output_dir import output_dir_problems

    (tmp_path / "file").write_text("x")
    under_a_file = tmp_path / "file" / "run"
    assert output_dir_problems(under_a_file) == [
        f"--output_dir {under_a_file}: {tmp_path / 'file'} is not a directory; choose another --output_dir"]
    assert output_dir_problems(tmp_path / "a" / "b") == [] and not (tmp_path / "a").exists()  # nothing made
    if os.geteuid() != 0:  # root writes through mode bits; the tmpfs test above covers it
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        assert "not writable: Permission denied" in output_dir_problems(locked)[0]


# ------------------------------------------------------------------ arguments that train nothing or resume nothing


def test_max_steps_0_and_tokenize_only_with_resume_are_argument_errors(tmp_path, train_corpus, tokenizer_dir):
    from rankzero.args import parse_args
    from helpers import TINY

    base = ["--dataset", str(train_corpus), "--tokenizer_path", str(tokenizer_dir), "--cache_dir", str(tmp_path / "c"),
            "--output_dir", str(tmp_path / "out"), "--model_config", str(TINY)]
    with pytest.raises(ValueError, match=r"--max_steps 0: must be at least 1 \(or leave it out"):
        parse_args([*base, "--max_steps", "0"])
    with pytest.raises(ValueError, match=r"--max_steps -5: must be at least 1"):
        parse_args([*base, "--max_steps", "-5"])
    assert parse_args([*base, "--max_steps", "-1"]).training.max_steps == -1  # the default: by epochs
    with pytest.raises(ValueError, match=r"--resume_from_checkpoint: --tokenize_only prepares the data and exits"):
        parse_args([*base, "--tokenize_only", "--resume_from_checkpoint", "auto"])
    with pytest.raises(ValueError, match=r"--allow_data_change: only used with --resume_from_checkpoint"):
        parse_args([*base, "--allow_data_change", "true"])
    with pytest.raises(ValueError, match=r"--resume_from_checkpoint .*/nowhere: no such directory"):
        parse_args([*base, "--resume_from_checkpoint", str(tmp_path / "nowhere")])
    assert not (tmp_path / "c").exists()  # argument errors come before any work


def test_auto_resumes_only_this_runs_checkpoints_and_none_past_max_steps(run_dir, caplog):
    """A checkpoint of another run (left in the dir by hand, or by a rankzero before one run per dir) or one
    past --max_steps (its step would be restored and nothing trained) is never resumed by `auto`."""
    run_id = json.loads((run_dir / "run_config.json").read_text())["run_id"]
    record = run_dir / "checkpoint-4" / DATA_RECORD
    assert json.loads(record.read_text())["run_id"] == run_id  # every checkpoint names the run that wrote it
    record.write_text(json.dumps({**json.loads(record.read_text()), "run_id": "20260101T000000Z-other"}))
    with caplog.at_level(logging.WARNING):
        assert resolve_resume("auto", str(run_dir), max_steps=STEPS) == str(run_dir / "checkpoint-2")
    assert "checkpoint-4: written by another run (20260101T000000Z-other" in caplog.text

    record.write_text(json.dumps({**json.loads(record.read_text()), "run_id": run_id}))
    assert resolve_resume("auto", str(run_dir), max_steps=3) == str(run_dir / "checkpoint-2")
    with pytest.raises(RankzeroError, match="no checkpoint in .* belongs to this run") as error:
        resolve_resume("auto", str(run_dir), max_steps=1)
    assert "checkpoint-2: step 2 is past --max_steps 1" in str(error.value)
    with pytest.raises(RankzeroError, match=r"checkpoint-4: step 4 is past --max_steps 3 \(raise --max_steps"):
        resolve_resume(str(run_dir / "checkpoint-4"), str(run_dir), max_steps=3)
