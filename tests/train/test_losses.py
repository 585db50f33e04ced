"""The chunked loss (rankzero/train/losses.py) against HF's: loss and gradients on packed rows with document
boundaries and on SFT rows with masked prompts, tied and untied heads, every model type it is used for; which
loss `--lm_loss auto` picks and why; whole runs (one process, and FSDP2 over 2 gloo ranks) with the same losses
as `--lm_loss full`; the peak memory of a 128k-vocabulary loss step against the full loss's."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from helpers import REPO, free_port, losses, needs_cxx, run, train_flags
from rankzero.errors import ConfigError
from rankzero.train.collator import BlockCollator
from rankzero.train.losses import (EXACT_MODEL_TYPES, chunk_tokens, lm_loss_problems, resolve_lm_loss,
                                   use_lm_loss)
from rankzero.train.training_args import TrainingArguments

VOCAB = 300
SMALL = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=8, bos_token_id=1, eos_token_id=2, pad_token_id=3)


def tiny_model(model_type: str = "llama", attention: str = "sdpa", **config):
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **{**SMALL, **config}),
                                             attn_implementation=attention)
    return model.train()


def packed_batch() -> dict:
    """Two packed rows of several documents each (the collator's position ids restart, each document's first
    label is -100), the second row's first document an SFT prompt masked out."""
    rng = np.random.default_rng(0)
    rows = []
    for lengths in ([17, 30, 9, 8], [25, 39]):
        ids = rng.integers(4, VOCAB, sum(lengths))
        labels = ids.copy()
        if len(rows) == 1:
            labels[:12] = -100  # the prompt of an SFT sample
        rows.append({"input_ids": ids, "labels": labels, "document_lengths": np.array(lengths)})
    batch = BlockCollator(mask_across_documents=True)(rows)
    batch.pop("num_tokens")
    return batch


def loss_and_gradients(model, batch, **extra):
    model.zero_grad()
    loss = model(**batch, **extra).loss
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("num_items_in_batch", [None, 150])
def test_chunked_loss_and_gradients_equal_hf(tied, num_items_in_batch):
    """Packed rows with document boundaries and SFT-masked labels, split into uneven chunks of 16 tokens: the loss
    and every gradient (the head's, tied to the embedding or not, included) equal HF's within 1e-5, with the
    Trainer's num_items_in_batch (gradient accumulation) and without (the batch's own mean)."""
    full = tiny_model(tie_word_embeddings=tied)
    chunked = copy.deepcopy(full)
    use_lm_loss(chunked, "chunked", chunk=16)
    batch = packed_batch()
    assert int(batch["labels"].ne(-100).sum()) not in (num_items_in_batch, batch["labels"].numel())
    extra = {} if num_items_in_batch is None else {"num_items_in_batch": torch.tensor(num_items_in_batch)}
    expected, expected_grads = loss_and_gradients(full, batch, **extra)
    got, got_grads = loss_and_gradients(chunked, batch, **extra)
    assert got == pytest.approx(expected.item(), abs=1e-5)
    assert (chunked.lm_head.weight is chunked.model.embed_tokens.weight) == tied
    for name, grad in expected_grads.items():
        torch.testing.assert_close(got_grads[name], grad, atol=1e-5, rtol=1e-5, msg=name)


def test_chunked_forward_returns_no_logits_in_training_and_logits_otherwise():
    """A training forward with labels never builds the logits; evaluation and a forward without labels
    (generation, the evaluation scores) get HF's outputs unchanged."""
    full = tiny_model()
    chunked = copy.deepcopy(full)
    use_lm_loss(chunked, "chunked")
    batch = packed_batch()
    assert chunked(**batch).logits is None
    chunked.eval()
    full.eval()
    with torch.no_grad():
        for inputs in (batch, {"input_ids": batch["input_ids"]}):
            expected, got = full(**inputs), chunked(**inputs)
            torch.testing.assert_close(got.logits, expected.logits)
            assert (got.loss is None) == (expected.loss is None) == ("labels" not in inputs)


