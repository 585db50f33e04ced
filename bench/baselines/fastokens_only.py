"""Baseline (c2): fastokens alone — the floor once the tokenizer is fastokens instead of `tokenizers`.

    python bench/baselines/fastokens_only.py corpus.jsonl TOK_DIR [--batch_size 1000]

Reads the JSONL texts in batches and encodes each with `fastokens.Tokenizer.encode_batch_flat`
(its own Rayon pool on all cores; ids come back as one uint32 buffer), counting tokens and writing
nothing. No packing, no Arrow, no filtering: what is left for a pipeline to add around the tokenizer.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import fastokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", help="JSONL file with a text field")
    parser.add_argument("tokenizer_dir", help="directory holding tokenizer.json")
    parser.add_argument("--batch_size", type=int, default=1000)
    parser.add_argument("--text_column", default="text")
    args = parser.parse_args()

    start = time.perf_counter()
    tokenizer = fastokens.Tokenizer.from_file(os.path.join(args.tokenizer_dir, "tokenizer.json"))
    documents = tokens = text_bytes = 0
    batch: list[str] = []

    def flush() -> int:
        ids, _ = tokenizer.encode_batch_flat(batch, add_special_tokens=False)
        batch.clear()
        return len(ids) // 4

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
