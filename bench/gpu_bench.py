"""GPU training throughput in one call: FSDP2 eager, + compile, + fused loss, + selective checkpointing (+ float8),
on the 1B config and an 8B-shaped slice, each against the HF Trainer on the same model.

    python bench/gpu_bench.py                          # issue 44's table: both models, every arm, within --budget_s
    python bench/gpu_bench.py --models 1b --systems rankzero_fsdp_eager,rankzero_fsdp --steps 60
    python bench/gpu_bench.py --models 1b --systems rankzero,rankzero_eager,rankzero_documents,hf_defaults,bare
    python bench/gpu_bench.py --cpu_smoke              # tiny shapes on CPU: checks the harness, measures nothing

On one CUDA GPU every system trains the same model from the same seed on the same packed blocks of
`data/sample/`, with the same batch, for `--steps` steps, each in a fresh process. `--models`: `1b`
(`--model_config`, seq 2048, batch 8) and `8b_slice` (SLICE: Llama-3.1-8B's widths and 128,256-token vocabulary,
untied, with as many layers as fit the GPU by slice_layers' arithmetic; seq 4096, batch 2, every layer
checkpointed, as in the 8B recipe; the sample tokenizer padded with unused tokens to 128,256 entries, so that
rankzero builds the full embedding and head from scratch). `--systems` (RANKZERO holds their train.py flags):
FSDP2 over a process group of one, each arm adding to the one before — eager, compiled, `--lm_loss liger`,
`--activation_checkpointing selective` in place of full checkpointing, `--float8` (Hopper only);
`hf_defaults`, `transformers.Trainer` with `TrainingArguments(bf16=True)` and the model's checkpointing, nothing
else tuned (labels from DataCollatorForLanguageModeling, as run_clm.py); on request rankzero without FSDP and
`bare`, a plain loop (bf16 autocast, TF32, fused AdamW, SDPA).

A device loan is short: each system runs on both models before the next system, each result is printed as a
JSON line when measured, a run that fails (a flag this checkout lacks, out of memory) shows its last output and
the rest go on (exit status 1 at the end), and after `--budget_s` the runs left are skipped. Tokens/s per device
after `--warmup` steps (rankzero: its logs, whose first interval leaves the first step out), MFU by rankzero's
formula and peak table for every system, peak memory as torch's max allocated; medians over `--rounds`.
Without CUDA it says so and exits 2 (CPU figures: bench/train_bench.py).
"""

from __future__ import annotations

import argparse
import dataclasses
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

FSDP = ["--fsdp", "full_shard"]
COMPILED = [*FSDP, "--torch_compile", "true"]  # explicit: compiled on the CPU smoke path too
RANKZERO = {  # system: (train.py flags, what the table calls it)
    "rankzero": ([], "rankzero train.py"),
    "rankzero_eager": (["--torch_compile", "false"], "rankzero train.py --torch_compile false"),
    "rankzero_documents": (["--mask_across_documents"], "rankzero train.py --mask_across_documents"),
    "rankzero_fsdp_eager": ([*FSDP, "--torch_compile", "false"], "FSDP2 eager"),
    "rankzero_fsdp": (COMPILED, "FSDP2 + compile"),
    "rankzero_fsdp_liger": ([*COMPILED, "--lm_loss", "liger"], "FSDP2 + compile + fused loss"),
}
SELECTIVE_AC = [*RANKZERO["rankzero_fsdp_liger"][0], "--activation_checkpointing", "selective"]
RANKZERO["rankzero_fsdp_selective"] = (SELECTIVE_AC, "FSDP2 + compile + fused loss + selective AC")
RANKZERO["rankzero_fsdp_float8"] = ([*SELECTIVE_AC, "--float8"], "FSDP2 + compile + fused loss + selective AC + float8")
SELECTIVE = ("rankzero_fsdp_selective", "rankzero_fsdp_float8")  # their checkpointing replaces the model's
NAMES = {**{name: label for name, (_, label) in RANKZERO.items()},
         "hf_defaults": "HF Trainer defaults (bf16=True)", "bare": "bare PyTorch loop"}
