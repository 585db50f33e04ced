"""GPU training throughput: rankzero's train.py, HF Trainer defaults and a bare PyTorch loop, side by side.

    python bench/gpu_bench.py                          # ~1B Llama (configs/model_config_1b.json), seq 2048, bf16, 300 steps
    python bench/gpu_bench.py --batch 4 --steps 200 --rounds 2
    python bench/gpu_bench.py --systems rankzero,rankzero_eager,rankzero_documents,rankzero_fsdp,hf_defaults,bare
    python bench/gpu_bench.py --systems rankzero_eager,rankzero_fsdp --steps 100   # what FSDP2 costs on one GPU
    python bench/gpu_bench.py --cpu_smoke              # tiny model on CPU, seconds: checks the harness, measures nothing

On one CUDA GPU, every system trains the same model config from the same seed on the same packed
blocks (`data/sample/` prepared by train.py at `--seq`; they repeat), with the same batch, for
`--steps` optimizer steps, each in a fresh process:

- `rankzero`: `train.py` as users run it — fast defaults (bf16 autocast over fp32 weights, TF32,
  fused AdamW, DataLoader workers, and on Ampere+ with Triton regional torch.compile: each decoder
  layer compiled), SDPA's causal path, packed blocks;
- `rankzero_eager`: the same with `--torch_compile false`;
- `rankzero_documents`: the same with `--mask_across_documents` (the backend rankzero picks is printed);
- `rankzero_fsdp`: the same with `--fsdp full_shard`: FSDP2 over a process group of one (world size 1),
  bf16 compute over fp32 shards with fp32 gradient reduction, eager (no compile under FSDP): what sharding
  itself costs on one GPU, where nothing is saved by it;
- `hf_defaults`: `transformers.Trainer` on the same blocks with `TrainingArguments(bf16=True)` and
  nothing else tuned (labels from DataCollatorForLanguageModeling, as run_clm.py does);
- `bare`: a plain loop — bf16 autocast, fp32 weights, TF32, fused AdamW, SDPA, gradient clipping at 1.0,
  batches already on the GPU: the ceiling for this model on this GPU.

Tokens/s per device are measured after `--warmup` steps (rankzero: from its own logs, whose first interval
already leaves the first step out) and MFU is computed for all of them with rankzero's formula and peak
table (rankzero/train/throughput.py), so the columns compare. With `--rounds` > 1 the systems alternate
within each round and ratios are medians of per-round ratios. Prints one JSON line per system and round,
then the table. Without CUDA it says so and exits with status 2 (the CPU figures are bench/train_bench.py's);
`--cpu_smoke` runs every system on CPU with the tiny config so that a test can check the harness itself.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SYSTEMS = ("rankzero", "rankzero_eager", "rankzero_documents", "rankzero_fsdp", "hf_defaults", "bare")
NAMES = {
    "rankzero": "rankzero train.py",
    "rankzero_eager": "rankzero train.py --torch_compile false",
    "rankzero_documents": "rankzero train.py --mask_across_documents",
    "rankzero_fsdp": "rankzero train.py --fsdp full_shard",
    "hf_defaults": "HF Trainer defaults (bf16=True)",
    "bare": "bare PyTorch loop",
}


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_config", default=str(REPO / "configs" / "model_config_1b.json"))
    parser.add_argument("--dataset", nargs="+", default=[str(REPO / "data/sample/ko.jsonl"), str(REPO / "data/sample/en.txt")])
    parser.add_argument("--tokenizer_path", default=None, help="default: train a 2048-token one on the dataset")
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=8, help="rows per step (lower it if memory runs out)")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20, help="steps left out of the measurement")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--systems", default="rankzero,rankzero_eager,hf_defaults,bare")
    parser.add_argument("--work_dir", default=None)
    parser.add_argument("--system", choices=("hf_defaults", "bare"), default=None,
                        help="run one baseline in this process and print its JSON line (used by the main run)")
    parser.add_argument("--prepared", default=None, help="with --system: the prepared dataset dir")
    parser.add_argument("--cpu_smoke", action="store_true", help="tiny config on CPU, seq 64, 6 steps: harness check")
    args = parser.parse_args()
    if args.cpu_smoke:
        args.model_config, args.seq, args.batch = str(REPO / "configs" / "model_config_tiny.json"), 64, 4
        args.steps, args.warmup = 6, 2
    args.device = "cpu" if args.cpu_smoke else "cuda"
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = sorted(set(args.systems) - set(SYSTEMS))
    if unknown:
        parser.error(f"--systems: unknown {unknown}; choose from {', '.join(SYSTEMS)}")
    return args


def require_cuda(args) -> None:
    import torch

    if not args.cpu_smoke and not torch.cuda.is_available():
        sys.stderr.write(
            f"gpu_bench.py needs a CUDA GPU, and torch {torch.__version__} sees none on this machine "
            "(torch.cuda.is_available() is False). Run it on a GPU machine with a CUDA build of torch; "
            "the CPU training figures come from bench/train_bench.py.\n")
        sys.exit(2)


def prepare(args, work: Path) -> str:
    """The tokenizer (trained once into `work` unless given) and the packed dataset at --seq; returns its dir."""
    if args.tokenizer_path is None:
        args.tokenizer_path = str(work / "tokenizer")
        if not (work / "tokenizer" / "tokenizer.json").is_file():
            subprocess.run([sys.executable, str(REPO / "scripts/train_tokenizer.py"), "--dataset", *args.dataset,
                            "--vocab_size", "2048", "--output_dir", args.tokenizer_path], check=True, capture_output=True)
    result = subprocess.run([sys.executable, str(REPO / "train.py"), "--tokenize_only", "--dataset", *args.dataset,
                             "--tokenizer_path", args.tokenizer_path, "--max_seq_length", str(args.seq),
                             "--cache_dir", str(work / "cache")], check=True, capture_output=True, text=True)
    return result.stdout.strip().splitlines()[-1].split("prepared: ", 1)[1]


def model_and_flops(args):
    import torch
    from transformers import AutoModelForCausalLM

    from rankzero.train.model import load_config
    from rankzero.train.throughput import flops_per_token, peak_flops

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(load_config(args.model_config), dtype=torch.float32,
                                             attn_implementation="sdpa")
    model.config.use_cache = False
    peak = peak_flops(torch.cuda.get_device_name(), True) if args.device == "cuda" else None
    return model, flops_per_token(model, args.seq), peak


def synchronize(args) -> None:
    import torch

    if args.device == "cuda":
        torch.cuda.synchronize()


def peak_memory_gb(args) -> float | None:
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**30, 2) if args.device == "cuda" else None


def result(system: str, tokens_per_second: float, flops: float, peak: float | None, **extra) -> dict:
    return {"system": system, "tokens_per_second_per_device": round(tokens_per_second, 1),
            "mfu": round(tokens_per_second * flops / peak, 4) if peak else None, **extra}


def one_gpu() -> dict:
    """The environment for each system: the first visible GPU only (one process on several GPUs would make the
    HF Trainer split every batch with nn.DataParallel)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
    return {**os.environ, "CUDA_VISIBLE_DEVICES": visible}


