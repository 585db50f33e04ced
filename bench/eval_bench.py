"""What evaluating costs: bits per byte per source, benchmark scores against lm-evaluation-harness, their share of a run.

    python bench/eval_bench.py --items 1000 --shots 0     # benchmark scoring: seconds per 1,000 items against HFLM
    python bench/eval_bench.py --items 200 --shots 5
    python bench/eval_bench.py --in_run --rounds 5        # what --benchmarks costs the demo run
    python bench/eval_bench.py --bits_per_byte            # what bits per byte cost an evaluation (below)
    python bench/eval_bench.py --bits_per_byte --vocab_size 32000 --rounds 7 --seq 1024 --rows 200

By default it times scoring `--items` KMMLU-shaped items (questions and choices cut from ko_real_dev's texts, 4
choices each, `--shots` examples before each) with rankzero/train/benchmarks.py's score_suites against
lm-evaluation-harness's HFLM.loglikelihood on the same requests (the baseline: full fp32 log-softmax over
[batch, length, vocab]), on configs/model_config_tiny.json with a `--vocab_size` tokenizer, one thread, alternating
per round.

`--in_run` asks what scoring in the loop costs the demo run (configs/recipes/demo.yaml): train.py with
`--benchmarks` at its defaults against the same command without (the baseline), alternating per round; two files of
`--items` items each (a KMMLU-style CSV and a KoBEST-style JSONL cut from ko_real_dev's paragraphs). Prints each
run's wall time, the scoring's seconds (from its log history), their share of the run and seconds per 1,000 items.

`--bits_per_byte` asks what bits per byte and per-source scores cost an evaluation —
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
import random
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


def scoring_cost(args, work: Path) -> None:
    """score_suites against lm-eval's HFLM on the same requests, seconds per 1,000 items."""
    import torch
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rankzero.data.screen.benchmark_files import read_suites
    from rankzero.tokenizer_trainer import train_tokenizer
    from rankzero.train.benchmarks import score_suites
    from rankzero.train.model import load_config

    torch.set_num_threads(1)  # the box is shared: one thread per system keeps the rounds comparable
    texts = [json.loads(line)["text"] for line in (GENRES / "encyclopedia.jsonl").read_text().splitlines()]
    train_tokenizer(texts[:2000], args.vocab_size, work / "model")
    words = " ".join(texts).split()
    with open(work / "bench-test.csv", "w", newline="", encoding="utf-8") as handle:  # questions of 160-360 chars
        csv.writer(handle).writerows([["question", "A", "B", "C", "D", "answer"]] + [
            [texts[n % len(texts)][:160 + n % 200], *(" ".join(words[(n * 7 + k * 13) % len(words):][:1 + k])
                                                      for k in range(4)), 1 + n % 4] for n in range(args.items)])
    suites = read_suites([work / "bench-test.csv"], shots=args.shots, max_items=args.items)
    tokenizer = AutoTokenizer.from_pretrained(work / "model")
    config = load_config(REPO / "configs/model_config_tiny.json")
    config.vocab_size = len(tokenizer)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(work / "model")
    model = AutoModelForCausalLM.from_pretrained(work / "model", dtype=torch.float32)
    reference = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=args.batch, device="cpu")
    instances = [Instance("loglikelihood", {}, (q.context, c), i) for i, q in enumerate(suites[0].items)
                 for c in q.continuations()]
    systems = {"lm-eval HFLM": lambda: reference.loglikelihood(instances, disable_tqdm=True),
               "rankzero score_suites": lambda: score_suites(model, tokenizer, suites, batch_size=args.batch)}
    seconds: dict[str, list[float]] = {name: [] for name in systems}
    for round_ in range(args.rounds):
        for name in (list(systems) if round_ % 2 == 0 else list(reversed(systems))):
            started = time.perf_counter()
            systems[name]()
            seconds[name].append(time.perf_counter() - started)
    per_1000 = {name: round(1000 * statistics.median(values) / args.items, 2) for name, values in seconds.items()}
    ratios = [a / b for a, b in zip(*seconds.values())]
    print(json.dumps({"items": args.items, "shots": args.shots, "requests": len(instances), "batch": args.batch,
                      "vocab_size": len(tokenizer), "seconds_per_1000_items": per_1000,
                      "speedup_median": round(statistics.median(ratios), 3), "ratios": [round(r, 3) for r in ratios]}))


def share_of_a_run(args, work: Path) -> None:
    """--in_run: the demo run with --benchmarks at its defaults against the same run without. The files, a
    KMMLU-style CSV and a KoBEST-style JSONL, are cut from ko_real_dev's paragraphs (real questions' length)."""
    texts = [part.strip() for path in sorted(GENRES.glob("*.jsonl")) for line in path.open(encoding="utf-8")
             for part in json.loads(line)["text"].split("\n\n") if len(part.strip()) >= 80]
    rng, files = random.Random(0), [work / "kmmlu_style.csv", work / "kobest_style.jsonl"]
    with open(files[0], "w", newline="", encoding="utf-8") as csv_file, open(files[1], "w", encoding="utf-8") as jsonl:
        writer = csv.DictWriter(csv_file, fieldnames=["question", "A", "B", "C", "D", "answer"])
        writer.writeheader()
        for index in range(args.items):
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


def bits_per_byte_cost(args, work: Path) -> None:
    """--bits_per_byte: RankzeroTrainer.evaluate() with bits per byte and per-source scores against the loss-only one."""
    import torch
    from transformers import AutoTokenizer

    from rankzero.tokenizer_trainer import train_tokenizer
    from rankzero.train.collator import BlockCollator
    from rankzero.train.evaluation import EvalScores, source_names, token_bytes
    from rankzero.train.model import load_config
    from rankzero.train.run import load_validation
    from rankzero.train.throughput import ThroughputCallback
    from rankzero.train.trainer import RankzeroTrainer
    from rankzero.train.training_args import TrainingArguments

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--in_run", action="store_true", help="the share of the demo run instead")
    parser.add_argument("--bits_per_byte", action="store_true", help="what bits per byte cost an evaluation instead")
    parser.add_argument("--eval_dataset", nargs="+", default=[str(GENRES / f"{name}.jsonl") for name in
                                                               ("dialogue", "encyclopedia", "qa")])
    parser.add_argument("--seq", type=int, default=512, help="rows of --bits_per_byte's validation data")
    parser.add_argument("--rows", type=int, default=96, help="validation rows --bits_per_byte evaluates")
    parser.add_argument("--items", type=int, default=1000, help="items scored (with --in_run: in each file made)")
    parser.add_argument("--shots", type=int, default=0, help="examples before each item")
    parser.add_argument("--rounds", type=int, default=None,
                        help="both systems once per round, ratios are medians; default 3 (5 with --bits_per_byte)")
    parser.add_argument("--batch", type=int, default=8, help="requests per forward, both systems")
    parser.add_argument("--vocab_size", type=int, default=8000, help="the tokenizer trained for the model")
    args = parser.parse_args()
    args.rounds = args.rounds or (5 if args.bits_per_byte else 3)
    if not GENRES.is_dir():
        parser.error(f"{GENRES}: the real Korean texts the items are cut from are not there")
    work = Path(tempfile.mkdtemp(prefix="scores-bench-"))
    try:
        measure = bits_per_byte_cost if args.bits_per_byte else share_of_a_run if args.in_run else scoring_cost
        measure(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
