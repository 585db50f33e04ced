"""Checkpoints a user can trust beyond whole files: a planted DCP `.metadata` runs nothing, a full disk inside
an FSDP (DCP) save is reported and cleaned up like any other, and the export of FSDP shards refuses a config
they do not fit.

The FSDP checkpoints here are built in the test, as accelerate lays them out (`pytorch_model_fsdp_0/` and
`optimizer_0/`, DCP folders whose keys start with "model." and "optimizer."), by one process with `no_dist`;
the training runs that write real ones are in test_sharding.py."""

from __future__ import annotations

import enum
import errno
import io
import json
import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from helpers import REPO, TINY, quiet_env, train_flags
from rankzero.errors import RankzeroError
from rankzero.train.checkpoints.full_disk import checkpoint_size_text
from rankzero.train.checkpoints.resume import resolve_resume
from rankzero.train.checkpoints.verify import verify_checkpoint


def fsdp_checkpoint(directory: Path, **config_changes) -> Path:
    """checkpoint-2 of a run of the tiny model (seed 0) in FSDP's layout: DCP folders for the weights and
    AdamW's state, config.json, trainer_state.json."""
    import torch.distributed.checkpoint as dcp
    from transformers import AutoModelForCausalLM, TrainerState

    from rankzero.train.model import load_config

    config = load_config(TINY)
    for key, value in config_changes.items():
        setattr(config, key, value)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    optimizer = torch.optim.AdamW(model.parameters())
    model(input_ids=torch.arange(1, 9)[None], labels=torch.arange(1, 9)[None]).loss.backward()
    optimizer.step()
    directory.mkdir(parents=True)
    with warnings.catch_warnings():  # "assuming the intent is to save in a single process": it is
        warnings.simplefilter("ignore")
        dcp.save({"model": model.state_dict()}, checkpoint_id=directory / "pytorch_model_fsdp_0", no_dist=True)
        dcp.save({"optimizer": optimizer.state_dict()}, checkpoint_id=directory / "optimizer_0", no_dist=True)
    model.config.save_pretrained(directory)
    TrainerState(global_step=2, max_steps=4).save_to_json(str(directory / "trainer_state.json"))
    return directory


def error_line(result: subprocess.CompletedProcess, code: int) -> str:
    """The one `error:` line of a run that exited with `code`, without a traceback (argparse's starts with the
    script's name, after its usage line)."""
    assert result.returncode == code and "Traceback" not in result.stderr, result.stderr[-3000:]
    [line] = [line for line in result.stderr.splitlines() if line.startswith("error:") or ": error: " in line]
    return line[line.index("error:"):]


def export(checkpoint: Path, output_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "scripts" / "export_checkpoint.py"), str(checkpoint),
                           str(output_dir)], capture_output=True, text=True, timeout=300, env=quiet_env(), cwd=REPO)


# ------------------------------------------------------------------ a planted .metadata


class RunsCode:
    """A pickle that, loaded with plain pickle.load, creates `marker` (any code could stand there)."""

    def __init__(self, call, marker: Path):
        self.call, self.marker = call, marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",)) if self.call == "os.system" else (Path.touch, (self.marker,))


@pytest.mark.parametrize("call", ["os.system", "pathlib.Path.touch"])
def test_a_planted_metadata_runs_nothing_and_is_called_damaged(tmp_path, call):
    """A .metadata whose unpickling would create a file: verifying the checkpoint (resume by name and `auto`)
    and exporting it create nothing; the checkpoint is damaged, named by its file. Path.touch: a class DCP's
    metadata does hold (pathlib.Path) does not open its methods."""
    run_dir = tmp_path / "run"
    genuine = fsdp_checkpoint(run_dir / "checkpoint-2")
    assert verify_checkpoint(genuine) == []
    marker = tmp_path / "code-ran"
    (genuine / "optimizer_0" / ".metadata").write_bytes(pickle.dumps(RunsCode(call, marker)))

    problems = verify_checkpoint(genuine)
    assert not marker.exists()
    assert problems == [f"optimizer_0/.metadata does not load: it asks for {'posix.system' if call == 'os.system' else 'pathlib.Path.touch'}, "
                        "which DCP metadata never holds (not loaded: damaged, or planted to run code)"], problems
    with pytest.raises(RankzeroError, match=r"checkpoint-2 is damaged: optimizer_0/\.metadata does not load"):
        resolve_resume(str(genuine), str(run_dir))
    with pytest.raises(RankzeroError, match="every checkpoint in .* is damaged"):
        resolve_resume("auto", str(run_dir))
    line = error_line(export(genuine, tmp_path / "exported"), 2)
    assert "cannot be exported: optimizer_0/.metadata does not load: it asks for" in line
    assert not marker.exists() and not (tmp_path / "exported").exists()


