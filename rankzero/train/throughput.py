"""Throughput, MFU and peak memory, measured per logging interval and put into the Trainer's logs.

    meter = ThroughputCallback(model, seq_length=2048)
    trainer = RankzeroTrainer(..., meter=meter)        # adds the callback; trainer.log() asks meter.metrics()

Keys added to every training log (so they reach trainer_state.json's log_history and --report_to):
`tokens_seen` (real tokens trained on so far, all ranks; every save step is also a logging step, so a
checkpoint's history ends with its exact count and a resumed run counts on from it), `tokens_per_second` (all ranks together, real tokens: padding excluded), `tokens_per_second_per_device`,
`mfu` (CUDA with a known peak only) and `peak_memory_gb` (CUDA: max allocated; CPU: max RSS of this
process). Tokens are counted per batch from the collator's `num_tokens` (no device sync) and
summed over ranks once per logging step.

What the clock leaves out: the first optimizer step of the run (torch.compile, cuDNN/allocator
warm-up and the DataLoader's first batches would otherwise drag the first interval down; its tokens
are dropped with it), and every checkpoint save and evaluation (from the end of the step that
triggers them to the start of the next step). The GPU is synchronised only at those few points,
so that work queued by the step is counted as training time; logging already waits for the loss.
A log that falls on the first step has no interval behind it and carries no throughput keys.

MFU = tokens/s per device × FLOPs per token / peak FLOPS. FLOPs per token follow PaLM (appendix B):
6·N for the parameters N outside the input embedding (the output projection included, tied or not)
plus 12·layers·heads·head_dim·seq_length for attention scores and values, with no discount for
causal or per-document masking (the convention of PaLM, nanoGPT and torchtitan, so figures compare).
N is counted when the meter is built, before any wrapping; DeepSpeed ZeRO-3 has partitioned the
weights by then, so each parameter's full size is read from `ds_numel`. Peaks are dense tensor-core
figures from the vendors' data sheets: bf16/fp16 with mixed precision, otherwise what fp32 matmuls
reach with the fast defaults (TF32 on NVIDIA Ampere and newer, plain FP32 elsewhere).
"""

from __future__ import annotations

import resource
import sys
import time

import torch
from tqdm.auto import tqdm
from transformers import TrainerCallback

# Substring of torch.cuda.get_device_name() → (dense bf16/fp16 TFLOPS, dense fp32-path TFLOPS).
# Order matters: the first match wins, so the longer names come first ("H100 NVL" before "H100").
PEAK_TFLOPS = [
    ("GH200", (989.0, 494.5)),
    ("H200 NVL", (835.0, 417.5)),
    ("H200", (989.0, 494.5)),
    ("H100 NVL", (835.0, 417.5)),
    ("H100 PCIe", (756.0, 378.0)),
    ("H100", (989.0, 494.5)),
    ("H800 PCIe", (756.0, 378.0)),
    ("H800", (989.0, 494.5)),
    ("H20", (148.0, 74.0)),
    ("GB200", (2500.0, 1250.0)),
    ("B200", (2250.0, 1125.0)),
    ("A100", (312.0, 156.0)),
    ("A800", (312.0, 156.0)),
    ("L40S", (362.0, 183.0)),
    ("L40", (181.0, 90.5)),
    ("L4", (121.0, 60.0)),
    ("A10G", (70.0, 35.0)),
    ("A10", (125.0, 62.5)),
    ("A6000", (155.0, 77.4)),
    ("RTX 4090", (165.0, 82.6)),
    ("RTX 3090", (71.0, 35.6)),
    ("V100", (125.0, 15.7)),  # fp16 tensor cores; no bf16, no TF32
    ("T4", (65.0, 8.1)),
    ("MI300X", (1307.4, 163.4)),  # ROCm: fp32 matmuls stay fp32 (no TF32 default there)
    ("MI325X", (1307.4, 163.4)),
    ("MI250X", (383.0, 95.7)),
]


def peak_flops(device_name: str, mixed_precision: bool) -> float | None:
    for key, (mixed, fp32) in PEAK_TFLOPS:
        if key in device_name:
            return (mixed if mixed_precision else fp32) * 1e12
    return None


def full_numel(parameter: torch.Tensor) -> int:
    return getattr(parameter, "ds_numel", None) or parameter.numel()  # ZeRO-3 partitions keep their full size here


def flops_per_token(model, seq_length: int) -> float:
    """Training FLOPs per token (forward + backward), PaLM appendix B; see the module docstring."""
    config = model.config
    embedding = model.get_input_embeddings().weight
    seen, params = {id(embedding)}, 0
    for parameter in model.parameters():
        if id(parameter) not in seen:
            seen.add(id(parameter))
            params += full_numel(parameter)
    output = model.get_output_embeddings()
    if output is not None and output.weight is embedding:  # tied: the output matmul still runs
        params += full_numel(embedding)
    layers = config.num_hidden_layers
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return 6.0 * params + 12.0 * layers * heads * head_dim * seq_length


def _synchronize(args) -> None:
    if torch.cuda.is_available() and not args.use_cpu:
        torch.cuda.synchronize()


