"""Training throughput: rankzero's train.py against two baselines, in the same run.

    python bench/train_bench.py --smoke                  # seconds; CPU-friendly figures
    python bench/train_bench.py --model_config configs/model_config_125m.json --seq 1024 --batch 8 --steps 50
    python bench/train_bench.py --loss_memory            # peak RSS of --lm_loss chunked against full (below)
    python bench/train_bench.py --accumulation_memory --model_config configs/model_config_125m.json --seq 64
    python bench/train_bench.py --activation_memory --seq 1024    # the terms of docs/training.md's 8B table

1. **bare loop** — the same model, batch and sequence length in a plain PyTorch loop (AdamW, autocast
   bf16 on CUDA, no Trainer): the ceiling. Target: train.py ≥ 0.9× of it.
2. **run_clm-style HF Trainer** — the same documents without packing, each row one document
   (truncated to seq), padded per batch to the longest (DataCollatorForLanguageModeling), default
   TrainingArguments and DataLoader. Compared on real (non-padding) tokens per second.

4. **another checkout** (`--against DIR`, e.g. a git worktree of the commit before a change): its
   train.py under the first malloc, on the same data, as `rankzero@against`.

3. **rankzero under each malloc** in `--mallocs` (default `auto,system`): train.py runs under tcmalloc
   when it is installed (rankzero/malloc.py), the baselines under glibc; `system` is train.py under
   glibc too. The page faults of each train.py process tree are reported beside its tokens/s.

Tokens/s are measured after `--warmup` steps, real tokens only. Every system runs in a fresh process
(the baselines as `--system bare` / `--system run_clm` children), so none inherits another's warm
state. This VM's speed drifts by ±10% within a minute, so `--rounds` runs every system back to back
per round and each ratio is the median of the per-round ratios. Prints one JSON line per system and
round, then the medians.

`--loss_memory` measures the loss (rankzero/train/losses.py): train.py continuing a model with Llama-3's 128,256
vocabulary rows (`--pretrained_model`, saved here: configs/model_config_tiny.json with those rows, untied) on
packed rows of 1 x `--seq` (default 4,096 here) tokens for `--steps` (default 4 here), once with `--lm_loss full`
(HF's loss: the baseline) and once with `--lm_loss chunked`, per round. Each process's peak RSS (wait4's
ru_maxrss) and the logged losses of both are printed; the ratio is the median of the per-round ratios.

`--accumulation_memory` asks what gradient accumulation costs a rank under FSDP2 (2 gloo ranks, fp32, CPU): each
rank's peak RSS over `--steps` (default 3 here) steps of 4 micro-batches of `--batch` (default 1 here) rows, over its
peak with 1, as a share of the model's fp32 gradient bytes; rankzero reduce-scatters every micro-batch, the baseline
is the Trainer's own `no_sync` between micro-steps. `--activation_memory` measures the bytes per layer, token and
hidden unit a forward keeps by `--activation_checkpointing` mode, and the loss's per token and vocabulary entry: the
terms of docs/training.md's 8B table. Both are in bench/_measure.py, which says how RSS is made to mean "held".
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench._measure import accumulation_memory, activation_memory  # noqa: E402


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_config", default=str(REPO / "configs" / "model_config_tiny.json"))
    parser.add_argument("--dataset", nargs="+", default=[str(REPO / "data/sample/ko.jsonl"), str(REPO / "data/sample/en.txt")])
    parser.add_argument("--tokenizer_path", default=None, help="default: train a 2048-token one on the dataset")
    parser.add_argument("--seq", type=int, default=None, help="tokens a row; default 256 (512 with --eval)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--mallocs", default="auto,system",
                        help="RANKZERO_MALLOC settings train.py runs under, the first one compared with the baselines")
    parser.add_argument("--rounds", type=int, default=None,
                        help="every system once per round, ratios are medians; default 3 (1 with --loss_memory)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: seq 128, 30 steps, 1 round")
    parser.add_argument("--work_dir", default=None)
    parser.add_argument("--against", default=None, help="another rankzero checkout, run beside this one")
    parser.add_argument("--system", choices=("all", "bare", "run_clm"), default="all",
                        help="run one baseline in this process and print its JSON line (used by the main run)")
    parser.add_argument("--loss_memory", action="store_true", help="peak RSS of --lm_loss chunked against full")
    parser.add_argument("--accumulation_memory", action="store_true",
                        help="measure what 4 accumulation steps add to a rank's peak memory under FSDP2 instead")
    parser.add_argument("--activation_memory", action="store_true",
                        help="measure the activation and loss bytes docs/training.md's 8B table scales instead")
    args = parser.parse_args()
    if args.accumulation_memory:
        args.seq, args.batch = args.seq or 256, 1 if "--batch" not in sys.argv else args.batch
        args.steps = 3 if "--steps" not in sys.argv else args.steps
    args.seq = args.seq or (4096 if args.loss_memory else 256)
    args.rounds = args.rounds or (1 if args.loss_memory else 3)
    if args.loss_memory and "--steps" not in sys.argv:
        args.steps = 4
    if args.smoke:
        args.seq, args.steps, args.warmup, args.rounds = 128, 30, 5, 1
    return args


def environment_without_preload() -> dict:
    """This environment minus LD_PRELOAD: each system runs under the malloc the bench gives it, not ours."""
    return {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}


def rankzero_run(args, work: Path, malloc: str = "auto", checkout: Path = REPO) -> dict:
    """train.py itself, in a subprocess (RANKZERO_MALLOC=`malloc`); tokens/s from trainer_state.json after warm-up."""
    out = work / f"rankzero-{malloc.replace('/', '_')}{'-against' if checkout != REPO else ''}"
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, str(checkout / "train.py"), "--dataset", *args.dataset, "--tokenizer_path", args.tokenizer_path,
               "--max_seq_length", str(args.seq), "--cache_dir", str(work / "cache"), "--model_config", args.model_config,
               "--output_dir", str(out), "--per_device_train_batch_size", str(args.batch), "--max_steps", str(args.steps),
               "--logging_steps", str(args.warmup), "--save_strategy", "no", "--report_to", "none", "--disable_tqdm", "true"]
    env = environment_without_preload()
    faults_before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
    subprocess.run(command, check=True, capture_output=True, text=True, env={**env, "RANKZERO_MALLOC": malloc},
                   cwd=checkout)
    page_faults = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - faults_before
    logs = [h for h in json.loads((out / "trainer_state.json").read_text())["log_history"] if "tokens_per_second" in h]
    after = logs[1:] or logs  # the first interval holds start-up
    where = "" if checkout == REPO else f" of {checkout}"
    return {"system": f"rankzero train.py{where} (RANKZERO_MALLOC={malloc})", "page_faults": page_faults,
            "tokens_per_second": sum(h["tokens_per_second"] for h in after) / len(after),
            **({"mfu": after[-1]["mfu"]} if "mfu" in after[-1] else {})}


def sized_config(args):
    """The model config with the vocabulary grown to the tokenizer's, as train.py does (model.py)."""
    from transformers import AutoTokenizer

    from rankzero.train.model import load_config

    config = load_config(args.model_config)
    tokens = len(AutoTokenizer.from_pretrained(args.tokenizer_path))
    if tokens > config.vocab_size:
        config.vocab_size = -(-tokens // 64) * 64
    return config


def bare_loop(args, blocks) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(sized_config(args), dtype=torch.float32,
                                             attn_implementation="sdpa").to(device).train()
    model.config.use_cache = False
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=device == "cuda")
    use_bf16 = device == "cuda" and torch.cuda.is_bf16_supported()
    tokens, started = 0, None
    for step in range(args.steps):
        if step == args.warmup:
            if device == "cuda":
                torch.cuda.synchronize()
            started, tokens = time.perf_counter(), 0
        rows = blocks[(step * args.batch) % (len(blocks) - args.batch):][: args.batch]
        batch = torch.as_tensor(rows, dtype=torch.long, device=device)
        with torch.autocast(device, dtype=torch.bfloat16, enabled=use_bf16):
            loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        tokens += batch.numel()
    if device == "cuda":
        torch.cuda.synchronize()
    return {"system": "bare PyTorch loop", "tokens_per_second": tokens / (time.perf_counter() - started)}