class _Getattr:
    """Pickled as getattr(cls, name); callable, as pickle wants of what a pickle calls."""

    def __init__(self, cls, name: str):
        self.cls, self.name = cls, name

    def __call__(self, *args):
        raise AssertionError("only pickled")

    def __reduce__(self):
        return getattr, (self.cls, self.name)


class _CallThroughGetattr:
    """Loaded with plain pickle.load: getattr(cls, name)(marker)."""

    def __init__(self, cls, name: str, marker: Path):
        self.cls, self.name, self.marker = cls, name, marker

    def __reduce__(self):
        return _Getattr(self.cls, self.name), (self.marker,)


class _EnumsByName(pickle.Pickler):
    """Pickles as Python 3.11.2 (Debian 12's) does: an enum member as getattr(its class, its name)."""

    def reducer_override(self, obj):
        if isinstance(obj, enum.Enum):
            return getattr, (type(obj), obj.name)
        return NotImplemented


def test_metadata_with_enums_pickled_by_name_loads_and_getattr_reaches_nothing_else(tmp_path):
    """Python 3.11.2 writes DCP's memory-format enum as getattr(_MEM_FORMAT_ENCODING, name): such a checkpoint is
    intact (every FSDP checkpoint saved there was refused as planted). getattr on anything else is still refused."""
    from torch.distributed.checkpoint.metadata import _MEM_FORMAT_ENCODING, TensorStorageMetadata

    from rankzero.train.checkpoints.sharded import read_dcp_metadata

    checkpoint = fsdp_checkpoint(tmp_path / "checkpoint-2")
    for folder in ("pytorch_model_fsdp_0", "optimizer_0"):
        saved = read_dcp_metadata(checkpoint / folder)
        by_name = io.BytesIO()
        _EnumsByName(by_name).dump(saved)
        assert b"getattr" in by_name.getvalue()
        (checkpoint / folder / ".metadata").write_bytes(by_name.getvalue())
        assert read_dcp_metadata(checkpoint / folder) == saved
    assert verify_checkpoint(checkpoint) == []

    marker = tmp_path / "code-ran"
    metadata = checkpoint / "optimizer_0" / ".metadata"
    pickle.loads(pickle.dumps(_CallThroughGetattr(Path, "touch", marker)))
    assert marker.exists()  # plain pickle runs it
    marker.unlink()
    for cls, name in [(Path, "touch"), (TensorStorageMetadata, "__init__"), (_MEM_FORMAT_ENCODING, "__new__")]:
        metadata.write_bytes(pickle.dumps(_CallThroughGetattr(cls, name, marker)))
        assert verify_checkpoint(checkpoint) == [
            f"optimizer_0/.metadata does not load: it asks for getattr({cls.__name__}, {name!r}), which DCP metadata "
            "never holds (not loaded: damaged, or planted to run code)"]
        assert not marker.exists()


def test_a_metadata_of_the_wrong_kind_is_damaged_and_a_cut_one_cut_short(tmp_path):
    checkpoint = fsdp_checkpoint(tmp_path / "checkpoint-2")
    metadata = checkpoint / "pytorch_model_fsdp_0" / ".metadata"
    whole = metadata.read_bytes()
    metadata.write_bytes(pickle.dumps({"state_dict_metadata": {}}))
    assert verify_checkpoint(checkpoint) == ["pytorch_model_fsdp_0/.metadata does not load: it holds a dict, not "
                                             "DCP's Metadata with its storage table: damaged"]
    metadata.write_bytes(whole[: len(whole) // 2])
    assert verify_checkpoint(checkpoint) == ["pytorch_model_fsdp_0/.metadata does not load: it ends before the "
                                             "pickle does: cut short"]


# ------------------------------------------------------------------ a full disk inside a DCP save


FULL_DISK_RANK = """
import errno, sys
sys.path.insert(0, {repo!r})
import torch.distributed.checkpoint.filesystem as filesystem

def full(*args, **kwargs):  # each shard's write fails as on a full disk; DCP wraps it in its CheckpointException
    raise OSError(errno.ENOSPC, "No space left on device")

filesystem._write_item = full
import train
from rankzero.errors import run_cli
sys.exit(run_cli(train.main))
"""


def test_a_full_disk_inside_a_sharded_save_is_one_line_and_leaves_no_staging(tmp_path, train_corpus, tokenizer_dir):
    """torch's CheckpointException is a BaseException: `except Exception` let it through as a traceback and left
    .checkpoint-staging/checkpoint-2 behind."""
    script = tmp_path / "full_disk_rank.py"
    script.write_text(FULL_DISK_RANK.format(repo=str(REPO)))
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, str(script), *train_flags(
        train_corpus, tokenizer_dir, tmp_path / "cache", out, fsdp="full_shard", max_steps=4, save_strategy="steps",
        save_steps=2)], capture_output=True, text=True, timeout=600, env=quiet_env(), cwd=REPO)
    line = error_line(result, 1)
    assert line.startswith(f"error: --output_dir {out}: no space left on the device while saving checkpoint-2 ("), line
    assert "a checkpoint takes about" in line and "the partial checkpoint was removed" in line
    assert not (out / ".checkpoint-staging").exists() and not (out / "checkpoint-2").exists()


