"""DeepSpeed through the HF Trainer: the ZeRO-2/3 arguments build before any process group exists, ZeRO-2 and
ZeRO-3 train on CPU over gloo (2 real processes) to DDP's losses and leave a dir that from_pretrained loads, ZeRO-3
extends a checkpoint's vocabulary as DDP does; a JSON that does not parse, or `--deepspeed` without the package, is
one line. The DeepSpeed tests run wherever deepspeed is importable (`pip install deepspeed`: not in CI, whose
budget its first-use compile does not fit; bench/RESULTS.md, "DeepSpeed")."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers import REPO, TINY, free_port, losses, quiet_env, run
from helpers import train_flags as run_flags
from test_vocabulary import extended_dir  # noqa: F401 (a fixture)
from rankzero.args import parse_args
from rankzero.errors import ConfigError

SPEC = importlib.util.find_spec("deepspeed")
DEEPSPEED = SPEC is not None


def zero_config(tmp_path, stage: int, **more):
    path = tmp_path / f"ds_zero{stage}.json"
    path.write_text(json.dumps({"zero_optimization": {"stage": stage}, "train_micro_batch_size_per_gpu": "auto",
                                "train_batch_size": "auto", "gradient_accumulation_steps": "auto",
                                "bf16": {"enabled": "auto"}, **more}))
    return path


def train_flags(tokenizer_dir, tmp_path, *more):
    return ["--dataset", "x.jsonl", "--tokenizer_path", str(tokenizer_dir), "--model_config", str(TINY),
            "--output_dir", str(tmp_path / "run"), *more]


def deepspeed_env() -> dict:
    """The ranks import deepspeed from where this process does (a venv's site-packages or a side directory)."""
    where = Path(SPEC.origin).parents[1]
    return quiet_env(PYTHONPATH=os.pathsep.join([str(REPO), str(where)]))


def train_two_ranks(corpus, tokenizer_dir, cache, out, **flags) -> str:
    """`torchrun --nproc_per_node 2 train.py` from --pretrained_model (its config, not the tiny one); the output."""
    argv = run_flags(corpus, tokenizer_dir, cache, out, **flags)
    at = argv.index("--model_config")
    del argv[at:at + 2]
    result = run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", 2, "--master_port", free_port(),
                  REPO / "train.py", *argv], timeout=600, env=deepspeed_env())
    return result.stdout + result.stderr


@pytest.mark.skipif(not DEEPSPEED, reason="deepspeed is not installed")
@pytest.mark.parametrize("stage", [2, 3])
def test_zero_arguments_build_under_a_launcher(tokenizer_dir, tmp_path, monkeypatch, stage):
    """transformers fills the JSON's "auto" values in TrainingArguments.__post_init__, reading world_size before
    any process group exists: it comes from the launcher's environment."""
    monkeypatch.setenv("WORLD_SIZE", "4")
    args = parse_args(train_flags(tokenizer_dir, tmp_path, "--deepspeed", str(zero_config(tmp_path, stage)),
                                  "--per_device_train_batch_size", "3", "--gradient_accumulation_steps", "2"))
    config = args.training.hf_deepspeed_config.config
    assert config["zero_optimization"]["stage"] == stage
    assert (config["train_micro_batch_size_per_gpu"], config["train_batch_size"]) == (3, 4 * 3 * 2)
    assert not torch.distributed.is_initialized()


@pytest.mark.skipif(not DEEPSPEED, reason="deepspeed is not installed")
def test_a_zero_json_that_does_not_parse_is_one_line_naming_it(tokenizer_dir, tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"zero_optimization": {"stage": 2},\n}')
    with pytest.raises(ConfigError) as error:
        parse_args(train_flags(tokenizer_dir, tmp_path, f"--deepspeed={broken}"))
    assert error.value.problems == [f"--deepspeed {broken}: not valid JSON (Expecting property name enclosed in "
                                    "double quotes: line 2 column 1 (char 36))"]