@needs_cxx
def test_compiled_chunk_loss_is_one_graph_with_hf_gradients():
    """Where compile is on, each chunk's logits and cross-entropy are one compiled graph: no graph break, one graph
    for equal chunks over three steps (no recompile), HF's loss and head gradient."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    full = tiny_model(tie_word_embeddings=False)
    compiled = copy.deepcopy(full)
    use_lm_loss(compiled, "chunked", compile=True, chunk=16)
    batch = {"input_ids": packed_batch()["input_ids"][:, :64], "labels": packed_batch()["labels"][:, :64]}
    for _ in range(3):
        expected, expected_grads = loss_and_gradients(full, batch)
        got, got_grads = loss_and_gradients(compiled, batch)
        assert got == pytest.approx(expected.item(), abs=1e-5)
        torch.testing.assert_close(got_grads["lm_head.weight"], expected_grads["lm_head.weight"], atol=1e-5,
                                   rtol=1e-5)
    assert counters["stats"]["unique_graphs"] == 1 and not counters["graph_break"]


@pytest.mark.parametrize("model_type", EXACT_MODEL_TYPES)
def test_every_model_type_used_chunked_gets_its_own_loss(model_type):
    """Each model type `auto` makes chunked is one whose forward is decoder → head → HF's loss: the same loss
    and head gradient."""
    full = tiny_model(model_type, tie_word_embeddings=False)
    chunked = copy.deepcopy(full)
    assert resolve_lm_loss("auto", chunked, TrainingArguments(output_dir="x"))[1] == "chunked"
    use_lm_loss(chunked, "chunked", chunk=24)
    batch = packed_batch()
    expected, expected_grads = loss_and_gradients(full, batch)
    got, got_grads = loss_and_gradients(chunked, batch)
    assert got == pytest.approx(expected.item(), abs=1e-5)
    torch.testing.assert_close(got_grads["lm_head.weight"], expected_grads["lm_head.weight"], atol=1e-5, rtol=1e-5)


def test_auto_picks_chunked_where_exact_and_explicit_choices_are_checked():
    """On CPU `auto` is chunked for Llama, full (with the reason) for a model that softcaps its logits; an explicit
    choice the model or machine cannot take is an argument error naming the flag."""
    training = TrainingArguments(output_dir="x")
    _, choice, reason = resolve_lm_loss("auto", tiny_model(vocab_size=128_256), training)
    assert (choice, reason) == ("chunked", "'chunked' (the head applied 512 tokens at a time; its logits recomputed "
                                           "in the backward)")
    assert chunk_tokens(128_256) * 128_256 * 4 <= 256 * 2**20 and chunk_tokens(32_000) == 2048
    gemma2 = tiny_model("gemma2", "eager", final_logit_softcapping=30.0)
    _, choice, reason = resolve_lm_loss("auto", gemma2, training)
    assert (choice, reason) == ("full", "'full' (the chunked loss is not exact here: gemma2 scales its logits "
                                        "(final_logit_softcapping=30.0))")
    with pytest.raises(ConfigError) as error:
        resolve_lm_loss("chunked", gemma2, training)
    assert error.value.problems == ["--lm_loss chunked: gemma2 scales its logits (final_logit_softcapping=30.0); "
                                    "use --lm_loss full"]
    assert resolve_lm_loss("full", tiny_model(), training)[1:] == ("full", "'full' (--lm_loss given)")
    smoothing = TrainingArguments(output_dir="x", label_smoothing_factor=0.1)
    assert resolve_lm_loss("auto", tiny_model(), smoothing)[1] == "full"
    assert lm_loss_problems("chunked", smoothing) == [
        "--lm_loss chunked with --label_smoothing_factor 0.1: the Trainer smooths the labels over the full logits; "
        "use --lm_loss full"]
    if not torch.cuda.is_available():
        assert lm_loss_problems("liger", training) == [
            "--lm_loss liger: needs a CUDA GPU, Triton and liger-kernel (pip install 'rankzero[gpu]'); use --lm_loss "
            "chunked (the same loss in torch) or auto"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA machine may run liger")
def test_lm_loss_liger_without_a_gpu_is_a_usage_error(tokenizer_dir, tmp_path):
    """train.py --lm_loss liger here: one error line naming the flag, exit 2, before any data work."""
    result = run([sys.executable, REPO / "train.py", "--dataset", tmp_path / "absent.jsonl", "--tokenizer_path",
                  tokenizer_dir, "--model_config", REPO / "configs" / "model_config_tiny.json", "--output_dir",
                  tmp_path / "run", "--lm_loss", "liger"], check=False)
    assert result.returncode == 2
    assert "--lm_loss liger: needs a CUDA GPU, Triton and liger-kernel" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "run").exists()


def test_training_losses_equal_full_loss(tmp_path, train_corpus, tokenizer_dir):
    """Whole runs of train.py, packed with document masking and 2 steps of gradient accumulation (the Trainer's
    num_items_in_batch): --lm_loss chunked (auto's choice here, printed) logs the losses of --lm_loss full within
    1e-5 over 8 steps."""
    common = dict(max_steps=8, logging_steps=1, seed=5, packing="true", mask_across_documents="true",
                  gradient_accumulation_steps=2, per_device_train_batch_size=2)
    outputs = {}
    for loss in ("full", "auto"):
        out = tmp_path / loss
        result = run([sys.executable, REPO / "train.py", *train_flags(train_corpus, tokenizer_dir, tmp_path / "cache",
                                                                      out, lm_loss=loss, **common)])
        outputs[loss] = losses(out)
    assert "model.lm_loss = 'auto'  (default: 'chunked' (the head applied 65,536 tokens at a time" in result.stdout
    assert sorted(outputs["auto"]) == list(range(1, 9))
    for step, expected in outputs["full"].items():
        assert outputs["auto"][step] == pytest.approx(expected, abs=1e-5), step


# A rank of a 2-process FSDP2 run: accelerate shards a tiny Llama as the Trainer has it (one unit per decoder layer,
# the head in one unit with the final norm, and with the embedding when tied), the chunked loss in chunks of 16
# tokens; two micro-steps' gradients, gathered, against HF's loss on one unsharded copy over both ranks' rows.
FSDP_RANK = """
import copy, json, os, sys
import torch
import torch.distributed as dist
sys.path.insert(0, {repo!r})
from accelerate import Accelerator
from accelerate.utils import FullyShardedDataParallelPlugin
from torch.distributed.tensor import DTensor
from transformers import AutoConfig, AutoModelForCausalLM
from rankzero.train.losses import use_lm_loss
from rankzero.train.sharding import shard_on_cpu

torch.manual_seed(0)
config = AutoConfig.for_model("llama", vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                              num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings={tied})
model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").train()
reference = copy.deepcopy(model)
plugin = FullyShardedDataParallelPlugin(fsdp_version=2, auto_wrap_policy="transformer_based_wrap",
                                        transformer_cls_names_to_wrap=["LlamaDecoderLayer"], reshard_after_forward=True)
accelerator = Accelerator(cpu=True, fsdp_plugin=plugin)
shard_on_cpu(accelerator, plugin)
use_lm_loss(model, "chunked", chunk=16)
model, _ = accelerator.prepare(model, torch.optim.SGD(model.parameters(), lr=0.0))
reduce_scatter, reduce_scatters = dist.reduce_scatter_single, []
dist.reduce_scatter_single = lambda *args, **kwargs: reduce_scatters.append(1) or reduce_scatter(*args, **kwargs)
rank, world = dist.get_rank(), dist.get_world_size()
ids = torch.randint(0, 300, (2, 40), generator=torch.Generator().manual_seed(1 + rank))
labels = ids.clone()
labels[:, :5] = -100
positions = torch.cat([torch.arange(13), torch.arange(27)]).expand(2, -1)  # two packed documents a row
count = labels[:, 1:].ne(-100).sum()
dist.all_reduce(count)  # the Trainer's num_items_in_batch: every rank's label tokens
for _ in range(2):
    (model(input_ids=ids, labels=labels, position_ids=positions, num_items_in_batch=count).loss * world).backward()
gathered = {{name: p.grad.full_tensor() for name, p in model.named_parameters()}}
sharded = all(isinstance(p, DTensor) for p in model.parameters())
rows = [torch.zeros_like(ids) for _ in range(world)], [torch.zeros_like(labels) for _ in range(world)]
dist.all_gather(rows[0], ids)
dist.all_gather(rows[1], labels)
if rank == 0:
    for _ in range(2):
        reference(input_ids=torch.cat(rows[0]), labels=torch.cat(rows[1]), position_ids=positions.repeat(world, 1),
                  num_items_in_batch=count).loss.backward()
    worst = {{name: float((gathered[name] - p.grad).abs().max()) for name, p in reference.named_parameters()}}
    with open({out!r}, "w") as handle:
        json.dump({{"sharded": sharded, "worst": worst, "reduce_scatters": len(reduce_scatters)}}, handle)
dist.destroy_process_group()
"""


@pytest.mark.parametrize("tied", [True, False])
def test_fsdp2_gradients_equal_unsharded_hf_loss(tmp_path, tied):
    """FSDP2 over 2 gloo ranks, the chunked loss computed inside the root forward where accelerate's head unit is
    gathered: every gradient (the head's and, tied, the embedding's) after two micro-steps equals HF's loss on
    the unsharded model within 1e-5, the head's gradient reduce-scattered whole, once a micro-step."""
    script, out = tmp_path / "fsdp_rank.py", tmp_path / "result.json"
    script.write_text(FSDP_RANK.format(repo=str(REPO), tied=tied, out=str(out)))
    run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", 2, "--master_port", free_port(), script],
        timeout=600)
    result = json.loads(out.read_text())
    assert result["sharded"]
    assert ("lm_head.weight" in result["worst"]) == (not tied) and len(result["worst"]) >= 20
    assert max(result["worst"].values()) <= 1e-5, result["worst"]
    # One reduce-scatter per unit and micro-step: 2 decoder layers, the head's unit (with the embedding when tied)
    # and, untied, the embedding's own. None more for the head's chunks.
    assert result["reduce_scatters"] == 2 * (3 if tied else 4)