ISSUE_44 = ("rankzero_fsdp_eager", "rankzero_fsdp", "hf_defaults", "rankzero_fsdp_liger", "rankzero_fsdp_selective",
            "rankzero_fsdp_float8")
MODELS = ("1b", "8b_slice")
# Llama-3.1-8B's shape; the CPU smoke path keeps its vocabulary and its proportions at a tiny width.
SLICE = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
         "num_key_value_heads": 8, "vocab_size": 128256, "tie_word_embeddings": False, "rms_norm_eps": 1e-5,
         "max_position_embeddings": 8192, "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0},
         "hidden_act": "silu", "initializer_range": 0.02, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 3}
SMOKE_SLICE = {"hidden_size": 64, "intermediate_size": 224, "num_attention_heads": 4, "num_key_value_heads": 1}


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help=f"from {', '.join(MODELS)}")
    parser.add_argument("--model_config", default=str(REPO / "configs" / "model_config_1b.json"), help="the 1b model")
    parser.add_argument("--dataset", nargs="+", default=[str(REPO / "data/sample/ko.jsonl"), str(REPO / "data/sample/en.txt")])
    parser.add_argument("--tokenizer_path", default=None, help="default: train a 2048-token one on the dataset")
    parser.add_argument("--seq", type=int, default=2048, help="the 1b model's sequence length")
    parser.add_argument("--batch", type=int, default=8, help="the 1b model's rows per step")
    parser.add_argument("--slice_seq", type=int, default=4096)
    parser.add_argument("--slice_batch", type=int, default=2)
    parser.add_argument("--slice_layers", type=int, default=None, help="default: as many as fit (slice_layers)")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=10, help="steps left out of the measurement")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--systems", default=",".join(ISSUE_44))
    parser.add_argument("--budget_s", type=float, default=720, help="start no run after this many seconds")
    parser.add_argument("--work_dir", default=None)
    parser.add_argument("--system", choices=("hf_defaults", "bare"), default=None,
                        help="run one baseline in this process and print its JSON line (used by the main run)")
    parser.add_argument("--prepared", default=None, help="with --system: the prepared dataset dir")
    parser.add_argument("--checkpointing", action="store_true", help="with --system: every layer checkpointed")
    parser.add_argument("--cpu_smoke", action="store_true", help="tiny shapes on CPU, seq 64, 6 steps: harness check")
    args = parser.parse_args()
    if args.cpu_smoke and args.system is None:
        args.model_config, args.seq, args.batch = str(REPO / "configs" / "model_config_tiny.json"), 64, 4
        args.slice_seq, args.slice_batch, args.slice_layers = 64, 2, args.slice_layers or 2
        args.steps, args.warmup = 6, 2
    args.device = "cpu" if args.cpu_smoke else "cuda"
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = sorted(set(args.systems) - set(NAMES)) + sorted(set(args.models) - set(MODELS))
    if unknown:
        parser.error(f"unknown {unknown}: --systems from {', '.join(NAMES)}; --models from {', '.join(MODELS)}")
    return args


def require_cuda(args) -> None:
    import torch

    if not args.cpu_smoke and not torch.cuda.is_available():
        sys.stderr.write(
            f"gpu_bench.py needs a CUDA GPU, and torch {torch.__version__} sees none on this machine "
            "(torch.cuda.is_available() is False). Run it on a GPU machine with a CUDA build of torch; "
            "the CPU training figures come from bench/train_bench.py.\n")
        sys.exit(2)


def widened(tokenizer_path: str, work: Path, size: int) -> str:
    """The tokenizer with unused tokens added up to `size` entries: rankzero gives a model built from scratch the
    tokenizer's vocabulary, and the slice needs Llama-3's 128,256 rows (the text never holds the added tokens)."""
    from transformers import AutoTokenizer

    out = work / f"tokenizer-{size}"
    if not (out / "tokenizer.json").is_file():
        loaded = AutoTokenizer.from_pretrained(tokenizer_path)
        loaded.add_tokens([f"<unused_{index}>" for index in range(size - len(loaded))])
        loaded.save_pretrained(out)
    return str(out)


