"""Training throughput: rankzero's train.py against two baselines, in the same run.

    python bench/train_bench.py --smoke                  # seconds; CPU-friendly figures
    python bench/train_bench.py --model_config configs/model_config_125m.json --seq 1024 --batch 8 --steps 50
    python bench/train_bench.py --eval                   # what bits per byte cost an evaluation (below)
    python bench/train_bench.py --benchmarks             # what --benchmarks costs the demo run (below)
    python bench/train_bench.py --eval --vocab_size 32000 --rounds 7 --seq 1024 --rows 200

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

`--benchmarks`: what scoring benchmarks in the loop costs the demo run (configs/recipes/demo.yaml): train.py with
`--benchmarks` at its defaults against the same command without (the baseline), alternating per round; two files of
`--benchmark_items` items each. Prints each run's wall time, the scoring's seconds (from its log history), their
share of the run and seconds per 1,000 items.

`--eval` asks another question: what bits per byte and per-source scores cost an evaluation —
RankzeroTrainer.evaluate() with them against the Trainer's own loss-only evaluation (the baseline: the
same trainer without `scores`). A tokenizer of `--vocab_size` is trained on data/sample/, the data prepared
by train.py (`--eval_dataset`, default ko_real_dev's three genres, each a source; rows of `--seq`, default
512 here), and a model of configs/model_config_tiny.json built with its vocabulary. Each of `--rounds`
(default 5 here) evaluates the first `--rows` rows once without and once with the scores, in alternating
order; the ratio is the median of the per-round ratios. Also prints the scores of the last evaluation (per
source), from a model that has not been trained: what they look like, not what they are worth.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
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
GENRES = Path("/work/shared/corpora/ko_real_dev")


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
                        help="every system once per round, ratios are medians; default 3 (5 with --eval)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: seq 128, 30 steps, 1 round")
    parser.add_argument("--work_dir", default=None)
    parser.add_argument("--against", default=None, help="another rankzero checkout, run beside this one")
    parser.add_argument("--system", choices=("all", "bare", "run_clm"), default="all",
                        help="run one baseline in this process and print its JSON line (used by the main run)")
    parser.add_argument("--eval", action="store_true", help="measure evaluation with bits per byte instead")
    parser.add_argument("--eval_dataset", nargs="+", default=[str(GENRES / f"{name}.jsonl") for name in
                                                               ("dialogue", "encyclopedia", "qa")])
    parser.add_argument("--benchmarks", action="store_true", help="measure --benchmarks on the demo run instead")
    parser.add_argument("--benchmark_items", type=int, default=1000, help="items in each --benchmarks file made")
    parser.add_argument("--vocab_size", type=int, default=8000, help="the tokenizer --eval trains")
    parser.add_argument("--rows", type=int, default=96, help="validation rows --eval evaluates (the first ones)")
    args = parser.parse_args()
    args.seq = args.seq or (512 if args.eval else 256)
    args.rounds = args.rounds or (5 if args.eval else 3)
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


def prepare_data(args, work: Path) -> tuple[str, str]:
    """The tokenizer (trained once into `work`) and the packed and unpacked datasets (cached in `work`)."""
    if args.tokenizer_path is None:
        args.tokenizer_path = str(work / "tokenizer")
        if not (work / "tokenizer" / "tokenizer.json").is_file():
            subprocess.run([sys.executable, str(REPO / "scripts/train_tokenizer.py"), "--dataset", *args.dataset,
                            "--vocab_size", "2048", "--output_dir", args.tokenizer_path], check=True, capture_output=True)
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


def eval_cost(args, work: Path) -> None:
    """--eval: RankzeroTrainer.evaluate() with bits per byte and per-source scores against the loss-only one."""
    import torch
    from transformers import AutoTokenizer

    from rankzero.tokenizer_trainer import train_tokenizer
    from rankzero.train.evaluation import EvalScores, source_names, token_bytes
    from rankzero.train.model import load_config
    from rankzero.train.run import load_validation
    from rankzero.train.throughput import ThroughputCallback
    from rankzero.train.trainer import RankzeroTrainer
    from rankzero.train.training_args import TrainingArguments
    from rankzero.train.collator import BlockCollator

    texts = [json.loads(line)["text"] for line in (REPO / "data/sample/ko.jsonl").read_text().splitlines()]
    train_tokenizer(texts + (REPO / "data/sample/en.txt").read_text().splitlines(), args.vocab_size, work / "tok")
    prepared = subprocess.run(
        [sys.executable, REPO / "train.py", "--tokenize_only", "--dataset", REPO / "data/sample/ko.jsonl",
         "--eval_dataset", *args.eval_dataset, "--tokenizer_path", work / "tok", "--max_seq_length",
         str(args.seq), "--cache_dir", work / "cache"], capture_output=True, text=True, check=True)
    prepared_dir = Path(prepared.stdout.strip().splitlines()[-1].removeprefix("prepared: "))
    tokenizer = AutoTokenizer.from_pretrained(work / "tok")
    eval_dataset = load_validation(prepared_dir, "pretrain")
    eval_dataset = eval_dataset.select(range(min(args.rows, len(eval_dataset))))
    manifest = json.loads((prepared_dir / "manifest.json").read_text())

    from transformers import AutoModelForCausalLM

    config = load_config(REPO / "configs/model_config_tiny.json")
    config.vocab_size = len(tokenizer)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    training = TrainingArguments(output_dir=str(work / "run"), per_device_eval_batch_size=args.batch,
                                 report_to="none", prediction_loss_only=True, dataloader_num_workers=0,
                                 disable_tqdm=True, remove_unused_columns=False)  # as train.py sets it

    def trainer(scores):
        return RankzeroTrainer(model=model, args=training, eval_dataset=eval_dataset,
                               data_collator=BlockCollator(pad_token_id=tokenizer.pad_token_id or 0),
                               processing_class=tokenizer, meter=ThroughputCallback(model, args.seq),
                               scores=scores)

    systems = {"loss only (Trainer)": trainer(None),
               "bits/byte + per source": trainer(EvalScores(token_bytes(tokenizer), source_names(manifest)))}
    for each in systems.values():
        each.evaluate()  # warm-up: the first evaluation prepares the model and builds the DataLoader
    seconds: dict[str, list[float]] = {name: [] for name in systems}
    metrics = {}
    for round_ in range(args.rounds):
        names = list(systems) if round_ % 2 == 0 else list(reversed(systems))
        for name in names:
            started = time.perf_counter()
            metrics[name] = systems[name].evaluate()
            seconds[name].append(time.perf_counter() - started)
    baseline, scored = seconds.values()
    ratios = [b / a for a, b in zip(baseline, scored)]
    print(json.dumps({"rows": len(eval_dataset), "tokens": len(eval_dataset) * args.seq,
                      "vocab_size": len(tokenizer), "seconds": seconds, "ratio_median": statistics.median(ratios),
                      "ratios": [round(r, 3) for r in ratios]}))
    baseline_loss = metrics[list(systems)[0]]["eval_loss"]
    print(json.dumps({"baseline eval_loss": baseline_loss, **{key: value for key, value in metrics[list(systems)[1]].items()
                      if "bits_per_byte" in key or "loss" in key}}, ensure_ascii=False))



def benchmark_cost(args, work: Path) -> None:
    """--benchmarks: the demo run with --benchmarks at its defaults against the same run without. The files, a
    KMMLU-style CSV and a KoBEST-style JSONL, are cut from ko_real_dev's paragraphs (real questions' length)."""
    texts = [part.strip() for path in sorted(GENRES.glob("*.jsonl")) for line in path.open(encoding="utf-8")
             for part in json.loads(line)["text"].split("\n\n") if len(part.strip()) >= 80]
    rng, files = random.Random(0), [work / "kmmlu_style.csv", work / "kobest_style.jsonl"]
    with open(files[0], "w", newline="", encoding="utf-8") as csv_file, open(files[1], "w", encoding="utf-8") as jsonl:
        writer = csv.DictWriter(csv_file, fieldnames=["question", "A", "B", "C", "D", "answer"])
        writer.writeheader()
        for index in range(args.benchmark_items):
            writer.writerow({"question": rng.choice(texts)[:300] + " 이 글과 맞는 것은?", "answer": index % 4 + 1,
                             **{letter: rng.choice(texts)[:40] for letter in "ABCD"}})
            jsonl.write(json.dumps({"question": rng.choice(texts)[:200] + " 그 결과는?", "answer": index % 2,
                                    "choices": [rng.choice(texts)[:30], rng.choice(texts)[:30]]}, ensure_ascii=False) + "\n")
    subprocess.run([sys.executable, REPO / "scripts/train_tokenizer.py", "--dataset", REPO / "data/sample/ko.jsonl",
                    REPO / "data/sample/en.txt", "--vocab_size", "2048", "--output_dir", work / "tok"], check=True,
                   capture_output=True)
    systems = {"demo": [], "demo --benchmarks": ["--benchmarks", *map(str, files)]}

    def command(extra: list[str], out: Path) -> list:
        return [sys.executable, REPO / "train.py", REPO / "configs/recipes/demo.yaml", "--tokenizer_path", work / "tok",
                "--output_dir", out, "--cache_dir", work / "cache", "--save_strategy", "no", *extra]

    for extra in systems.values():  # each prepare once (decontamination changes the data), not timed
        subprocess.run([*command(extra, work / "unused"), "--tokenize_only"], check=True, capture_output=True)
    runs = []  # round, system, wall_s; with --benchmarks also the scoring's seconds, scorings and items
    for round_ in range(args.rounds):
        for name in (list(systems) if round_ % 2 == 0 else list(reversed(systems))):
            out, started = work / f"run-{len(runs)}", time.perf_counter()
            subprocess.run(command(systems[name], out), check=True, capture_output=True, cwd=REPO)
            runs.append({"round": round_ + 1, "system": name, "wall_s": round(time.perf_counter() - started, 2)})
            if systems[name]:
                history = json.loads((out / "trainer_state.json").read_text())["log_history"]
                seconds = [entry["benchmark_seconds"] for entry in history if "benchmark_seconds" in entry]
                record = json.loads((out / "benchmarks.json").read_text())["benchmarks"]
                runs[-1].update(seconds=sum(seconds), scorings=len(seconds), items=sum(b["items"] for b in record.values()))
            shutil.rmtree(out, ignore_errors=True)
            print(json.dumps(runs[-1]), flush=True)
    plain, scored = [r for r in runs if "seconds" not in r], [r for r in runs if "seconds" in r]
    print(json.dumps({"rounds": args.rounds, **{f"{key}_median": round(statistics.median(values), 4) for key, values in (
        ("wall_ratio", [b["wall_s"] / a["wall_s"] for a, b in zip(plain, scored)]),
        ("scoring_share", [r["seconds"] / r["wall_s"] for r in scored]),
        ("seconds_per_1000_items", [1000 * r["seconds"] / (r["items"] * r["scorings"]) for r in scored]))}}))


def main() -> None:
    args = parse()
    if args.benchmarks:
        work = Path(tempfile.mkdtemp(prefix="benchmarks-bench-"))
        try:
            benchmark_cost(args, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    if args.eval:
        work = Path(tempfile.mkdtemp(prefix="eval-bpb-bench-"))  # a tokenizer, a prepared cache, a run dir
        try:
            eval_cost(args, work)
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