def test_a_checkpoints_size_counts_the_files_in_its_folders(tmp_path):
    """FSDP's shards lie in folders: the size said after a full disk counts them (3.7 MB was said as 0.2 MB)."""
    checkpoint = tmp_path / "checkpoint-2"
    (checkpoint / "pytorch_model_fsdp_0").mkdir(parents=True)
    (checkpoint / "trainer_state.json").write_bytes(b"x" * 200_000)
    (checkpoint / "pytorch_model_fsdp_0" / "__0_0.distcp").write_bytes(b"x" * 3_500_000)
    assert checkpoint_size_text(tmp_path) == "checkpoint-2 takes 3.7 MB"


def test_no_space_is_found_inside_dcps_exception(tmp_path, monkeypatch):
    """The decision itself, on the exception a real DCP save raises: a full disk on a rank, and not another fault."""
    import torch.distributed.checkpoint as dcp
    import torch.distributed.checkpoint.filesystem as filesystem
    from torch.distributed.checkpoint import CheckpointException

    from rankzero.train.checkpoints import full_disk as checkpoints

    monkeypatch.setattr(checkpoints, "disk_full", lambda directory: False)  # this disk has room: the error says it
    for fault, full in ((OSError(errno.ENOSPC, "No space left on device"), True), (KeyError("x"), False)):
        def fail(*args, **kwargs):
            raise fault
        monkeypatch.setattr(filesystem, "_write_item", fail)
        with warnings.catch_warnings(), pytest.raises(CheckpointException) as raised:
            warnings.simplefilter("ignore")
            dcp.save({"w": torch.zeros(3)}, checkpoint_id=tmp_path / type(fault).__name__, no_dist=True)
        assert checkpoints.save_failure(raised.value) and not isinstance(raised.value, Exception)
        assert checkpoints.no_space_left(raised.value, tmp_path) is full
        assert checkpoints.describe_failure(raised.value) == ("OSError: [Errno 28] No space left on device" if full
                                                              else "KeyError: 'x'")


# ------------------------------------------------------------------ another batch on resume


def test_a_resume_with_other_samples_per_step_is_refused_and_the_same_in_another_layout_is_exact(
        tmp_path, train_corpus, tokenizer_dir):
    """Batch 4 per step, checkpoint-2: a resume with --per_device_train_batch_size 2 would skip 2 batches of 2
    (4 samples, not 8) and run another schedule, silently: it is refused, one line saying how to go on. 2 × 2
    accumulation steps take the same 4 samples per step: it resumes, to the uninterrupted run's losses."""
    from helpers import losses, run

    def command(**more):
        return [sys.executable, REPO / "train.py", *train_flags(
            train_corpus, tokenizer_dir, tmp_path / "cache", tmp_path / "run", max_steps=4, save_strategy="steps",
            save_steps=2, logging_steps=1, lr_scheduler_type="constant", **more)]

    run(command())
    uninterrupted = losses(tmp_path / "run")
    checkpoint = tmp_path / "run" / "checkpoint-2"
    record = json.loads((checkpoint / "data_fingerprint.json").read_text())
    assert record["batch"] == {"world_size": 1, "per_device_train_batch_size": 4, "gradient_accumulation_steps": 1}

    refused = run(command(resume_from_checkpoint=checkpoint, per_device_train_batch_size=2), check=False)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr[-3000:]
    [line] = [line for line in refused.stderr.splitlines() if line.startswith("  - ")]
    assert line == (f"  - --resume_from_checkpoint {checkpoint}: saved by 1 process(es) × --per_device_train_batch_size "
                    "4 × --gradient_accumulation_steps 1 = 4 samples per step; this run takes 2 (1 process(es) × "
                    "--per_device_train_batch_size 2 × --gradient_accumulation_steps 1), and the Trainer resumes by "
                    "skipping batches, not samples, so it would continue elsewhere in the data. Resume with 4 samples "
                    f"per step, or start a new run from its weights (--pretrained_model {checkpoint}; an FSDP checkpoint "
                    "exported first with scripts/export_checkpoint.py)")

    run(command(resume_from_checkpoint=checkpoint, per_device_train_batch_size=2, gradient_accumulation_steps=2))
    resumed = losses(tmp_path / "run")
    for step in (3, 4):
        assert resumed[step] == pytest.approx(uninterrupted[step], rel=1e-4), (step, resumed, uninterrupted)