def prepare(args, tokenizer_path: str, seq: int, work: Path) -> str:
    """The dataset packed at `seq` with `tokenizer_path` (train.py --tokenize_only); returns its dir."""
    result = subprocess.run([sys.executable, str(REPO / "train.py"), "--tokenize_only", "--dataset", *args.dataset,
                             "--tokenizer_path", tokenizer_path, "--max_seq_length", str(seq),
                             "--cache_dir", str(work / "cache")], check=True, capture_output=True, text=True)
    return result.stdout.strip().splitlines()[-1].split("prepared: ", 1)[1]


@dataclasses.dataclass
class Model:
    name: str
    config: str  # a model config JSON
    seq: int
    batch: int
    checkpointing: bool  # every decoder layer recomputed in the backward (the selective arms replace it)
    tokenizer: str
    prepared: str


def slice_parameters_per_layer(shape: dict) -> int:
    hidden, heads, kv = shape["hidden_size"], shape["num_attention_heads"], shape["num_key_value_heads"]
    attention = 2 * hidden * hidden + 2 * hidden * kv * (hidden // heads)  # q and o; k and v (grouped)
    return attention + 3 * hidden * shape["intermediate_size"] + 2 * hidden  # gate, up, down; two norms


def slice_layers(memory_bytes: int, seq: int, batch: int) -> int:
    """Decoder layers of the 8B shape within 85% of `memory_bytes` (the rest: CUDA context, workspaces,
    fragmentation). Each layer: 16 bytes a parameter (fp32 weight, gradient, AdamW's two moments; 218.1M of them)
    and ~17 bytes x tokens x hidden of activations (what selective checkpointing keeps: half of the ~34 a layer
    saves unrecomputed in bf16, Korthikanti et al. 2022; full checkpointing keeps less). Once: the untied
    embedding and head (2 x 128,256 x 4,096 parameters at 16 bytes), the logits in bf16 and fp32 and their fp32
    gradient (10 bytes x tokens x vocabulary), and one layer's recompute (34 x tokens x hidden)."""
    hidden, vocabulary, tokens = SLICE["hidden_size"], SLICE["vocab_size"], seq * batch
    per_layer = 16 * slice_parameters_per_layer(SLICE) + 17 * tokens * hidden
    once = 16 * 2 * vocabulary * hidden + 10 * tokens * vocabulary + 34 * tokens * hidden
    return max(1, int((0.85 * memory_bytes - once) // per_layer))


def models(args, work: Path) -> list[Model]:
    import torch

    base = args.tokenizer_path or str(work / "tokenizer")  # default: 2048 tokens, trained once on the dataset
    if not (Path(base) / "tokenizer.json").is_file():
        subprocess.run([sys.executable, str(REPO / "scripts/train_tokenizer.py"), "--dataset", *args.dataset,
                        "--vocab_size", "2048", "--output_dir", base], check=True, capture_output=True)
    chosen = []
    for name in args.models:
        if name == "1b":
            chosen.append(Model(name, args.model_config, args.seq, args.batch, False, base,
                                prepare(args, base, args.seq, work)))
            continue
        layers = args.slice_layers or slice_layers(torch.cuda.get_device_properties(0).total_memory,
                                                   args.slice_seq, args.slice_batch)
        config, wide = work / f"8b_slice-{layers}.json", widened(base, work, SLICE["vocab_size"])
        config.write_text(json.dumps({**SLICE, **(SMOKE_SLICE if args.cpu_smoke else {}), "num_hidden_layers": layers}))
        chosen.append(Model(name, str(config), args.slice_seq, args.slice_batch, True, wide,
                            prepare(args, wide, args.slice_seq, work)))
    return chosen


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


def result(args, system: str, tokens_per_second: float, flops: float, peak: float | None) -> dict:
    import torch

    return {"system": system, "tokens_per_second_per_device": round(tokens_per_second, 1),
            "mfu": round(tokens_per_second * flops / peak, 4) if peak else None,
            "peak_memory_gb": round(torch.cuda.max_memory_allocated() / 2**30, 2) if args.device == "cuda" else None}


def one_gpu() -> dict:
    """The environment for each system: the first visible GPU only (one process on several GPUs would make the
    HF Trainer split every batch with nn.DataParallel)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
    return {**os.environ, "CUDA_VISIBLE_DEVICES": visible}


def run_system(system: str, command: list[str]) -> str | None:
    """One system's process on the first GPU; its stdout, or None when it failed, after showing what it printed
    last (a lent GPU's minutes are too few to rerun it only to see why, and the other runs go on)."""
    result = subprocess.run(command, capture_output=True, text=True, env=one_gpu())
    if result.returncode != 0:
        sys.stderr.write(f"{system} exited {result.returncode}:\n{result.stdout[-2000:]}\n{result.stderr[-6000:]}\n")
        return None
    return result.stdout


def rankzero(args, work: Path, variant: str, model: Model) -> dict:
    import torch

    flags = list(RANKZERO[variant][0])
    if variant == "rankzero_fsdp_float8" and (args.device != "cuda" or torch.cuda.get_device_capability() < (8, 9)):
        return {"system": variant, "model": model.name, "skipped": "float8 matmuls need compute capability 8.9+"}
    if model.checkpointing and variant not in SELECTIVE:
        flags += ["--gradient_checkpointing", "true"]
    out = work / f"{model.name}-{variant}"
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, str(REPO / "train.py"), "--dataset", *args.dataset, "--tokenizer_path", model.tokenizer,
               "--max_seq_length", str(model.seq), "--cache_dir", str(work / "cache"), "--model_config", model.config,
               "--output_dir", str(out), "--per_device_train_batch_size", str(model.batch),
               "--max_steps", str(args.steps), "--logging_steps", str(args.warmup), "--save_strategy", "no",
               "--report_to", "none", "--disable_tqdm", "true", "--seed", "0", *flags]
    if (printed := run_system(f"{model.name} {variant}", command)) is None:
        return {"system": variant, "model": model.name, "failed": "exited non-zero (its output is above)"}
    config, state = (json.loads((out / name).read_text()) for name in ("run_config.json", "trainer_state.json"))
    logs = [h for h in state["log_history"] if "tokens_per_second" in h]
    after = logs[1:] or logs  # the first interval still holds the compile and cuDNN/allocator warm-up
    per_device = statistics.mean(h["tokens_per_second_per_device"] for h in after)
    mfu = statistics.mean(h["mfu"] for h in after) if "mfu" in after[-1] else None
    shutil.rmtree(out)  # the saved model: the slice's is ~25 GB, and the next arm writes its own
    assert "resolved configuration:" in printed
    if "--fsdp" in flags:  # sharded for real, not a plain run under another name
        assert config["data_parallel"].startswith("FSDP2 full_shard over 1 process(es)"), config["data_parallel"]
    return {"system": variant, "model": model.name, "tokens_per_second_per_device": round(per_device, 1),
            "mfu": round(mfu, 4) if mfu is not None else None, "peak_memory_gb": after[-1].get("peak_memory_gb"),
            "torch_compile": config["torch_compile"], "data_parallel": config["data_parallel"],
            "parameters": config["model_parameters"]}


def hf_defaults(args, prepared: str) -> dict:
    from datasets import load_from_disk
    from transformers import AutoTokenizer, DataCollatorForLanguageModeling, Trainer, TrainerCallback, TrainingArguments

    model, flops, peak = model_and_flops(args)
    dataset = load_from_disk(prepared).select_columns(["input_ids"])
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer_path)

    class Clock(TrainerCallback):
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
                                     report_to="none", disable_tqdm=True, logging_steps=args.steps, seed=0,
                                     gradient_checkpointing=args.checkpointing)
        Trainer(model=model, args=training, train_dataset=dataset, callbacks=[Clock()],
                data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False)).train()
    tokens = (args.steps - args.warmup) * args.batch * args.seq
    return result(args, "hf_defaults", tokens / (Clock.ended - Clock.started), flops, peak)