@pytest.mark.skipif(not DEEPSPEED, reason="deepspeed is not installed")
def test_zero2_and_zero3_train_to_ddps_losses_on_cpu(tmp_path, train_corpus, tokenizer_dir):
    """2 gloo processes from the same weights, fp32, 10 steps: ZeRO-2 and ZeRO-3 log DDP's losses, each rank saves
    its own optimizer partition, the finished dir loads with from_pretrained as DDP's trained model, and a resume
    from the step-5 checkpoint gives the uninterrupted run's losses.

    Tolerance 1e-5 relative (measured here: ZeRO-2 bit-identical, ZeRO-3 within 8e-8). In fp32 the three differ
    only in how gradients are summed (DDP's all-reduce buckets, ZeRO's reduce-scatter of flat partitions) and in
    AdamW running over flat partitions instead of per tensor, the same arithmetic element by element: rounding,
    ~1e-7, carried through 10 steps; another CPU may round differently, hence a margin of 100x."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rankzero.config import ModelConfig
    from rankzero.train.model import build_model

    torch.manual_seed(0)
    base = tmp_path / "base"  # ZeRO-3 initialises weights inside zero.Init, drawing randoms in another order
    model, _ = build_model(ModelConfig(model_config=str(TINY)), AutoTokenizer.from_pretrained(tokenizer_dir), None,
                           "sdpa")
    model.save_pretrained(base)
    common = dict(pretrained_model=base, max_steps=10, logging_steps=1, seed=3, save_strategy="steps", save_steps=5)
    outputs, printed, zero = {}, {}, {stage: {"deepspeed": zero_config(tmp_path, stage)} for stage in (2, 3)}
    for name, more in [("ddp", {}), ("zero2", zero[2]), ("zero3", zero[3])]:
        outputs[name] = tmp_path / name
        printed[name] = train_two_ranks(train_corpus, tokenizer_dir, tmp_path / "cache", outputs[name], **common,
                                        **more)
    assert "data_parallel = DDP over 2 process(es)" in printed["ddp"]
    for stage in (2, 3):
        assert f"data_parallel = DeepSpeed ZeRO-{stage} over 2 process(es)" in printed[f"zero{stage}"]
        assert "Traceback" not in printed[f"zero{stage}"] and "is deprecated" not in printed[f"zero{stage}"]
    assert "stage3_gather_16bit_weights_on_model_save True" in printed["zero3"]  # printed as a default

    expected = losses(outputs["ddp"])
    assert sorted(expected) == list(range(1, 11)) and expected[10] < expected[1]
    with torch.no_grad():
        ids = torch.arange(1, 33).unsqueeze(0)
        reference = AutoModelForCausalLM.from_pretrained(outputs["ddp"]).eval()(input_ids=ids).logits
        for stage in (2, 3):
            out = outputs[f"zero{stage}"]
            got = losses(out)
            assert sorted(got) == sorted(expected)
            for step in expected:
                assert got[step] == pytest.approx(expected[step], rel=1e-5), (stage, step, got[step], expected[step])
            # ZeRO partitions the optimizer state: each rank writes its own part of the checkpoint.
            partitions = sorted(p.name for p in (out / "checkpoint-10" / "global_step10").glob("*optim_states.pt"))
            assert partitions == [f"zero_pp_rank_{rank}_mp_rank_00_optim_states.pt" for rank in (0, 1)], partitions
            trained = AutoModelForCausalLM.from_pretrained(out).eval()
            assert {p.dtype for p in trained.parameters()} == {torch.float32}
            torch.testing.assert_close(trained(input_ids=ids).logits, reference, rtol=1e-4, atol=1e-4)

    # Exact resume from DeepSpeed's checkpoint at step 5 (`auto` finds it once the newer one is gone).
    for stage in (2, 3):
        out = outputs[f"zero{stage}"]
        uninterrupted = losses(out)
        shutil.rmtree(out / "checkpoint-10")
        log = train_two_ranks(train_corpus, tokenizer_dir, tmp_path / "cache", out, resume_from_checkpoint="auto",
                              **common, **zero[stage])
        assert "resumed at step 5: 5 steps" in log and "step 5/10 " not in log  # not a new run
        resumed = losses(out)
        for step in range(6, 11):
            assert resumed[step] == pytest.approx(uninterrupted[step], rel=1e-6), (stage, step)


@pytest.mark.skipif(not DEEPSPEED, reason="deepspeed is not installed")
def test_zero3_extends_a_vocabulary_into_the_checkpoints_padding_rows(tmp_path, train_corpus, extended_dir,
                                                                      tokenizer_dir):
    """ZeRO-3 builds the checkpoint's embedding partitioned (zero.Init); 300 new tokens that fit its padding rows
    are written into the gathered rows (before: an overflow traceback): the same sub-word init, so DDP's losses."""
    import test_vocabulary

    base = test_vocabulary.save_checkpoint(tmp_path / "base", tokenizer_dir)
    rows = 1344  # 1,000 old tokens + 300 new ones fit: no resize, the embedding stays the one zero.Init built
    model = test_vocabulary.load(base)
    model.resize_token_embeddings(rows)
    model.save_pretrained(base)
    printed = {}
    for name, more in [("ddp", {}), ("zero3", {"deepspeed": zero_config(tmp_path, 3)})]:
        printed[name] = train_two_ranks(train_corpus, extended_dir, tmp_path / "cache", tmp_path / name,
                                        pretrained_model=base, max_steps=3, logging_steps=1, seed=3, **more)
        assert "300 start, in the input and output embeddings, as the mean of their old pieces' rows" in printed[name]
    assert "data_parallel = DeepSpeed ZeRO-3 over 2 process(es)" in printed["zero3"]
    expected, got = losses(tmp_path / "ddp"), losses(tmp_path / "zero3")
    assert sorted(got) == sorted(expected) == [1, 2, 3]
    for step in expected:
        assert got[step] == pytest.approx(expected[step], rel=1e-5), (step, got[step], expected[step])


