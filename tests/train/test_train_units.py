"""Unit tests of the training pieces: collator, per-document masking, vocabulary check, defaults."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rankzero.train.collator import IGNORE_INDEX, BlockCollator, document_position_ids
from helpers import TINY


def rows(*lengths_per_row, labels=False):
    out = []
    for lengths in lengths_per_row:
        ids = np.arange(10, 10 + sum(lengths), dtype=np.int32)
        row = {"input_ids": ids, "document_lengths": np.array(lengths, dtype=np.int32)}
        if labels:
            row["labels"] = np.where(np.arange(len(ids)) < 2, IGNORE_INDEX, ids)
        out.append(row)
    return out


def test_packed_rows_stack_without_padding_or_mask():
    batch = BlockCollator()(rows([6], [2, 4]))
    assert batch["input_ids"].shape == (2, 6)
    assert "attention_mask" not in batch and "position_ids" not in batch
    assert torch.equal(batch["labels"], batch["input_ids"])
    assert batch["num_tokens"] == 12


def test_unpacked_rows_pad_to_multiple_of_8_with_ignored_labels():
    batch = BlockCollator(pad_token_id=3)(rows([5], [11]))
    assert batch["input_ids"].shape == (2, 16)
    assert batch["attention_mask"][0].tolist() == [1] * 5 + [0] * 11
    assert (batch["labels"][0, 5:] == IGNORE_INDEX).all() and (batch["input_ids"][0, 5:] == 3).all()
    assert batch["num_tokens"] == 16  # real tokens only


def test_document_positions_restart_and_mask_first_labels():
    assert document_position_ids([3, 2], 5).tolist() == [0, 1, 2, 0, 1]
    batch = BlockCollator(mask_across_documents=True)(rows([3, 2], [5]))
    assert batch["position_ids"].tolist() == [[0, 1, 2, 0, 1], [0, 1, 2, 3, 4]]
    assert batch["labels"][0].tolist() == [IGNORE_INDEX, 11, 12, IGNORE_INDEX, 14]
    assert "attention_mask" not in batch


def test_sft_labels_pass_through():
    batch = BlockCollator()(rows([4], [4], labels=True))
    assert batch["labels"][0].tolist() == [IGNORE_INDEX, IGNORE_INDEX, 12, 13]


def test_flattened_batch_for_flash_attention():
    batch = BlockCollator(mask_across_documents=True, flatten=True)(rows([3, 2], [5]))
    assert batch["input_ids"].shape == (1, 10)
    assert batch["position_ids"].tolist() == [[0, 1, 2, 0, 1, 0, 1, 2, 3, 4]]


def tiny_model(**overrides):
    from rankzero.train.model import load_config
    from transformers import AutoModelForCausalLM

    config = load_config(TINY)
    for key, value in overrides.items():
        setattr(config, key, value)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").eval()


def test_mask_across_documents_equals_separate_documents():
    """A row of two documents with restarting positions gives each document's own logits (sdpa)."""
    model = tiny_model()
    first, second = torch.randint(5, 1000, (1, 7)), torch.randint(5, 1000, (1, 5))
    batch = BlockCollator(mask_across_documents=True)(
        [{"input_ids": torch.cat([first, second], 1)[0].numpy(), "document_lengths": np.array([7, 5])}] * 2
    )
    with torch.no_grad():
        # use_cache=False as in training (build_model sets it): a KV cache turns packed detection off
        packed = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"], use_cache=False).logits
        alone = model(input_ids=second, use_cache=False).logits
        unmasked = model(input_ids=batch["input_ids"], use_cache=False).logits
    assert torch.allclose(packed[:, 7:], alone.expand(2, -1, -1), atol=1e-5)
    assert not torch.allclose(unmasked[:, 7:], alone.expand(2, -1, -1), atol=1e-3)


def test_vocabulary_resize_and_out_of_range(tokenizer_dir):
    from transformers import AutoTokenizer

    from rankzero.train.model import match_vocabulary

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    small = tiny_model(vocab_size=len(tokenizer) - 200)
    with pytest.warns(UserWarning, match="resizing the embeddings .* at the old rows' mean"):
        match_vocabulary(small, tokenizer, max_token_id=len(tokenizer) - 1, source="test")
    assert small.get_input_embeddings().num_embeddings >= len(tokenizer)
    with pytest.raises(ValueError, match="token id 5000"):
        match_vocabulary(tiny_model(), tokenizer, max_token_id=5000, source="test")


