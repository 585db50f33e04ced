"""What bits per byte and per-source scores cost an evaluation: RankzeroTrainer.evaluate() with them against the
Trainer's own loss-only evaluation (the baseline: the same trainer without `scores`), in paired rounds.

    python bench/eval_bpb_bench.py                                   # ko_real_dev's three genres as --eval_dataset
    python bench/eval_bpb_bench.py --vocab_size 32000 --rounds 7 --max_seq_length 1024 --rows 200

A tokenizer is trained on data/sample/, the data prepared by train.py (--eval_dataset: each genre a source), and a
model of configs/model_config_tiny.json built with its vocabulary. Each round evaluates once without and once with
the scores, in alternating order (the VM's speed drifts); the ratio is the median of the per-round ratios. Also
prints the scores of the last evaluation (per source), from a model that has not been trained: what they look like,
not what they are worth.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GENRES = Path("/work/shared/corpora/ko_real_dev")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eval_dataset", nargs="+", default=[str(GENRES / f"{name}.jsonl") for name in
                                                               ("dialogue", "encyclopedia", "qa")])
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--max_seq_length", type=int, default=512)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rows", type=int, default=96, help="validation rows evaluated (the first ones)")
    args = parser.parse_args()

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

    work = Path(tempfile.mkdtemp(prefix="eval-bpb-bench-"))
    texts = [json.loads(line)["text"] for line in (REPO / "data/sample/ko.jsonl").read_text().splitlines()]
    train_tokenizer(texts + (REPO / "data/sample/en.txt").read_text().splitlines(), args.vocab_size, work / "tok")
    prepared = subprocess.run(
        [sys.executable, REPO / "train.py", "--tokenize_only", "--dataset", REPO / "data/sample/ko.jsonl",
         "--eval_dataset", *args.eval_dataset, "--tokenizer_path", work / "tok", "--max_seq_length",
         str(args.max_seq_length), "--cache_dir", work / "cache"], capture_output=True, text=True, check=True)
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
                               processing_class=tokenizer, meter=ThroughputCallback(model, args.max_seq_length),
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
    print(json.dumps({"rows": len(eval_dataset), "tokens": len(eval_dataset) * args.max_seq_length,
                      "vocab_size": len(tokenizer), "seconds": seconds, "ratio_median": statistics.median(ratios),
                      "ratios": [round(r, 3) for r in ratios]}))
    baseline_loss = metrics[list(systems)[0]]["eval_loss"]
    print(json.dumps({"baseline eval_loss": baseline_loss, **{key: value for key, value in metrics[list(systems)[1]].items()
                      if "bits_per_byte" in key or "loss" in key}}, ensure_ascii=False))


if __name__ == "__main__":
    main()