def run_clm_style(args, documents) -> dict:
    import torch
    from datasets import Dataset
    from transformers import (AutoModelForCausalLM, AutoTokenizer, DataCollatorForLanguageModeling, Trainer,
                              TrainerCallback, TrainingArguments)

    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer_path)
    dataset = Dataset.from_dict({"input_ids": [d[: args.seq] for d in documents]})
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(sized_config(args))

    class Clock(TrainerCallback):
        tokens, started = 0, None

        def on_step_begin(self, a, state, control, **kw):
            if state.global_step == args.warmup:
                Clock.started, Clock.tokens = time.perf_counter(), 0

    class Counting(Trainer):
        def training_step(self, model, inputs, num_items_in_batch=None):
            Clock.tokens += int(inputs["attention_mask"].sum())
            return super().training_step(model, inputs, num_items_in_batch)

    with tempfile.TemporaryDirectory() as out:
        training = TrainingArguments(output_dir=out, per_device_train_batch_size=args.batch, max_steps=args.steps,
                                     save_strategy="no", report_to="none", disable_tqdm=True, logging_steps=10**6,
                                     bf16=torch.cuda.is_available() and torch.cuda.is_bf16_supported(),
                                     use_cpu=not torch.cuda.is_available())
        trainer = Counting(model=model, args=training, train_dataset=dataset, callbacks=[Clock()],
                           data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False))
        trainer.train()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return {"system": "HF Trainer, run_clm-style (no packing, pad to longest)",
            "tokens_per_second": Clock.tokens / (time.perf_counter() - Clock.started)}


