"""From scratch without a recipe: rankzero's pretraining defaults against Hugging Face's fine-tuning
defaults, same model, data, batch and steps; the loss at step 10 and at the end, and the held-out loss.

    python bench/defaults_bench.py                    # tiny Llama, the demo's sample text, 200 steps
    python bench/defaults_bench.py --steps 400 --seeds 0 1

The baseline passes HF's own defaults explicitly (lr 5e-5, linear decay, no warm-up, weight decay 0,
Adam beta2 0.999), which rankzero then leaves alone; the other run gives none of these flags. Both run
`train.py` on one CPU process with a 5% validation split, evaluating at the end only.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HF_DEFAULTS = ["--learning_rate", "5e-5", "--lr_scheduler_type", "linear", "--warmup_steps", "0",
               "--weight_decay", "0", "--adam_beta2", "0.999"]


def tokenizer(workdir: Path) -> Path:
    path = workdir / "tokenizer"
    if not (path / "tokenizer.json").is_file():
        subprocess.run([sys.executable, "scripts/train_tokenizer.py", "--dataset", "data/sample/ko.jsonl",
                        "data/sample/en.txt", "--vocab_size", "2000", "--output_dir", str(path)],
                       cwd=REPO, check=True, capture_output=True)
    return path


def train(name: str, extra: list[str], tok: Path, workdir: Path, steps: int, seed: int) -> dict:
    out = workdir / f"{name}-{seed}"
    command = [sys.executable, "train.py", "--dataset", "data/sample/ko.jsonl", "--tokenizer_path", str(tok),
               "--model_config", "configs/model_config_tiny.json", "--max_seq_length", "128",
               "--per_device_train_batch_size", "8", "--max_steps", str(steps), "--logging_steps", "10",
               "--validation_split_percentage", "5", "--eval_strategy", "no", "--save_strategy", "no",
               "--report_to", "none", "--output_dir", str(out), "--cache_dir", str(workdir / "cache"),
               "--seed", str(seed), "--dataloader_num_workers", "0", *extra]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{name}: train.py failed:\n{result.stderr[-3000:]}")
    history = json.loads((out / "trainer_state.json").read_text())["log_history"]
    loss = {entry["step"]: entry["loss"] for entry in history if "loss" in entry}
    evaluation = next(entry["eval_loss"] for entry in reversed(history) if "eval_loss" in entry)
    return {"step10": loss[10], "end": loss[steps], "eval": evaluation}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--workdir", type=Path, default=REPO / "bench" / "out" / "defaults")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    tok = tokenizer(args.workdir)
    with tempfile.TemporaryDirectory(dir=args.workdir) as scratch:
        rows = []
        for seed in args.seeds:
            for name, extra in (("rankzero defaults", []), ("HF defaults", HF_DEFAULTS)):
                rows.append((name, seed, train(name.split()[0], extra, tok, Path(scratch), args.steps, seed)))
    print(f"## From scratch, no recipe: tiny Llama, data/sample/ko.jsonl, seq 128, batch 8, {args.steps} steps\n")
    print(f"| defaults | seed | loss at step 10 | loss at step {args.steps} | eval loss (5% held out) |\n"
          "|---|---:|---:|---:|---:|")
    for name, seed, result in rows:
        print(f"| {name} | {seed} | {result['step10']:.2f} | {result['end']:.2f} | {result['eval']:.2f} |")


if __name__ == "__main__":
    main()
