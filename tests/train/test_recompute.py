"""Activation checkpointing (none, full, selective) and --float8 (rankzero/train/recompute.py): the gradients of
no checkpointing, what selective recomputes, under FSDP2 over 2 gloo processes, and the argument errors."""

from __future__ import annotations

import sys
from collections import Counter

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from helpers import REPO, TINY, free_port, losses, run, train_flags
from rankzero.args import parse_args
from rankzero.errors import ConfigError
from rankzero.train.recompute import use_checkpointing


class CountOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.counts = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[func] += 1
        return func(*args, **(kwargs or {}))


def gradients_and_backward_matmuls(mode: str):
    """The tiny model's fp32 gradients for one batch with `mode`, and the matmuls its backward ran."""
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(TINY), attn_implementation="sdpa").train()
    if mode == "full":  # what the Trainer does for --gradient_checkpointing (use_checkpointing returns it as args)
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        use_checkpointing(mode, None, model)
    ids = torch.randint(0, 2048, (2, 48), generator=torch.Generator().manual_seed(1))
    loss = model(input_ids=ids, labels=ids).loss
    with CountOps() as counter:
        loss.backward()
    return {name: p.grad.clone() for name, p in model.named_parameters()}, counter.counts[torch.ops.aten.mm.default]


def test_selective_checkpointing_gives_the_gradients_of_none_and_recomputes_half_the_matmuls():
    """Selective and full give exactly no checkpointing's gradients. Each layer's forward runs 7 matmuls (q, k, v, o,
    gate, up, down); the backward of full recomputes 6 of them (torch stops a recompute once it has what the backward
    needs: nothing needs the down projection's output), selective only k, o and up (torchtitan's policy keeps every
    other matmul's output), none nothing."""
    expected, plain = gradients_and_backward_matmuls("none")
    layers = 2
    for mode, recomputed in (("full", 6 * layers), ("selective", 3 * layers)):
        got, matmuls = gradients_and_backward_matmuls(mode)
        assert matmuls - plain == recomputed, (mode, matmuls, plain)
        for name in expected:
            torch.testing.assert_close(got[name], expected[name], rtol=0, atol=0, msg=f"{mode}: {name}")


def test_selective_checkpointing_under_fsdp_trains_as_without(tmp_path, train_corpus, tokenizer_dir):
    """--activation_checkpointing selective under FSDP2 (2 gloo processes, fp32): the losses of the same run without
    checkpointing over 10 steps, and the run says it recomputes."""
    runs = {}
    for mode in ("none", "selective"):
        out = tmp_path / mode
        result = run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", 2, "--master_port",
                      free_port(), REPO / "train.py",
                      *train_flags(train_corpus, tokenizer_dir, tmp_path / "cache", out, fsdp="full_shard",
                                   activation_checkpointing=mode, max_steps=10, logging_steps=1, seed=3)], timeout=600)
        assert ("activation_checkpointing = 'selective'" in result.stdout) == (mode == "selective"), result.stdout
        runs[mode] = losses(out)
    assert sorted(runs["none"]) == list(range(1, 11))
    for step, loss in runs["none"].items():
        assert runs["selective"][step] == pytest.approx(loss, abs=1e-5), (step, runs["selective"][step], loss)


def flags(tokenizer_dir, tmp_path, *more):
    return ["--dataset", "x.jsonl", "--tokenizer_path", str(tokenizer_dir), "--model_config", str(TINY),
            "--output_dir", str(tmp_path / "run"), *more]


def problems(tokenizer_dir, tmp_path, *more) -> list[str]:
    with pytest.raises(ConfigError) as error:
        parse_args(flags(tokenizer_dir, tmp_path, *more))
    return error.value.problems