def prepare_tokenizer(args, work: Path) -> None:
    """--tokenizer_path, or a 2048-token tokenizer trained once into `work` on --dataset."""
    if args.tokenizer_path is None:
        args.tokenizer_path = str(work / "tokenizer")
        if not (work / "tokenizer" / "tokenizer.json").is_file():
            subprocess.run([sys.executable, str(REPO / "scripts/train_tokenizer.py"), "--dataset", *args.dataset,
                            "--vocab_size", "2048", "--output_dir", args.tokenizer_path], check=True, capture_output=True)


def prepare_data(args, work: Path) -> tuple[str, str]:
    """The tokenizer (trained once into `work`) and the packed and unpacked datasets (cached in `work`)."""
    prepare_tokenizer(args, work)
    prepared = []
    for extra, seq in (([], args.seq), (["--no_packing"], 100000)):
        result = subprocess.run([sys.executable, str(REPO / "train.py"), "--tokenize_only", *extra, "--dataset",
                                 *args.dataset, "--tokenizer_path", args.tokenizer_path, "--max_seq_length", str(seq),
                                 "--cache_dir", str(work / "cache")], check=True, capture_output=True, text=True)
        prepared.append(result.stdout.strip().splitlines()[-1].split("prepared: ", 1)[1])
    return prepared[0], prepared[1]


def baseline_run(args, work: Path, system: str) -> dict:
    """One baseline in a fresh child process (`--system`), on the data this run prepared."""
    command = [sys.executable, str(Path(__file__).resolve()), "--system", system, "--work_dir", str(work),
               "--model_config", args.model_config, "--dataset", *args.dataset, "--tokenizer_path", args.tokenizer_path,
               "--seq", str(args.seq), "--batch", str(args.batch), "--steps", str(args.steps), "--warmup", str(args.warmup)]
    env = environment_without_preload()
    result = subprocess.run(command, check=True, capture_output=True, text=True, env=env)
    return json.loads(result.stdout.strip().splitlines()[-1])


def loss_memory(args, work: Path) -> None:
    """--loss_memory: train.py's peak RSS and losses with --lm_loss full (the baseline) and chunked, per round."""
    import torch
    from transformers import AutoModelForCausalLM

    from rankzero.train.model import load_config

    config = load_config(args.model_config)
    config.vocab_size, config.hidden_size, config.tie_word_embeddings = 128_256, 64, False
    config.max_position_embeddings = max(config.max_position_embeddings, args.seq)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(work / "llama3-vocab")
    parameters = sum(p.numel() for p in model.parameters())
    runs: dict[str, list[dict]] = {"full": [], "chunked": []}
    for round_ in range(args.rounds):
        for loss in (["full", "chunked"] if round_ % 2 == 0 else ["chunked", "full"]):
            out = work / f"run-{loss}"
            shutil.rmtree(out, ignore_errors=True)
            command = [sys.executable, str(REPO / "train.py"), "--dataset", *args.dataset, "--tokenizer_path",
                       args.tokenizer_path, "--max_seq_length", str(args.seq), "--cache_dir", str(work / "cache"),
                       "--pretrained_model", str(work / "llama3-vocab"), "--output_dir", str(out), "--lm_loss", loss,
                       "--per_device_train_batch_size", "1", "--max_steps", str(args.steps), "--logging_steps", "1",
                       "--save_strategy", "no", "--report_to", "none", "--dataloader_num_workers", "0"]
            with open(work / "stderr.txt", "w") as errors:  # a file: a full pipe would stall the run
                process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors, env=environment_without_preload())
            _, status, usage = os.wait4(process.pid, 0)  # this child's own peak RSS, not the largest child's
            if status:
                raise SystemExit(f"train.py --lm_loss {loss} failed:\n{(work / 'stderr.txt').read_text()}")
            logged = json.loads((out / "trainer_state.json").read_text())["log_history"]
            runs[loss].append({"peak_rss_gib": round(usage.ru_maxrss / 2**20, 3),
                               "losses": [entry["loss"] for entry in logged if "loss" in entry]})
            print(json.dumps({"round": round_ + 1, "lm_loss": loss, **runs[loss][-1]}), flush=True)
    difference = max(abs(a - b) for full, chunked in zip(runs["full"], runs["chunked"])
                     for a, b in zip(full["losses"], chunked["losses"]))
    print(json.dumps({"device": f"CPU x{os.cpu_count()}", "parameters": parameters, "vocab_size": 128_256,
                      "rows": f"1 x {args.seq}", "steps": args.steps, "rounds": args.rounds,
                      "peak_rss_gib": {loss: statistics.median(r["peak_rss_gib"] for r in rows)
                                       for loss, rows in runs.items()},
                      "chunked_vs_full": round(statistics.median(c["peak_rss_gib"] / f["peak_rss_gib"]
                                                                 for f, c in zip(runs["full"], runs["chunked"])), 3),
                      "largest_loss_difference": difference}))