def test_fast_defaults_respect_given_flags(tmp_path):
    from rankzero.runtime import Runtime
    from rankzero.train.defaults import Facts, fast_defaults, resolve
    from rankzero.train.training_args import TrainingArguments

    runtime = Runtime(rank=0, world_size=1, local_rank=0, local_world_size=1, node_rank=0, hostname="h")
    given = TrainingArguments(output_dir=str(tmp_path), dataloader_num_workers=0, dataloader_prefetch_factor=None)
    given_flags = frozenset({"dataloader_num_workers", "output_dir"})
    args, applied, warnings = resolve(given, Facts(given_flags, runtime), (fast_defaults,))
    assert args.dataloader_num_workers == 0 and "dataloader_num_workers" not in applied
    assert args.use_cpu is True and "use_cpu" in applied  # no CUDA here
    assert args.remove_unused_columns is False

    forced = TrainingArguments(output_dir=str(tmp_path), remove_unused_columns=True)
    _, _, warnings = resolve(forced, Facts(frozenset({"remove_unused_columns"}), runtime), (fast_defaults,))
    assert any("--remove_unused_columns is ignored" in w for w in warnings)


def test_peak_flops_table_matches_device_names():
    from rankzero.train.throughput import peak_flops

    assert peak_flops("NVIDIA H100 80GB HBM3", True) == 989e12
    assert peak_flops("NVIDIA H100 NVL", True) == 835e12
    assert peak_flops("NVIDIA H100 PCIe", True) == 756e12
    assert peak_flops("NVIDIA H200 NVL", True) == 835e12
    assert peak_flops("NVIDIA A100-SXM4-80GB", True) == 312e12
    assert peak_flops("NVIDIA GeForce RTX 4090", False) == pytest.approx(82.6e12)
    assert peak_flops("NVIDIA L40S", True) == 362e12
    assert peak_flops("Tesla V100-SXM2-32GB", False) == pytest.approx(15.7e12)  # no TF32: plain fp32
    assert peak_flops("AMD Instinct MI300X", True) == pytest.approx(1307.4e12)
    assert peak_flops("Some CPU", True) is None


def runtime_of(world_size: int):
    from rankzero.runtime import Runtime

    return Runtime(rank=0, world_size=world_size, local_rank=0, local_world_size=world_size, node_rank=0, hostname="h")


GPUS = {  # name: (capability, torch.version.cuda, torch.version.hip)
    "H100": ((9, 0), "12.8", None),
    "V100": ((7, 0), "12.8", None),  # bf16 only emulated
    "MI300X": ((9, 4), None, "6.4"),  # ROCm: no TF32 mode, transformers rejects --tf32
}


@pytest.mark.parametrize("gpu", GPUS)
def test_fast_defaults_on_a_faked_gpu(gpu, tmp_path, monkeypatch, request):
    """bf16 only where the GPU has it natively, TF32 only on CUDA Ampere+, and the arguments still validate."""
    import types

    from rankzero.train.defaults import Facts, fast_defaults, resolve
    from rankzero.train.training_args import TrainingArguments

    capability, cuda, hip = GPUS[gpu]
    monkeypatch.setattr(torch.version, "cuda", cuda)
    monkeypatch.setattr(torch.version, "hip", hip)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda device=None: types.SimpleNamespace(major=capability[0], minor=capability[1], name=gpu))
    # torch's own logic: ROCm always, CUDA from Ampere, and older CUDA GPUs too when emulation counts.
    monkeypatch.setattr(torch.cuda, "is_bf16_supported",
                        lambda including_emulation=True: bool(hip) or capability[0] >= 8 or including_emulation)
    monkeypatch.setattr(torch.backends, "fp32_precision", torch.backends.fp32_precision)  # --tf32 sets it globally
    # transformers caches what it learns about the device: forget it before (another test may have asked on
    # this CPU) and after (later tests must not see the fake).
    from transformers.utils import import_utils

    cached = [import_utils.is_torch_tf32_available, import_utils.is_torch_bf16_gpu_available,
              import_utils.is_torch_cuda_available]
    for function in cached:
        function.cache_clear()
        request.addfinalizer(function.cache_clear)

    from rankzero.train import defaults

    monkeypatch.setattr(defaults, "triton_available", lambda: True)
    args, applied, _ = resolve(TrainingArguments(output_dir=str(tmp_path)),
                               Facts(frozenset(), runtime_of(1)), (fast_defaults,))
    assert args.bf16 is (gpu != "V100")
    assert args.tf32 is (True if gpu == "H100" else None)
    assert args.use_cpu is False and args.optim == "adamw_torch_fused" and args.dataloader_pin_memory is True
    # Regional compile by default only where Triton makes the kernels: NVIDIA Ampere and newer.
    assert args.torch_compile is (gpu == "H100")
    if gpu == "V100":
        assert "capability 7.0 has no native bf16" in applied["bf16"]
    eager, applied, _ = resolve(TrainingArguments(output_dir=str(tmp_path), torch_compile=False),
                                Facts(frozenset({"torch_compile"}), runtime_of(1)), (fast_defaults,))
    assert eager.torch_compile is False and "torch_compile" not in applied
    # Under FSDP2 too: each decoder layer compiled, then sharded, and the reason says so.
    sharded, applied, _ = resolve(TrainingArguments(output_dir=str(tmp_path), fsdp="full_shard"),
                                  Facts(frozenset({"fsdp"}), runtime_of(2)), (fast_defaults,))
    assert sharded.torch_compile is (gpu == "H100")
    if gpu == "H100":
        assert applied["torch_compile"] == ("True (Ampere or newer with Triton: each decoder layer compiled, then "
                                            "sharded by FSDP2 (--torch_compile false for eager))")
    monkeypatch.setattr(defaults, "triton_available", lambda: False)
    no_triton, _, _ = resolve(TrainingArguments(output_dir=str(tmp_path)),
                              Facts(frozenset(), runtime_of(1)), (fast_defaults,))
    assert no_triton.torch_compile is False