@pytest.mark.parametrize("sharding", ["ddp", "fsdp"])
def test_two_rank_training_losses_equal_full_loss(tmp_path, train_corpus, tokenizer_dir, sharding):
    """train.py over 2 gloo ranks, under DDP and under FSDP2: --lm_loss chunked logs --lm_loss full's losses within
    1e-5 over 6 steps."""
    common = dict(max_steps=6, logging_steps=1, seed=3, **({"fsdp": "full_shard"} if sharding == "fsdp" else {}))
    outputs = {}
    for loss in ("full", "chunked"):
        out = tmp_path / loss
        run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", 2, "--master_port", free_port(),
             REPO / "train.py", *train_flags(train_corpus, tokenizer_dir, tmp_path / "cache", out, lm_loss=loss,
                                             **common)], timeout=600)
        outputs[loss] = losses(out)
    assert sorted(outputs["chunked"]) == list(range(1, 7))
    for step, expected in outputs["full"].items():
        assert outputs["chunked"][step] == pytest.approx(expected, abs=1e-5), step


# One loss step (forward and backward) of a model with Llama-3's 128,256 rows and a small width on 1 x 4,096 tokens,
# in a fresh process: its peak RSS over the RSS before the step, in bytes.
LOSS_STEP = """
import json, sys
import torch
sys.path.insert(0, {repo!r})
from transformers import AutoConfig, AutoModelForCausalLM
from bench._measure import peak_rss, reset_peak_rss, rss
from rankzero.train.losses import use_lm_loss

torch.manual_seed(0)
config = AutoConfig.for_model("llama", vocab_size=128_256, hidden_size=64, intermediate_size=192, num_hidden_layers=2,
                              num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False)
model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").train()
use_lm_loss(model, {loss!r})
ids = torch.randint(0, 128_256, (1, 4096))
model(input_ids=ids[:, :64], labels=ids[:, :64]).loss.backward()  # allocator and kernels warmed up
model.zero_grad(set_to_none=False)
# The kernel's high-water mark of this process's own memory, reset here: not ru_maxrss, which a child started by
# vfork/exec inherits from its parent (pytest, gigabytes into the suite), so both losses would read pytest's size.
reset_peak_rss()
before = rss()
loss = model(input_ids=ids, labels=ids).loss
loss.backward()
peak = peak_rss()
print(json.dumps({{"loss": loss.item(), "before": before, "peak": peak}}))
"""


def loss_step(loss: str) -> dict:
    result = subprocess.run([sys.executable, "-c", LOSS_STEP.format(repo=str(REPO), loss=loss)], capture_output=True,
                            text=True, check=True, env={**os.environ, "OMP_NUM_THREADS": "2"})
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_chunked_loss_step_peaks_at_under_four_tenths_of_the_full_loss():
    """A 128k vocabulary on 1 x 4,096 tokens: the memory a loss step adds (the process's own high-water mark, reset
    before the step, less its RSS then; the model and its gradients are there before) is <= 0.4x the full loss's
    (measured: 0.14x), the loss the same. The whole process's peak is the benchmark's figure
    (bench/train_bench.py --loss_memory: 0.24x)."""
    full, chunked = loss_step("full"), loss_step("chunked")
    assert chunked["loss"] == pytest.approx(full["loss"], abs=1e-5)
    full_step, chunked_step = full["peak"] - full["before"], chunked["peak"] - chunked["before"]
    assert full_step > 4 * 4096 * 128_256  # at least the fp32 logits, or nothing was measured
    assert chunked_step <= 0.4 * full_step, (chunked_step, full_step)