def main() -> None:
    args = parse()
    if args.activation_memory:
        print(json.dumps(activation_memory(args.seq)), flush=True)
        return
    if args.accumulation_memory:
        import torch
        from transformers import AutoModelForCausalLM

        work = Path(args.work_dir or tempfile.mkdtemp(prefix="accumulation-bench-"))
        try:
            prepare_tokenizer(args, work)
            with torch.device("meta"):
                gradient_bytes = 4 * AutoModelForCausalLM.from_config(sized_config(args)).num_parameters()
            print(json.dumps(accumulation_memory(args, work, gradient_bytes)), flush=True)
        finally:
            if args.work_dir is None:
                shutil.rmtree(work, ignore_errors=True)
        return
    if args.loss_memory:
        work = Path(tempfile.mkdtemp(prefix="loss-memory-bench-"))  # a tokenizer, a model, a prepared cache, runs
        try:
            prepare_data(args, work)
            loss_memory(args, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="train_bench-"))
    packed, unpacked = prepare_data(args, work)
    if args.system != "all":
        from datasets import load_from_disk

        if args.system == "bare":
            result = bare_loop(args, load_from_disk(packed)["input_ids"])
        else:
            result = run_clm_style(args, load_from_disk(unpacked)["input_ids"])
        print(json.dumps(result), flush=True)
        return

    import torch

    machine = {"device": torch.cuda.get_device_name() if torch.cuda.is_available() else f"CPU x{os.cpu_count()}",
               "seq": args.seq, "batch": args.batch, "steps": args.steps, "model_config": Path(args.model_config).name}
    mallocs = [m.strip() for m in args.mallocs.split(",") if m.strip()]
    names = [f"rankzero[{m}]" for m in mallocs] + ["bare", "run_clm"] + (["rankzero@against"] if args.against else [])
    rounds = []
    for round_index in range(args.rounds):
        results = [rankzero_run(args, work, m) for m in mallocs]
        results += [baseline_run(args, work, "bare"), baseline_run(args, work, "run_clm")]
        if args.against:
            results.append(rankzero_run(args, work, mallocs[0], Path(args.against).resolve()))
        for result in results:
            print(json.dumps({**machine, "round": round_index + 1, **result}), flush=True)
        rounds.append([r["tokens_per_second"] for r in results])

    def median_ratio(i: int, j: int) -> float:
        return round(statistics.median(r[i] / r[j] for r in rounds), 3)

    bare, run_clm = len(mallocs), len(mallocs) + 1
    summary = {"rounds": args.rounds,
               "tokens_per_second": {name: round(statistics.median(r[i] for r in rounds)) for i, name in enumerate(names)},
               "rankzero_vs_bare": median_ratio(0, bare), "rankzero_vs_run_clm": median_ratio(0, run_clm)}
    if args.against:
        summary["rankzero_vs_against"] = median_ratio(0, len(names) - 1)
    for i, name in enumerate(names[1:len(mallocs)], start=1):
        summary[f"{name}_vs_bare"] = median_ratio(i, bare)
        summary[f"{names[0]}_vs_{name}"] = median_ratio(0, i)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