@pytest.mark.parametrize("world_size", [1, 2])
def test_ddp_never_searches_for_unused_parameters(world_size, tmp_path):
    from rankzero.train.defaults import Facts, fast_defaults, resolve
    from rankzero.train.training_args import TrainingArguments

    args, applied, _ = resolve(TrainingArguments(output_dir=str(tmp_path)),
                               Facts(frozenset(), runtime_of(world_size)), (fast_defaults,))
    assert args.ddp_find_unused_parameters is False and "ddp_find_unused_parameters" in applied
    given, _, _ = resolve(TrainingArguments(output_dir=str(tmp_path), ddp_find_unused_parameters=True),
                          Facts(frozenset({"ddp_find_unused_parameters"}), runtime_of(world_size)), (fast_defaults,))
    assert given.ddp_find_unused_parameters is True


def test_one_process_under_torchrun_sets_up_without_ddp(tmp_path):
    """torchrun sets LOCAL_RANK even for one process; accelerate would then wrap the model in DDP on CPU."""
    import subprocess
    import sys

    from helpers import REPO, quiet_env

    script = f"""
import os
from accelerate.utils import DistributedType
from rankzero.runtime import Runtime
from rankzero.train.training_args import TrainingArguments, set_up_devices
args = TrainingArguments(output_dir={str(tmp_path)!r}, use_cpu=True)
set_up_devices(args, Runtime.from_env())
print(args.distributed_state.distributed_type == DistributedType.NO, os.environ["LOCAL_RANK"])
"""
    env = quiet_env(RANK=0, LOCAL_RANK=0, WORLD_SIZE=1, LOCAL_WORLD_SIZE=1, MASTER_ADDR="127.0.0.1", MASTER_PORT=29599)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=REPO)
    assert result.stdout.split() == ["True", "0"], result.stderr[-2000:]


def test_a_copy_of_set_up_arguments_keeps_the_set_up(tmp_path):
    """The defaults chosen after the model (defaults.WITH_MODEL) copy arguments whose devices are set up already.
    HF's set-up, run again on a plain copy, resets accelerate's state and, with LOCAL_RANK visible, makes the one
    CPU process a MULTI_CPU (DDP) run; `replaced` keeps what set_up_devices chose."""
    import subprocess
    import sys

    from helpers import REPO, quiet_env

    script = f"""
from accelerate import PartialState
from accelerate.utils import DistributedType
from rankzero.runtime import Runtime
from rankzero.train.training_args import TrainingArguments, set_up_devices
args = TrainingArguments(output_dir={str(tmp_path)!r}, use_cpu=True)
set_up_devices(args, Runtime.from_env())
copy = args.replaced(learning_rate=1e-3)
print(copy.device, copy.learning_rate, copy.distributed_state.distributed_type == DistributedType.NO,
      PartialState().distributed_type == DistributedType.NO)
"""
    env = quiet_env(RANK=0, LOCAL_RANK=0, WORLD_SIZE=1, LOCAL_WORLD_SIZE=1, MASTER_ADDR="127.0.0.1", MASTER_PORT=29597)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=REPO)
    assert result.stdout.split() == ["cpu", "0.001", "True", "True"], result.stderr[-2000:]