def run_system(system: str, command: list[str]) -> str:
    """One system's process on the first GPU; its stdout. A failure shows what the process printed last (a lent
    GPU's minutes are too few to rerun it only to see why)."""
    result = subprocess.run(command, capture_output=True, text=True, env=one_gpu())
    if result.returncode != 0:
        sys.stderr.write(f"{system} exited {result.returncode}:\n{result.stdout[-2000:]}\n{result.stderr[-6000:]}\n")
        raise SystemExit(f"{system} failed: see its output above")
    return result.stdout


def rankzero(args, work: Path, variant: str) -> dict:
    out = work / variant
    shutil.rmtree(out, ignore_errors=True)
    flags = {"rankzero": [], "rankzero_eager": ["--torch_compile", "false"],
             "rankzero_documents": ["--mask_across_documents"], "rankzero_fsdp": ["--fsdp", "full_shard"]}
    command = [sys.executable, str(REPO / "train.py"), "--dataset", *args.dataset, "--tokenizer_path", args.tokenizer_path,
               "--max_seq_length", str(args.seq), "--cache_dir", str(work / "cache"), "--model_config", args.model_config,
               "--output_dir", str(out), "--per_device_train_batch_size", str(args.batch),
               "--max_steps", str(args.steps), "--logging_steps", str(args.warmup), "--save_strategy", "no",
               "--report_to", "none", "--disable_tqdm", "true", "--seed", "0", *flags[variant]]
    printed = run_system(variant, command)
    config = json.loads((out / "run_config.json").read_text())
    logs = [h for h in json.loads((out / "trainer_state.json").read_text())["log_history"] if "tokens_per_second" in h]
    after = logs[1:] or logs  # the first interval still holds cuDNN/allocator warm-up after step 1
    per_device = statistics.mean(h["tokens_per_second_per_device"] for h in after)
    mfu = statistics.mean(h["mfu"] for h in after) if "mfu" in after[-1] else None
    assert "resolved configuration:" in printed
    if variant == "rankzero_fsdp":  # sharded for real, not a plain run under another name
        assert config["data_parallel"].startswith("FSDP2 full_shard over 1 process(es)"), config["data_parallel"]
    return {"system": variant, "tokens_per_second_per_device": round(per_device, 1),
            "mfu": round(mfu, 4) if mfu is not None else None, "attention": config["attn_implementation"],
            "peak_memory_gb": after[-1].get("peak_memory_gb")}


