"""Sharded training under real processes: FSDP2 on CPU over gloo (real DTensor shards, DDP's losses, tokens/s
and MFU of the whole model, rank 0's weights in every shard), its DCP checkpoints (SIGTERM, verified, exact
resume, exported), the 8B recipe on the tiny model through pretrain.sh and pretrain_cont.sh. DeepSpeed:
test_deepspeed.py."""

from __future__ import annotations

import json
import shutil
import signal
import sys

import pytest
import torch

from helpers import REPO, TINY, free_port, log_history, losses, quiet_env, run
from helpers import train_flags as run_flags
from rankzero.args import parse_args
from rankzero.errors import ConfigError


def train_flags(tokenizer_dir, tmp_path, *more):
    return ["--dataset", "x.jsonl", "--tokenizer_path", str(tokenizer_dir), "--model_config", str(TINY),
            "--output_dir", str(tmp_path / "run"), *more]


def test_fsdp_flags_are_checked_with_the_arguments(tokenizer_dir, tmp_path):
    """`--fsdp full_shard` is read into fsdp_config without transformers' deprecation warning; FSDP1 and an
    unreadable --fsdp_config are argument errors naming the flag."""
    args = parse_args(train_flags(tokenizer_dir, tmp_path, "--fsdp", "full_shard"))
    assert args.training.fsdp is True and args.training.fsdp_config["reshard_after_forward"] is True
    with pytest.raises(ConfigError) as error:
        parse_args(train_flags(tokenizer_dir, tmp_path, "--fsdp", "full_shard", "--fsdp_config", '{"version": 1}'))
    assert error.value.problems == ["--fsdp_config version 1: rankzero shards with FSDP2 only (FSDP1 is deprecated "
                                    "in transformers and does not run on CPU); drop the key or set it to 2"]
    with pytest.raises(ConfigError, match=r"--fsdp_config .*missing\.json: \[Errno 2\] No such file"):
        parse_args(train_flags(tokenizer_dir, tmp_path, "--fsdp", "full_shard", "--fsdp_config",
                               str(tmp_path / "missing.json")))


def test_fsdp_offload_on_cpu_is_an_argument_error(tokenizer_dir, tmp_path):
    """`--fsdp "full_shard offload"` on CPU crashed inside fully_shard (pinned memory needs an accelerator)."""
    with pytest.raises(ConfigError) as error:
        parse_args(train_flags(tokenizer_dir, tmp_path, "--fsdp", "full_shard offload", "--use_cpu", "true"))
    assert error.value.problems == ["--fsdp offload (fsdp_config cpu_offload): keeps each shard in pinned host memory "
                                    "between uses of a GPU; this run is on the CPU, where the shards are in host "
                                    "memory already: drop 'offload'"]


# A rank of train.py that also records, at its first step, what each parameter of the model it trains is.
RECORDING_RANK = """
import json, os, sys
sys.path.insert(0, {repo!r})
import train
from rankzero.train.trainer import RankzeroTrainer

step = RankzeroTrainer.training_step

def recording_step(self, model, inputs, num_items_in_batch=None):
    if self.state.global_step == 0 and not hasattr(self, "recorded"):
        from torch.distributed.tensor import DTensor
        self.recorded = {{name: {{"dtensor": isinstance(p, DTensor), "local": p.to_local().numel()
                                 if isinstance(p, DTensor) else p.numel(), "global": p.numel()}}
                         for name, p in model.named_parameters()}}
        with open(os.path.join({out!r}, f"parameters-{{os.environ['RANK']}}.json"), "w") as handle:
            json.dump(self.recorded, handle)
        # MFU needs a peak, known on CUDA only: a made-up one, so that the CPU run logs it too.
        from rankzero.train.throughput import flops_per_token
        self.meter.peak = 1e9
        with open(os.path.join({out!r}, f"flops-{{os.environ['RANK']}}.json"), "w") as handle:
            json.dump({{"meter": self.meter.flops_per_token, "sharded_model": flops_per_token(model, 64)}}, handle)
    return step(self, model, inputs, num_items_in_batch)

save = RankzeroTrainer.save_model

def recording_save(self, output_dir=None, _internal_call=False):
    save(self, output_dir, _internal_call)
    if not _internal_call:  # the finished model: the sharded model's logits on fixed ids, every rank computing
        import torch
        self.model.eval()
        with torch.no_grad():
            logits = self.model(input_ids=torch.arange(1, 33).unsqueeze(0)).logits
        if os.environ["RANK"] == "0":
            torch.save(logits, os.path.join({out!r}, "trained-logits.pt"))

RankzeroTrainer.training_step = recording_step
RankzeroTrainer.save_model = recording_save
sys.exit(train.main(sys.argv[1:]))
"""


