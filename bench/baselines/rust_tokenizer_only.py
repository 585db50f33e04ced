"""Baseline (c): the Rust tokenizer alone — the floor any tokenizing pipeline is measured against.

    python bench/baselines/rust_tokenizer_only.py corpus.jsonl TOK_DIR [--batch_size 1000]

Reads the JSONL texts in batches and encodes each with `tokenizers.Tokenizer.encode_batch_fast`
(no offsets), Rayon on all cores, counting tokens and writing nothing. No packing, no Arrow, no
filtering: a pipeline within ~1.3x of this spends its time tokenizing, not around tokenizing.
"""

from __future__ import annotations

import os

# Set before importing tokenizers: this process never forks, so Rayon may use every core.
os.environ["TOKENIZERS_PARALLELISM"] = "true"

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

from tokenizers import Tokenizer  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", help="JSONL file with a text field")
    parser.add_argument("tokenizer_dir", help="directory holding tokenizer.json")
    parser.add_argument("--batch_size", type=int, default=1000)
    parser.add_argument("--text_column", default="text")
    args = parser.parse_args()

    start = time.perf_counter()
    tokenizer = Tokenizer.from_file(os.path.join(args.tokenizer_dir, "tokenizer.json"))
    documents = tokens = text_bytes = 0
    batch: list[str] = []

    def flush() -> int:
        count = sum(len(encoding) for encoding in tokenizer.encode_batch_fast(batch))
        batch.clear()
        return count

    with open(args.corpus, "rb") as handle:
        for line in handle:
            if not line.strip():
                continue
            text_bytes += len(line)
            batch.append(json.loads(line)[args.text_column])
            documents += 1
            if len(batch) == args.batch_size:
                tokens += flush()
    if batch:
        tokens += flush()
    seconds = time.perf_counter() - start
    print(f"docs: {documents} tokens: {tokens} seconds: {seconds:.2f} "
          f"MB/s: {text_bytes / 2**20 / seconds:.2f}")


if __name__ == "__main__":
    main()