def qwen3_like():
    """head_dim × heads (128) differs from hidden_size (64), and the output head is not tied."""
    from transformers import AutoModelForCausalLM, Qwen3Config

    config = Qwen3Config(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=32, tie_word_embeddings=False)
    return AutoModelForCausalLM.from_config(config)


def test_flops_per_token_against_a_hand_count():
    from rankzero.train.throughput import flops_per_token

    # tiny Llama (tied): per layer q 64·64, k and v 64·32, o 64·64, MLP 3·64·192, two norms of 64;
    # plus the final norm and the output projection (the tied 2048×64 embedding, counted once).
    layer = 64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 192 + 2 * 64
    params = 2 * layer + 64 + 2048 * 64
    assert flops_per_token(tiny_model(), 128) == 6 * params + 12 * 2 * (4 * 16) * 128
    # Qwen3-like: q 64·128, k and v 64·64, o 128·64, q/k norms of 32, MLP 3·64·96, two norms; untied head 256×64.
    layer = 64 * 128 + 2 * 64 * 64 + 128 * 64 + 2 * 32 + 3 * 64 * 96 + 2 * 64
    params = 2 * layer + 64 + 256 * 64
    assert flops_per_token(qwen3_like(), 4096) == 6 * params + 12 * 2 * (4 * 32) * 4096


def test_flops_per_token_counts_zero3_partitioned_parameters_whole():
    from rankzero.train.throughput import flops_per_token

    model = tiny_model()
    whole = flops_per_token(model, 128)
    for parameter in model.parameters():  # what deepspeed.zero.Init leaves on each rank
        parameter.ds_numel = parameter.numel()
        parameter.data = torch.empty(0)
    assert flops_per_token(model, 128) == whole


def test_bf16_checkpoint_loads_as_fp32_master_weights(tmp_path, tokenizer_dir):
    from transformers import AutoTokenizer

    from rankzero.config import ModelConfig
    from rankzero.train.model import build_model

    tiny_model().to(torch.bfloat16).save_pretrained(tmp_path / "bf16")
    model, _ = build_model(ModelConfig(pretrained_model=str(tmp_path / "bf16")),
                           AutoTokenizer.from_pretrained(tokenizer_dir), None, "sdpa")
    assert {p.dtype for p in model.parameters()} == {torch.float32}


@pytest.mark.parametrize("machine, chosen, expected", [
    ("cpu", False, "sdpa"),
    ("a100", False, "flex_attention"),
    ("a100+flash-attn", False, "flash_attention_2"),
    ("v100", False, "sdpa"),  # flex's Triton kernels target Ampere and newer
    ("a100", True, "sdpa"),  # --attn_implementation given: kept
])
def test_document_masking_picks_the_fastest_backend_available(machine, chosen, expected, monkeypatch):
    import transformers.utils

    from rankzero.train.model import resolve_attention

    monkeypatch.setattr(torch.cuda, "is_available", lambda: machine != "cpu")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 0) if machine == "v100" else (8, 0))
    monkeypatch.setattr(transformers.utils, "is_flash_attn_2_available", lambda: machine.endswith("flash-attn"))
    assert resolve_attention("sdpa", chosen=chosen, mask_across_documents=True) == (expected, [])
    assert resolve_attention("sdpa", chosen=False, mask_across_documents=False) == ("sdpa", [])


def test_a_checkpoint_appears_under_its_name_only_when_complete(tmp_path, tokenizer_dir, monkeypatch):
    """Mid-save (optimizer written, RNG not yet) no `checkpoint-N` exists; afterwards it holds everything."""
    from datasets import Dataset
    from transformers import AutoTokenizer, Trainer

    from rankzero.train.throughput import ThroughputCallback
    from rankzero.train.trainer import RankzeroTrainer
    from rankzero.train.training_args import TrainingArguments, set_up_devices

    seen_mid_save = []
    real = Trainer._save_rng_state

    def spy(self, output_dir):
        seen_mid_save.append(sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("checkpoint-")))
        return real(self, output_dir)

    monkeypatch.setattr(Trainer, "_save_rng_state", spy)
    model = tiny_model().train()
    dataset = Dataset.from_dict({"input_ids": [list(range(10, 26))] * 8}).with_format("numpy")
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=2, save_steps=1, per_device_train_batch_size=2,
                             use_cpu=True, report_to="none", disable_tqdm=True, remove_unused_columns=False)
    set_up_devices(args, runtime_of(1))
    trainer = RankzeroTrainer(model=model, args=args, train_dataset=dataset, data_collator=BlockCollator(),
                              processing_class=AutoTokenizer.from_pretrained(tokenizer_dir),
                              meter=ThroughputCallback(model, seq_length=16))
    trainer.train()
    assert seen_mid_save == [[], ["checkpoint-1"]]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-1", "checkpoint-2"]
    assert {"model.safetensors", "optimizer.pt", "rng_state.pth", "trainer_state.json"} <= {
        p.name for p in (tmp_path / "checkpoint-2").iterdir()}