def torchrun(script, flags, processes=2):
    return run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", processes, "--master_port",
                free_port(), script, *flags], timeout=600)


def test_fsdp_shards_every_parameter_and_matches_ddp(tmp_path, train_corpus, tokenizer_dir):
    """--fsdp full_shard on CPU, 2 gloo processes: each rank holds half of every parameter (DTensor shards), the
    log says FSDP, and the fp32 losses are DDP's over 20 steps (rank 1 built without weights, filled from rank 0's),
    also with --gradient_checkpointing; the finished run and its last checkpoint load as the trained model."""
    common = dict(max_steps=20, logging_steps=1, seed=3, save_strategy="steps", save_steps=20)
    ddp = tmp_path / "ddp"
    run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", 2, "--master_port", free_port(),
         REPO / "train.py", *run_flags(train_corpus, tokenizer_dir, tmp_path / "cache", ddp, **common)], timeout=600)
    sharded = tmp_path / "fsdp"
    sharded.mkdir()
    script = tmp_path / "recording_rank.py"
    script.write_text(RECORDING_RANK.format(repo=str(REPO), out=str(sharded)))
    result = torchrun(script, run_flags(train_corpus, tokenizer_dir, tmp_path / "cache", sharded, fsdp="full_shard",
                                        **common))
    assert "data_parallel = FSDP2 full_shard over 2 process(es), one unit per LlamaDecoderLayer" in result.stdout
    assert "data_parallel = DDP" not in result.stdout
    for rank in (0, 1):
        parameters = json.loads((sharded / f"parameters-{rank}.json").read_text())
        assert parameters and all(p["dtensor"] for p in parameters.values())
        assert sum(p["local"] for p in parameters.values()) * 2 == sum(p["global"] for p in parameters.values())
        assert all(p["local"] == -(-p["global"] // 2) or p["local"] == p["global"] // 2 for p in parameters.values())
    # tokens/s and MFU count the whole model and every rank, not one rank's shards.
    from transformers import AutoConfig, AutoModelForCausalLM

    from rankzero.train.throughput import flops_per_token

    whole = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(sharded))
    for rank in (0, 1):
        flops = json.loads((sharded / f"flops-{rank}.json").read_text())
        assert flops["meter"] == flops["sharded_model"] == flops_per_token(whole, 64)
    logged = [entry for entry in log_history(sharded) if "mfu" in entry]
    assert logged
    for entry in logged:
        assert entry["tokens_per_second"] == pytest.approx(2 * entry["tokens_per_second_per_device"], rel=1e-3)
        assert entry["mfu"] == pytest.approx(entry["tokens_per_second_per_device"] * flops_per_token(whole, 64) / 1e9,
                                             rel=1e-3)
    seen = [max(entry.get("tokens_seen", 0) for entry in log_history(out)) for out in (ddp, sharded)]
    assert seen[0] == seen[1] > 20 * 64  # the same tokens as DDP's, every rank's

    expected, got = losses(ddp), losses(sharded)
    assert sorted(got) == list(range(1, 21)) and sorted(expected) == sorted(got)
    for step in expected:
        assert got[step] == pytest.approx(expected[step], rel=1e-4), (step, got[step], expected[step])

    # Activation checkpointing (each decoder layer recomputed inside its FSDP unit): the same losses.
    recomputed = tmp_path / "recomputed"
    result = run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", 2, "--master_port", free_port(),
                  REPO / "train.py", *run_flags(train_corpus, tokenizer_dir, tmp_path / "cache", recomputed,
                                                fsdp="full_shard", gradient_checkpointing="true", max_steps=20,
                                                logging_steps=1, seed=3)], timeout=600)
    assert "activations recomputed per unit" in result.stdout
    for step, loss in losses(recomputed).items():
        assert loss == pytest.approx(expected[step], rel=1e-4), (step, loss, expected[step])

    # The finished run is one plain HF dir: weights once (the tied embedding under one name), the trained logits.
    from safetensors import safe_open

    with safe_open(sharded / "model.safetensors", "pt") as weights:
        names = set(weights.keys())
    assert "model.embed_tokens.weight" in names and "lm_head.weight" not in names
    model = AutoModelForCausalLM.from_pretrained(sharded).eval()
    assert model.lm_head.weight is model.model.embed_tokens.weight
    with torch.no_grad():
        logits = model(input_ids=torch.arange(1, 33).unsqueeze(0)).logits
    torch.testing.assert_close(logits, torch.load(sharded / "trained-logits.pt"), rtol=0, atol=1e-5)

    # The last checkpoint (DCP shards, one file per rank) exported by the script: the same model.
    assert {"__0_0.distcp", "__1_0.distcp"} <= {p.name for p in (sharded / "checkpoint-20" / "pytorch_model_fsdp_0").iterdir()}
    assert not (sharded / "checkpoint-20" / "model.safetensors").exists()
    run([sys.executable, REPO / "scripts" / "export_checkpoint.py", sharded / "checkpoint-20", tmp_path / "exported"])
    exported = AutoModelForCausalLM.from_pretrained(tmp_path / "exported").eval()
    assert exported.lm_head.weight is exported.model.embed_tokens.weight
    with torch.no_grad():
        torch.testing.assert_close(exported(input_ids=torch.arange(1, 33).unsqueeze(0)).logits, logits, rtol=0, atol=0)