@pytest.mark.parametrize("saved,now,refused", [
    ((2, 4, 1), (1, 4, 1), True), ((1, 4, 1), (2, 4, 1), True), ((2, 4, 1), (1, 4, 2), False),
    ((2, 4, 1), (1, 8, 1), False), ((1, 8, 1), (1, 8, 2), True)])
def test_the_batch_decision_across_world_sizes(tmp_path, saved, now, refused):
    from rankzero.train.checkpoints.records import batch_problem

    def layout(values):
        return dict(zip(("world_size", "per_device_train_batch_size", "gradient_accumulation_steps"), values))

    problem = batch_problem(tmp_path, layout(saved), layout(now))
    assert (problem is not None) is refused, problem
    if refused:
        assert f"= {saved[0] * saved[1] * saved[2]} samples per step; this run takes {now[0] * now[1] * now[2]} (" \
               f"{now[0]} process(es)" in problem


# ------------------------------------------------------------------ exporting FSDP shards


EDITS = [({"num_hidden_layers": 1}, r"pytorch_model_fsdp_0/ holds \d+ tensor\(s\) its model has no place for "
                                    r"\(model\.layers\.1\."),
         ({"num_hidden_layers": 3}, r"pytorch_model_fsdp_0/ holds no model\.layers\.2\."),
         ({"hidden_size": 96}, r"pytorch_model_fsdp_0/ holds tensors of other shapes: "),
         ({"vocab_size": 4096}, r"holds tensors of other shapes: .*model\.embed_tokens\.weight \[2048, 64\] "
                                r"there, \[4096, 64\] in the config's model")]


def test_an_export_with_an_edited_config_is_refused_naming_what_differs(tmp_path):
    """One layer fewer in config.json was exported silently without the last layer; other sizes crashed in
    dcp.load with a traceback. Each edit is one line, exit 2, nothing written; the untouched checkpoint exports."""
    import re

    checkpoint = fsdp_checkpoint(tmp_path / "checkpoint-2")
    config = json.loads((checkpoint / "config.json").read_text())
    for edit, expected in EDITS:
        (checkpoint / "config.json").write_text(json.dumps({**config, **edit}))
        line = error_line(export(checkpoint, tmp_path / "exported"), 2)
        assert re.search(expected, line) and "config.json is not the config of this checkpoint's model" in line, \
            (edit, line)
        assert not (tmp_path / "exported").exists(), edit
    (checkpoint / "config.json").write_text(json.dumps(config))
    assert export(checkpoint, tmp_path / "exported").returncode == 0
    assert (tmp_path / "exported" / "model.safetensors").is_file()


def test_continuing_from_an_fsdp_checkpoint_says_how(tmp_path, tokenizer_dir, train_corpus):
    """`./pretrain_cont.sh RUN/checkpoint-N` passes the checkpoint as --pretrained_model, which from_pretrained
    cannot read from DCP shards (a traceback after the prepare): an argument error pointing to RESUME=1 and to the
    export, and no -cont dir made."""
    checkpoint = fsdp_checkpoint(tmp_path / "run" / "checkpoint-2")
    result = subprocess.run([str(REPO / "pretrain_cont.sh"), str(checkpoint), "--dataset", str(train_corpus),
                             "--tokenizer_path", str(tokenizer_dir)], capture_output=True, text=True, timeout=300,
                            env=quiet_env(), cwd=REPO)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert "error: invalid arguments:" in result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.startswith("  - ")]
    assert line == (f"  - --pretrained_model {checkpoint}: an FSDP checkpoint (the weights are DCP shards in "
                    "pytorch_model_fsdp_0/, no model.safetensors). To go on with its run exactly: RESUME=1 "
                    f"./pretrain_cont.sh {checkpoint}; to start a new run from its weights, export them first: python "
                    f"scripts/export_checkpoint.py {checkpoint} {tmp_path / 'run'}-export, then --pretrained_model "
                    f"{tmp_path / 'run'}-export")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["checkpoint-2"]
