"""Throughput, MFU and peak memory, measured per logging interval and put into the Trainer's logs.

    meter = ThroughputCallback(model, seq_length=2048)
    trainer = RankzeroTrainer(..., callbacks=[meter], meter=meter)   # trainer.log() asks meter.metrics()

Keys added to every training log (so they reach trainer_state.json's log_history and --report_to):
`tokens_per_second` (all ranks together, real tokens: padding excluded), `tokens_per_second_per_device`,
`mfu` (CUDA with a known peak only) and `peak_memory_gb` (CUDA: max allocated; CPU: max RSS of this
process). Tokens are counted per batch from the collator's `num_tokens` (no device sync) and
summed over ranks once per logging step. Time spent saving checkpoints or evaluating is left out.

MFU = tokens/s per device × FLOPs per token / peak FLOPS. FLOPs per token follow PaLM (appendix B):
6·N for the matmul parameters N (the output projection included, the input embedding lookup not)
plus 12·layers·hidden·seq_length for attention. Peaks are dense bf16/fp16 tensor-core figures;
without mixed precision the TF32 peak (half of it) is used.
"""

from __future__ import annotations

import resource
import time

import torch
from transformers import TrainerCallback

# Substring of torch.cuda.get_device_name() → dense bf16 TFLOPS. Order matters: the first match wins.
PEAK_BF16_TFLOPS = [
    ("GH200", 989.0),
    ("H200", 989.0),
    ("H100 PCIe", 756.0),
    ("H100", 989.0),
    ("H800", 989.0),
    ("H20", 148.0),
    ("B200", 2250.0),
    ("A100", 312.0),
    ("A800", 312.0),
    ("L40S", 362.0),
    ("L40", 181.0),
    ("L4", 121.0),
    ("A10G", 70.0),
    ("A10", 125.0),
    ("A6000", 155.0),
    ("RTX 4090", 165.0),
    ("RTX 3090", 71.0),
    ("V100", 125.0),
    ("T4", 65.0),
]


def peak_flops(device_name: str, mixed_precision: bool) -> float | None:
    for key, tflops in PEAK_BF16_TFLOPS:
        if key in device_name:
            return tflops * 1e12 * (1.0 if mixed_precision else 0.5)
    return None


def flops_per_token(model, seq_length: int) -> float:
    config = model.config
    seen, matmul_params = set(), 0
    embedding = model.get_input_embeddings().weight
    for parameter in model.parameters():
        if id(parameter) not in seen and parameter is not embedding:
            seen.add(id(parameter))
            matmul_params += parameter.numel()
    output = model.get_output_embeddings()
    if output is not None and output.weight is embedding:  # tied: the output matmul still runs
        matmul_params += embedding.numel()
    layers = getattr(config, "num_hidden_layers", 0)
    hidden = getattr(config, "hidden_size", 0)
    return 6.0 * matmul_params + 12.0 * layers * hidden * seq_length


class ThroughputCallback(TrainerCallback):
    def __init__(self, model, seq_length: int):
        self.flops_per_token = flops_per_token(model, seq_length)
        self.local_tokens = 0
        self.mark = time.perf_counter()
        self.peak = None

    def add_tokens(self, count: int) -> None:
        self.local_tokens += count

    def on_train_begin(self, args, state, control, **kwargs):
        if torch.cuda.is_available() and not args.use_cpu:
            self.peak = peak_flops(torch.cuda.get_device_name(), bool(args.bf16 or args.fp16))
        self.local_tokens = 0
        self.mark = time.perf_counter()

    def on_save(self, args, state, control, **kwargs):
        # Saves and evaluations follow a log in the same step: restart the clock so they count as no time.
        if self.local_tokens == 0:
            self.mark = time.perf_counter()

    on_evaluate = on_save

    def metrics(self, args) -> dict[str, float]:
        """Called on every rank at each training log (it sums tokens over ranks)."""
        tokens = self.local_tokens
        world = max(1, args.world_size)
        if world > 1 and torch.distributed.is_initialized():
            total = torch.tensor([tokens], dtype=torch.int64, device=args.device)
            torch.distributed.all_reduce(total)
            tokens = int(total.item())
        now = time.perf_counter()
        elapsed = max(now - self.mark, 1e-9)
        self.local_tokens, self.mark = 0, now
        per_second = tokens / elapsed
        out = {"tokens_per_second": round(per_second, 1), "tokens_per_second_per_device": round(per_second / world, 1)}
        if self.peak:
            out["mfu"] = round(per_second / world * self.flops_per_token / self.peak, 4)
        if torch.cuda.is_available() and not args.use_cpu:
            out["peak_memory_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        else:
            out["peak_memory_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)
        return out

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs or "loss" not in logs:
            return
        parts = [f"step {state.global_step}/{state.max_steps}", f"loss {logs['loss']:.4f}"]
        if "learning_rate" in logs:
            parts.append(f"lr {logs['learning_rate']:.2e}")
        if logs.get("grad_norm") is not None:
            parts.append(f"grad_norm {logs['grad_norm']:.3f}")
        if "tokens_per_second" in logs:
            parts.append(f"tok/s {logs['tokens_per_second']:,.0f}")
        if "mfu" in logs:
            parts.append(f"mfu {100 * logs['mfu']:.1f}%")
        if "peak_memory_gb" in logs:
            parts.append(f"mem {logs['peak_memory_gb']:.2f} GB")
        print(" | ".join(parts), flush=True)