@pytest.mark.skipif(DEEPSPEED, reason="deepspeed is installed: the arguments build")
def test_deepspeed_without_the_package_is_one_line(tokenizer_dir, tmp_path):
    with pytest.raises(ConfigError) as error:
        parse_args(train_flags(tokenizer_dir, tmp_path, "--deepspeed", str(zero_config(tmp_path, 2))))
    assert error.value.problems == ["--deepspeed: the deepspeed package is not installed here (pip install "
                                    "deepspeed), or shard with --fsdp full_shard instead"]
    result = subprocess.run([sys.executable, REPO / "train.py",
                             *train_flags(tokenizer_dir, tmp_path, "--deepspeed", str(zero_config(tmp_path, 2)))],
                            capture_output=True, text=True, env=quiet_env(), timeout=300)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--deepspeed: the deepspeed package is not installed here" in result.stderr


@pytest.mark.parametrize("fsdp", [["--fsdp", "full_shard"], ["--fsdp", "full_shard auto_wrap"], ["--fsdp"]])
def test_fsdp_with_deepspeed_is_refused_at_parse_time(tokenizer_dir, tmp_path, fsdp):
    """Installed or not, deepspeed beside --fsdp is a choice to make, said before the data is prepared (the Trainer
    stopped only after it, with a line about something else)."""
    config = zero_config(tmp_path, 2)
    given = "--fsdp" if len(fsdp) == 1 else f"--fsdp {fsdp[1]}"
    problem = (f"{given} with --deepspeed {config}: two ways of sharding the same model; give one of them (--fsdp "
               "full_shard: FSDP2, or --deepspeed: ZeRO)")
    with pytest.raises(ConfigError) as error:
        parse_args(train_flags(tokenizer_dir, tmp_path, *fsdp, "--deepspeed", str(config)))
    assert error.value.problems == [problem]
    if len(fsdp) == 1:
        return
    recipe = tmp_path / "sharded.yaml"
    recipe.write_text(f"fsdp: {fsdp[1]}\ndeepspeed: {config}\n")
    result = subprocess.run([sys.executable, REPO / "train.py", recipe, *train_flags(tokenizer_dir, tmp_path)],
                            capture_output=True, text=True, env=quiet_env(), timeout=300)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines() == ["error: invalid arguments:", f"  - {problem}"]
    assert not (tmp_path / "run").exists()