def hf_defaults(args, prepared: str) -> dict:
    from datasets import load_from_disk
    from transformers import AutoTokenizer, DataCollatorForLanguageModeling, Trainer, TrainerCallback, TrainingArguments

    model, flops, peak = model_and_flops(args)
    dataset = load_from_disk(prepared).select_columns(["input_ids"])
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer_path)

    class Clock(TrainerCallback):
        started = ended = None

        def on_step_end(self, a, state, control, **kwargs):
            if state.global_step == args.warmup:
                synchronize(args)
                Clock.started = time.perf_counter()

        def on_train_end(self, a, state, control, **kwargs):
            synchronize(args)
            Clock.ended = time.perf_counter()

    with tempfile.TemporaryDirectory() as out:
        training = TrainingArguments(output_dir=out, per_device_train_batch_size=args.batch, max_steps=args.steps,
                                     bf16=args.device == "cuda", use_cpu=args.device == "cpu", save_strategy="no",
                                     report_to="none", disable_tqdm=True, logging_steps=args.steps, seed=0)
        Trainer(model=model, args=training, train_dataset=dataset, callbacks=[Clock()],
                data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False)).train()
    tokens = (args.steps - args.warmup) * args.batch * args.seq
    return result("hf_defaults", tokens / (Clock.ended - Clock.started), flops, peak, peak_memory_gb=peak_memory_gb(args))


def bare(args, prepared: str) -> dict:
    import torch
    from datasets import load_from_disk

    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    model, flops, peak = model_and_flops(args)
    model = model.to(args.device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.0, fused=args.device == "cuda")
    blocks = torch.as_tensor(load_from_disk(prepared).with_format("numpy")["input_ids"], dtype=torch.long)
    blocks = blocks.to(args.device)
    generator = torch.Generator().manual_seed(0)
    started = None
    for step in range(args.steps):
        if step == args.warmup:
            synchronize(args)
            started = time.perf_counter()
        batch = blocks[torch.randint(len(blocks), (args.batch,), generator=generator).to(args.device)]
        with torch.autocast(args.device, dtype=torch.bfloat16, enabled=args.device == "cuda"):
            loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    synchronize(args)
    tokens = (args.steps - args.warmup) * args.batch * args.seq
    return result("bare", tokens / (time.perf_counter() - started), flops, peak, peak_memory_gb=peak_memory_gb(args))


def baseline(args, work: Path, prepared: str, system: str) -> dict:
    """One baseline in a fresh child process (`--system`)."""
    command = [sys.executable, str(Path(__file__).resolve()), "--system", system, "--prepared", prepared,
               "--model_config", args.model_config, "--tokenizer_path", args.tokenizer_path, "--seq", str(args.seq),
               "--batch", str(args.batch), "--steps", str(args.steps), "--warmup", str(args.warmup),
               *(["--cpu_smoke"] if args.cpu_smoke else [])]
    output = run_system(system, command)
    return json.loads(output.strip().splitlines()[-1])


def main() -> None:
    args = parse()
    require_cuda(args)
    if args.system:
        print(json.dumps((hf_defaults if args.system == "hf_defaults" else bare)(args, args.prepared)), flush=True)
        return

    import torch
    import transformers

    work = Path(args.work_dir or tempfile.mkdtemp(prefix="gpu_bench-"))
    prepared = prepare(args, work)
    device = torch.cuda.get_device_name() if args.device == "cuda" else "CPU (--cpu_smoke: no figures)"
    machine = {"device": device, "torch": torch.__version__, "cuda": torch.version.cuda,
               "transformers": transformers.__version__, "model_config": Path(args.model_config).name,
               "seq": args.seq, "batch": args.batch, "steps": args.steps, "warmup": args.warmup}
    print(json.dumps(machine), flush=True)
    rounds = []
    for round_index in range(args.rounds):
        results = {}
        for system in args.systems:
            if system.startswith("rankzero"):
                results[system] = rankzero(args, work, system)
            else:
                results[system] = baseline(args, work, prepared, system)
            print(json.dumps({"round": round_index + 1, **results[system]}), flush=True)
        rounds.append(results)

    reference = args.systems[0]
    print(f"\n{'system':<44} {'tokens/s/GPU':>13} {'MFU':>7} {f'{reference} ÷ it':>16}")
    for system in args.systems:
        speed = statistics.median(r[system]["tokens_per_second_per_device"] for r in rounds)
        mfus = [r[system]["mfu"] for r in rounds if r[system]["mfu"] is not None]
        mfu = f"{100 * statistics.median(mfus):.1f}%" if mfus else "n/a"
        ratio = statistics.median(r[reference]["tokens_per_second_per_device"] / r[system]["tokens_per_second_per_device"]
                                  for r in rounds)
        print(f"{NAMES[system]:<44} {speed:>13,.0f} {mfu:>7} {ratio:>16.3f}")


if __name__ == "__main__":
    main()