class ThroughputCallback(TrainerCallback):
    def __init__(self, model, seq_length: int):
        self.flops_per_token = flops_per_token(model, seq_length)
        self.peak = None
        self.local_tokens = 0
        self.tokens_seen = 0  # every rank's tokens up to the last log, the first step's included
        self.tokens_at_start = 0  # tokens_seen when this run started (a resumed run's history goes on)
        self.step_at_start = 0
        self.unlogged_tokens = 0  # this rank's tokens since the last log (the first step's too)
        self.mark = None  # start of the interval being measured; None until the run's first step is done
        self.excluded_s = 0.0  # saves and evaluations inside the interval
        self.paused_at = None  # set while a save or evaluation runs

    def add_tokens(self, count: int) -> None:
        self.local_tokens += count
        self.unlogged_tokens += int(count)

    def on_train_begin(self, args, state, control, **kwargs):
        if torch.cuda.is_available() and not args.use_cpu:
            self.peak = peak_flops(torch.cuda.get_device_name(), bool(args.bf16 or args.fp16))
        self.local_tokens, self.mark, self.excluded_s, self.paused_at = 0, None, 0.0, None
        # A resumed run goes on counting from its checkpoint's log history.
        self.tokens_seen = next((entry["tokens_seen"] for entry in reversed(state.log_history)
                                 if "tokens_seen" in entry), 0)
        self.tokens_at_start, self.unlogged_tokens = self.tokens_seen, 0
        self.step_at_start = state.global_step

    def on_step_begin(self, args, state, control, **kwargs):
        if self.paused_at is not None:
            self.excluded_s += time.perf_counter() - self.paused_at
            self.paused_at = None

    def on_step_end(self, args, state, control, **kwargs):
        # Runs after the flow and preemption callbacks have decided what follows this step.
        if self.mark is None:
            _synchronize(args)
            self.mark, self.local_tokens = time.perf_counter(), 0
        # A checkpoint's log history must end at its own step: a resume counts on from its last `tokens_seen`.
        control.should_log = control.should_log or control.should_save
        if control.should_save or control.should_evaluate:
            _synchronize(args)  # the step's queued GPU work is training time, not saving time
            self.paused_at = time.perf_counter()

    def metrics(self, args) -> dict[str, float]:
        """Called on every rank at each training log (it sums tokens over ranks)."""
        end = self.paused_at if self.paused_at is not None else time.perf_counter()
        tokens, seen = self.local_tokens, self.unlogged_tokens
        world = max(1, args.world_size)
        if world > 1 and torch.distributed.is_initialized():
            total = torch.tensor([tokens, seen], dtype=torch.int64, device=args.device)
            torch.distributed.all_reduce(total)
            tokens, seen = (int(value) for value in total.tolist())
        self.tokens_seen += seen
        self.unlogged_tokens = 0
        out = {"tokens_seen": self.tokens_seen}
        if self.mark is not None and tokens > 0:
            per_second = tokens / max(end - self.mark - self.excluded_s, 1e-9)
            out.update({"tokens_per_second": round(per_second, 1),
                        "tokens_per_second_per_device": round(per_second / world, 1)})
            if self.peak:
                out["mfu"] = round(per_second / world * self.flops_per_token / self.peak, 4)
        if self.mark is not None:
            self.mark, self.excluded_s, self.local_tokens = end, 0.0, 0
        if torch.cuda.is_available() and not args.use_cpu:
            out["peak_memory_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        else:
            out["peak_memory_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)
        return out

    def tokens_trained(self, args) -> int:
        """Every rank's tokens since this run started (a collective: call it on every rank)."""
        seen = self.unlogged_tokens
        if max(1, args.world_size) > 1 and torch.distributed.is_initialized():
            total = torch.tensor([seen], dtype=torch.int64, device=args.device)
            torch.distributed.all_reduce(total)
            seen = int(total.item())
        return self.tokens_seen - self.tokens_at_start + seen

    def on_epoch_end(self, args, state, control, **kwargs):
        control.should_log = control.should_log or control.should_save  # as at a step's end (the Trainer skips
        # the log when this step has been logged already)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        if "eval_loss" in logs:
            parts = [f"eval step {state.global_step}/{state.max_steps}", f"eval_loss {logs['eval_loss']:.4f}"]
            if "eval_perplexity" in logs:
                parts.append(f"perplexity {logs['eval_perplexity']:,.2f}")
            if "eval_bits_per_byte" in logs:
                parts.append(f"bits/byte {logs['eval_bits_per_byte']:.4f}")
            sources = [key[len("eval_"):-len("_bits_per_byte")] for key in logs
                       if key.endswith("_bits_per_byte") and key != "eval_bits_per_byte"]
            if sources:
                parts.append("per source bits/byte " + ", ".join(
                    f"{name} {logs[f'eval_{name}_bits_per_byte']:.4f}" for name in sources))
            tqdm.write(" | ".join(parts), file=sys.stdout)
            sys.stdout.flush()
            return
        if "loss" not in logs:
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
        # Through tqdm, so that a progress bar on the same terminal is cleared first and redrawn below the line.
        tqdm.write(" | ".join(parts), file=sys.stdout)
        sys.stdout.flush()