def test_sigterm_under_fsdp_saves_shards_that_verify_and_resume_exactly(tmp_path, train_corpus, tokenizer_dir):
    """SIGTERM to torchrun mid-run under FSDP: one checkpoint of DCP shards (each rank its own file), verified
    intact; `--resume_from_checkpoint auto` from it gives the uninterrupted run's losses. A shard cut short or a
    missing .metadata is found, and auto falls back past it."""
    from test_train_preemption import finish, read_until, start

    from rankzero.train.checkpoints.runs import checkpoints_in
    from rankzero.train.checkpoints.verify import newest_intact_checkpoint, verify_checkpoint

    steps, cache = 20, tmp_path / "cache"
    common = dict(max_steps=steps, logging_steps=1, lr_scheduler_type="constant", fsdp="full_shard")
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", 2]
    whole = tmp_path / "whole"
    run([*launcher, "--master_port", free_port(), REPO / "train.py",
         *run_flags(train_corpus, tokenizer_dir, cache, whole, **common)], timeout=600)

    out = tmp_path / "preempted"
    job = start([*launcher, "--master_port", free_port(), REPO / "train.py",
                 *run_flags(train_corpus, tokenizer_dir, cache, out, **common)])
    printed = read_until(job, f"step 5/{steps}")
    job.send_signal(signal.SIGTERM)
    printed += finish(job, timeout=120)
    checkpoints = [p for p in out.iterdir() if p.name.startswith("checkpoint-")]
    assert len(checkpoints) == 1, printed[-3000:]
    checkpoint = checkpoints[0]
    stopped = int(checkpoint.name.split("-")[1])
    assert 5 <= stopped < steps and not (out / "model.safetensors").exists()
    for folder in ("pytorch_model_fsdp_0", "optimizer_0"):
        assert {p.name for p in (checkpoint / folder).iterdir()} == {".metadata", "__0_0.distcp", "__1_0.distcp"}
    assert verify_checkpoint(checkpoint) == []

    result = run([*launcher, "--master_port", free_port(), REPO / "train.py",
                  *run_flags(train_corpus, tokenizer_dir, cache, out, resume_from_checkpoint="auto", **common)],
                 timeout=600)
    assert f"step {stopped + 1}/{steps}" in result.stdout and f"step {stopped}/{steps} " not in result.stdout
    assert "damaged" not in result.stderr  # no false alarm on the intact shards
    expected, got = losses(whole), losses(out)
    for step in range(stopped + 1, steps + 1):
        assert got[step] == pytest.approx(expected[step], rel=1e-4), (step, got[step], expected[step])

    # Damage: a shard cut short, then a checkpoint without its .metadata (the save's last write).
    cut = tmp_path / "damaged" / f"checkpoint-{stopped + 1}"
    shutil.copytree(checkpoint, cut)
    shard = cut / "optimizer_0" / "__1_0.distcp"
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    assert [p for p in verify_checkpoint(cut) if "optimizer_0/__1_0.distcp" in p and "cut short" in p]
    unfinished = tmp_path / "damaged" / f"checkpoint-{stopped + 2}"
    shutil.copytree(checkpoint, unfinished)
    (unfinished / "pytorch_model_fsdp_0" / ".metadata").unlink()
    assert [p for p in verify_checkpoint(unfinished) if "pytorch_model_fsdp_0/.metadata is missing" in p]
    shutil.copytree(checkpoint, tmp_path / "damaged" / checkpoint.name)
    chosen, skipped = newest_intact_checkpoint(checkpoints_in(tmp_path / "damaged"))
    assert chosen.name == checkpoint.name and [p.name for p, _ in skipped] == [unfinished.name, cut.name]


