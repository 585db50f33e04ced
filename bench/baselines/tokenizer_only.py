"""Baselines (c) and (c2): a tokenizer alone — the floor any tokenizing pipeline is measured against.

    python bench/baselines/tokenizer_only.py corpus.jsonl TOK_DIR --engine hf          # (c) HF `tokenizers`
    python bench/baselines/tokenizer_only.py corpus.jsonl TOK_DIR --engine fastokens   # (c2) fastokens

Reads the JSONL texts in batches of `--batch_size` and encodes each batch on all cores — the HF Rust
tokenizer's `encode_batch_fast` (no offsets) or fastokens' `encode_batch_flat` (one uint32 buffer) —
counting tokens and writing nothing. No packing, no Arrow, no filtering: what is left is what a
pipeline adds around the tokenizer.
"""

from __future__ import annotations

import os

# Set before importing tokenizers: this process never forks, so Rayon may use every core.
os.environ["TOKENIZERS_PARALLELISM"] = "true"

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402


def encoder(engine: str, tokenizer_dir: str):
    """A function from a batch of texts to its token count."""
    path = os.path.join(tokenizer_dir, "tokenizer.json")
    if engine == "hf":
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(path)
        return lambda batch: sum(len(encoding) for encoding in tokenizer.encode_batch_fast(batch))
    import fastokens

    tokenizer = fastokens.Tokenizer.from_file(path)
    return lambda batch: len(tokenizer.encode_batch_flat(batch, add_special_tokens=False)[0]) // 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", help="JSONL file with a text field")
    parser.add_argument("tokenizer_dir", help="directory holding tokenizer.json")
    parser.add_argument("--engine", choices=["hf", "fastokens"], default="hf")
    parser.add_argument("--batch_size", type=int, default=1000)
    parser.add_argument("--text_column", default="text")
    args = parser.parse_args()

    start = time.perf_counter()
    encode = encoder(args.engine, args.tokenizer_dir)
    documents = tokens = text_bytes = 0
    batch: list[str] = []
    with open(args.corpus, "rb") as handle:
        for line in handle:
            if not line.strip():
                continue
            text_bytes += len(line)
            batch.append(json.loads(line)[args.text_column])
            documents += 1
            if len(batch) == args.batch_size:
                tokens += encode(batch)
                batch.clear()
    if batch:
        tokens += encode(batch)
    seconds = time.perf_counter() - start
    print(f"docs: {documents} tokens: {tokens} seconds: {seconds:.2f} "
          f"MB/s: {text_bytes / 2**20 / seconds:.2f}")


if __name__ == "__main__":
    main()