def test_contradicting_checkpointing_flags_are_one_argument_error_each(tokenizer_dir, tmp_path):
    """--gradient_checkpointing is the alias of full: beside another mode it is an error naming both, as is
    fsdp_config's whole-layer checkpointing beside selective; an unknown mode lists the choices."""
    assert problems(tokenizer_dir, tmp_path, "--activation_checkpointing", "selective", "--gradient_checkpointing",
                    "true") == ["--activation_checkpointing selective with --gradient_checkpointing true: "
                                "--gradient_checkpointing true is --activation_checkpointing full; give only "
                                "--activation_checkpointing"]
    assert problems(tokenizer_dir, tmp_path, "--activation_checkpointing", "selective", "--fsdp", "full_shard",
                    "--fsdp_config", '{"activation_checkpointing": true}') == [
        "--activation_checkpointing selective with fsdp_config activation_checkpointing true (each layer recomputed "
        "whole): drop the fsdp_config key, --activation_checkpointing says what is recomputed"]
    assert problems(tokenizer_dir, tmp_path, "--activation_checkpointing", "some") == [
        "--activation_checkpointing some: choose one of none, full, selective"]
    args = parse_args(flags(tokenizer_dir, tmp_path, "--activation_checkpointing", "full", "--gradient_checkpointing"))
    assert args.model.activation_checkpointing == "full" and args.training.gradient_checkpointing


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal of a machine without CUDA")
def test_float8_without_a_hopper_gpu_is_refused_in_one_line(tokenizer_dir, tmp_path):
    """--float8 on CPU: an argument error (exit 2, one line, no traceback) before anything is prepared."""
    assert problems(tokenizer_dir, tmp_path, "--float8") == [
        "--float8: float8 training needs an NVIDIA Hopper GPU (compute capability 9.x) and this run has no CUDA "
        "device; drop --float8"]
    result = run([sys.executable, REPO / "train.py", *flags(tokenizer_dir, tmp_path, "--float8")], check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--float8: float8 training needs an NVIDIA Hopper GPU" in result.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal of a machine without CUDA")
def test_torch_compile_on_cpu_without_a_cpp_compiler_is_refused_in_one_line(tokenizer_dir, tmp_path):
    """Inductor builds CPU kernels with a C++ compiler: where torch's own search finds none, --torch_compile and flex
    attention (a compiled kernel) are argument errors before anything runs, not a traceback at the first step;
    another compile backend needs none."""
    from torch._inductor import config as inductor

    refusal = ["--torch_compile: inductor builds its CPU kernels with a C++ compiler and finds none here ($CXX, else "
               "g++); install one (apt-get install g++) or drop --torch_compile"]
    flex = ["--attn_implementation flex_attention: inductor builds its CPU kernels with a C++ compiler and finds none "
            "here ($CXX, else g++); install one (apt-get install g++) or use --attn_implementation sdpa"]
    with inductor.patch({"cpp.cxx": (None, str(tmp_path / "no-such-g++"))}):
        assert problems(tokenizer_dir, tmp_path, "--torch_compile", "true") == refusal
        assert problems(tokenizer_dir, tmp_path, "--attn_implementation", "flex_attention") == flex
        assert parse_args(flags(tokenizer_dir, tmp_path, "--torch_compile", "true", "--torch_compile_backend", "eager"))
    from rankzero.train.training_args import inductor_finds_a_cpp_compiler

    if inductor_finds_a_cpp_compiler():
        assert parse_args(flags(tokenizer_dir, tmp_path, "--torch_compile", "true")).training.torch_compile


def test_float8_on_an_older_gpu_or_without_torchao_is_refused(monkeypatch):
    """The refusal names the GPU and its capability (an A100 is 8.0), or torchao when a Hopper GPU lacks it."""
    import importlib.util

    from rankzero.train.recompute import float8_problems

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA A100-SXM4-80GB")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (8, 0))
    assert float8_problems(True) == ["--float8: float8 training needs an NVIDIA Hopper GPU (compute capability 9.x); "
                                     "NVIDIA A100-SXM4-80GB is 8.0; drop --float8"]
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torchao" else
                        real_find_spec(name, *a))
    assert float8_problems(True) == ["--float8: torchao is not installed (pip install torchao); or drop "
                                     "--float8"]
    assert float8_problems(False) == []