def test_the_8b_recipe_on_the_tiny_model_then_pretrain_cont(tmp_path, train_corpus, tokenizer_dir):
    """configs/recipes/8b-cont-fsdp.yaml as shipped, the tiny model in place of the 8B one, 2 ranks through
    pretrain.sh: FSDP2 full_shard with bf16 compute and fp32 reduction, selective recompute, DCP checkpoints, an HF
    dir at the end. pretrain_cont.sh then resumes it exactly (RESUME=1) and continues from it."""
    recipe = REPO / "configs" / "recipes" / "8b-cont-fsdp.yaml"
    out = tmp_path / "run"
    # bf16 is the recipe's on a GPU (rankzero's default there); on CPU it has to be asked for.
    overrides = run_flags(train_corpus, tokenizer_dir, tmp_path / "cache", out, max_steps=4, save_steps=2,
                          logging_steps=1, quality_filter="none", gradient_accumulation_steps=1, warmup_steps=0,
                          save_strategy="steps", bf16="true", use_cpu="true")
    result = run([REPO / "pretrain.sh", recipe, *overrides], env=quiet_env(NGPU=2), timeout=600)
    assert ("data_parallel = FSDP2 full_shard over 2 process(es), one unit per LlamaDecoderLayer; parameters "
            "bfloat16 for compute over fp32 shards, gradients reduced in float32; SHARDED_STATE_DICT checkpoints"
            ) in result.stdout
    assert "model.activation_checkpointing = 'selective'" in result.stdout
    assert {p.name for p in (out / "checkpoint-2" / "pytorch_model_fsdp_0").iterdir()} >= {"__0_0.distcp",
                                                                                          "__1_0.distcp"}
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(out)
    assert next(model.parameters()).dtype == torch.float32  # fp32 master weights, whatever the compute dtype
    uninterrupted = losses(out)

    result = run([REPO / "pretrain_cont.sh", out / "checkpoint-2"], env=quiet_env(NGPU=2, RESUME=1), timeout=600)
    assert "step 3/4" in result.stdout and "step 2/4 " not in result.stdout
    assert losses(out)[4] == pytest.approx(uninterrupted[4], rel=1e-4)

    result = run([REPO / "pretrain_cont.sh", out, "--max_steps", 3], env=quiet_env(NGPU=2), timeout=600)
    continued = [p for p in tmp_path.iterdir() if p.name.startswith("run-cont-")]
    assert len(continued) == 1 and set(losses(continued[0])) == {1, 2, 3}, result.stdout[-2000:]
    assert "data_parallel = FSDP2 full_shard over 2 process(es)" in result.stdout
    assert (continued[0] / "model.safetensors").is_file()
