"""Baseline (b): the data path of transformers' run_clm.py example, written out as its recipe.

    HF_DATASETS_CACHE=/tmp/fresh python bench/baselines/runclm_recipe.py \
        --data_files corpus.jsonl --tokenizer_path TOK --block_size 2048 --num_proc 2 --output_dir OUT

The recipe: load the JSON lines with `datasets.load_dataset("json")` (converted to a cached Arrow
file), tokenize with the transformers tokenizer call in `dataset.map(batched=True, num_proc=N)`,
then `group_texts` — concatenate each batch, drop its remainder, cut into blocks of `block_size` —
in a second `map`, and `save_to_disk`. Nothing is tuned: this is what people run. The benchmark
gives each run a fresh HF_DATASETS_CACHE so no step is served from a previous run's cache.
"""

from __future__ import annotations

import argparse
import os
import time
from itertools import chain


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_files", required=True, nargs="+")
    parser.add_argument("--tokenizer_path", required=True)
    parser.add_argument("--block_size", type=int, default=2048)
    parser.add_argument("--num_proc", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--text_column", default="text")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    start = time.perf_counter()
    import datasets
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer_path)
    raw = datasets.load_dataset("json", data_files={"train": args.data_files}, split="train")
    column_names = list(raw.column_names)

    def tokenize_function(examples):
        return tokenizer(examples[args.text_column])

    tokenized = raw.map(tokenize_function, batched=True, num_proc=args.num_proc,
                        remove_columns=column_names, desc="Running tokenizer on dataset")

    block_size = args.block_size

    def group_texts(examples):
        # As run_clm.py writes it: chain each column of the batch, keep only whole blocks (the batch's
        # tail is dropped, the recipe's known loss), labels a shallow copy of input_ids.
        concatenated = {key: list(chain(*examples[key])) for key in examples}
        total = len(concatenated["input_ids"])
        if total >= block_size:
            total = total // block_size * block_size
        blocks = {key: [values[i:i + block_size] for i in range(0, total, block_size)]
                  for key, values in concatenated.items()}
        blocks["labels"] = blocks["input_ids"].copy()
        return blocks

    grouped = tokenized.map(group_texts, batched=True, num_proc=args.num_proc,
                            desc=f"Grouping texts in chunks of {block_size}")
    grouped.save_to_disk(args.output_dir)
    print(f"saved: {args.output_dir}")
    print(f"docs: {len(raw)} blocks: {len(grouped)} seconds: {time.perf_counter() - start:.1f}")


if __name__ == "__main__":
    main()