def bare(args, prepared: str) -> dict:
    import torch
    from datasets import load_from_disk

    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    model, flops, peak = model_and_flops(args)
    model = model.to(args.device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.0, fused=args.device == "cuda")
    blocks = torch.as_tensor(load_from_disk(prepared).with_format("numpy")["input_ids"], dtype=torch.long).to(args.device)
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
    return result(args, "bare", tokens / (time.perf_counter() - started), flops, peak)


def baseline(args, system: str, model: Model) -> dict:
    """One baseline in a fresh child process (`--system`)."""
    command = [sys.executable, str(Path(__file__).resolve()), "--system", system, "--prepared", model.prepared,
               "--model_config", model.config, "--tokenizer_path", model.tokenizer, "--seq", str(model.seq),
               "--batch", str(model.batch), "--steps", str(args.steps), "--warmup", str(args.warmup),
               *(["--checkpointing"] if model.checkpointing else []), *(["--cpu_smoke"] if args.cpu_smoke else [])]
    output = run_system(f"{model.name} {system}", command)
    if output is None:
        return {"system": system, "model": model.name, "failed": "exited non-zero (its output is above)"}
    return {**json.loads(output.strip().splitlines()[-1]), "model": model.name}


def table(args, chosen: list[Model], rounds: list[dict]) -> None:
    """Per model: each system's medians of tokens/s per GPU, MFU and peak memory, and its tokens/s over the HF
    Trainer's on the same model."""
    def median(runs, key, form):
        values = [r[key] for r in runs if r.get(key) is not None]
        return form(statistics.median(values)) if values else "n/a"

    for model in chosen:
        rows = {system: [r[(model.name, system)] for r in rounds] for system in args.systems}
        speeds = {system: statistics.median(r["tokens_per_second_per_device"] for r in runs)
                  for system, runs in rows.items() if all("tokens_per_second_per_device" in r for r in runs)}
        layers = json.loads(Path(model.config).read_text())["num_hidden_layers"]
        print(f"\n{model.name}: {Path(model.config).name}, {layers} layers, seq {model.seq}, batch {model.batch}"
              f"{', every layer checkpointed' if model.checkpointing else ''}")
        print(f"{'system':<56} {'tokens/s/GPU':>13} {'MFU':>7} {'peak GB':>8} {'x HF Trainer':>13}")
        for system, runs in rows.items():
            if system not in speeds:
                print(f"{NAMES[system]:<56} {runs[-1].get('skipped') or runs[-1].get('failed')}")
                continue
            ratio = f"{speeds[system] / speeds['hf_defaults']:.3f}" if "hf_defaults" in speeds else "n/a"
            print(f"{NAMES[system]:<56} {speeds[system]:>13,.0f} {median(runs, 'mfu', lambda v: f'{100 * v:.1f}%'):>7} "
                  f"{median(runs, 'peak_memory_gb', lambda v: f'{v:.1f}'):>8} {ratio:>13}")