def test_throughput_leaves_out_the_first_step_and_checkpoint_saves(monkeypatch):
    """A fake clock: 100 tokens per second of training, a 10 s first step and 40 s saves must not change that."""
    import types

    from transformers import TrainerControl, TrainerState

    import rankzero.train.throughput as throughput

    clock = types.SimpleNamespace(now=0.0)
    monkeypatch.setattr(throughput.time, "perf_counter", lambda: clock.now)
    meter = throughput.ThroughputCallback(tiny_model(), seq_length=16)
    args = types.SimpleNamespace(world_size=1, use_cpu=True, device="cpu", bf16=False, fp16=False)
    state = TrainerState()
    meter.on_train_begin(args, state, TrainerControl())

    def step(seconds: float, save: bool = False):
        meter.on_step_begin(args, state, TrainerControl())
        meter.add_tokens(100 * seconds)
        clock.now += seconds
        meter.on_step_end(args, state, TrainerControl(should_save=save))
        if save:
            clock.now += 40.0  # the checkpoint is written

    meter.add_tokens(5000)  # the first step: compile and warm-up, 10 s for 50 s worth of tokens
    clock.now += 10.0
    meter.on_step_end(args, state, TrainerControl())
    assert "tokens_per_second" not in meter.metrics(args)  # a log on step 1 has no interval behind it
    step(1.0, save=True)
    step(2.0)
    assert meter.metrics(args)["tokens_per_second"] == 100.0
    step(1.0, save=True)  # logged in the same step as the save: the interval ends where the save begins
    assert meter.metrics(args)["tokens_per_second"] == 100.0
    step(3.0)
    assert meter.metrics(args)["tokens_per_second"] == 100.0


def test_rows_of_different_lengths_pad_as_one_more_document():
    """SFT rows of whole samples: padding is a document of its own (positions restart, labels -100, no mask)."""
    batch = BlockCollator(pad_token_id=3, mask_across_documents=True)(rows([3, 2], [5, 4, 1]))
    assert batch["input_ids"].shape == (2, 16) and "attention_mask" not in batch
    assert batch["position_ids"][0].tolist() == [0, 1, 2, 0, 1] + list(range(11))
    assert batch["position_ids"][1].tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 3, 0] + list(range(6))
    assert (batch["labels"][0, 5:] == IGNORE_INDEX).all() and (batch["input_ids"][0, 5:] == 3).all()
    assert batch["labels"][1].tolist()[:10] == [IGNORE_INDEX, 11, 12, 13, 14, IGNORE_INDEX, 16, 17, 18, IGNORE_INDEX]
    assert batch["num_tokens"] == 15


def test_a_preempted_fsdp_runs_continue_line_exports_before_a_new_run(tmp_path):
    """An FSDP checkpoint holds DCP shards, which `pretrain_cont.sh CHECKPOINT` refuses (export first): the summary of
    a run preempted under FSDP prints the resume and the export, never that refused command."""
    from rankzero.train.report import summary

    sharded, whole = tmp_path / "run" / "checkpoint-4", tmp_path / "plain" / "checkpoint-4"
    (sharded / "pytorch_model_fsdp_0").mkdir(parents=True)
    whole.mkdir(parents=True)
    (whole / "model.safetensors").write_bytes(b"")
    lines = {name: summary([], output_dir=checkpoint.parent, wall_s=1.0, tokens=10, steps=4, saved=False,
                           tensorboard=False, stopped_at=checkpoint).splitlines()[-1]
             for name, checkpoint in (("sharded", sharded), ("whole", whole))}
    assert f"pretrain_cont.sh {sharded} --max_steps" not in lines["sharded"], lines["sharded"]
    assert f"export_checkpoint.py {sharded} {sharded.parent}-export" in lines["sharded"], lines["sharded"]
    assert "RESUME=1 " in lines["sharded"] and f"pretrain_cont.sh {sharded.parent} resumes this run" in lines["sharded"]
    assert f"pretrain_cont.sh {whole} --max_steps N" in lines["whole"], lines["whole"]