def main() -> None:
    started = time.monotonic()
    args = parse()
    require_cuda(args)
    if args.system:
        print(json.dumps((hf_defaults if args.system == "hf_defaults" else bare)(args, args.prepared)), flush=True)
        return

    import torch
    import transformers

    work = Path(args.work_dir or tempfile.mkdtemp(prefix="gpu_bench-"))
    chosen = models(args, work)
    device = torch.cuda.get_device_name() if args.device == "cuda" else "CPU (--cpu_smoke: no figures)"
    print(json.dumps({"device": device, "torch": torch.__version__, "cuda": torch.version.cuda,
                      "transformers": transformers.__version__, "steps": args.steps, "warmup": args.warmup,
                      "models": {m.name: [Path(m.config).name, m.seq, m.batch] for m in chosen}}), flush=True)
    # What decides the most first: each system on every model before the next system.
    plan = [(model, system) for system in args.systems for model in chosen]
    rounds, broken = [], False
    for round_index in range(args.rounds):
        results = {}
        for model, system in plan:
            if time.monotonic() - started > args.budget_s:
                row = {"system": system, "model": model.name, "skipped": f"past --budget_s {args.budget_s:g}"}
            else:
                row = rankzero(args, work, system, model) if system in RANKZERO else baseline(args, system, model)
            results[(model.name, system)], broken = row, broken or "failed" in row
            print(json.dumps({"round": round_index + 1, **row}), flush=True)
        rounds.append(results)
    table(args, chosen, rounds)
    if broken:
        sys.exit(1)


if __name__ == "__main__":
    main()
