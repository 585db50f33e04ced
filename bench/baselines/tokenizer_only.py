"""Baselines (c), (c2) and (c3): a tokenizer alone — the floor any tokenizing pipeline is measured against.

    python bench/baselines/tokenizer_only.py corpus.jsonl TOK_DIR --engine hf          # (c) HF `tokenizers`
    python bench/baselines/tokenizer_only.py corpus.jsonl TOK_DIR --engine fastokens   # (c2) fastokens
    python bench/baselines/tokenizer_only.py corpus.jsonl TOK_DIR --engine fastokens --floor   # (c3)

Reads the JSONL texts in batches of `--batch_size` and encodes each batch on all cores — the HF Rust
tokenizer's `encode_batch_fast` (no offsets) or fastokens' `encode_batch_flat` (one uint32 buffer) —
counting tokens and writing nothing. No packing, no Arrow, no filtering: what is left is what a
pipeline adds around the tokenizer.

`--floor` is a lean reference for a prepare that tokenizes with fastokens and drops exact repeats: the
tokenizer is built on a thread while the first texts are read; a line byte for byte like an earlier one is
skipped before it is parsed, and each text is hashed (xxh3-64 of its UTF-8, as rankzero's exact dedup) and
a repeat of an earlier one skipped; each batch is encoded on a thread while the next is read. It imports
neither numpy nor pyarrow, signs nothing for near dedup, and packs and writes nothing: what rankzero's
default prepare does beyond it is cost on top of it.
"""

from __future__ import annotations

import os

# Set before importing tokenizers: this process never forks, so Rayon may use every core.
os.environ["TOKENIZERS_PARALLELISM"] = "true"

import argparse  # noqa: E402
import json  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402


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


def floor(corpus: str, tokenizer_dir: str, batch_size: int, text_column: str) -> tuple[int, int, int]:
    """(kept documents, tokens, bytes read) of the `--floor` pipeline (the module docstring)."""
    import fastokens
    import xxhash

    built: list = []  # the tokenizer, or the exception that stopped its build
    with open(os.path.join(tokenizer_dir, "tokenizer.json"), encoding="utf-8") as handle:
        json_text = handle.read()

    def build() -> None:
        try:
            built.append(fastokens.Tokenizer.from_json_str(json_text))
        except BaseException as error:  # raised again where the tokenizer is first used
            built.append(error)

    builder = threading.Thread(target=build)
    builder.start()

    def encode(batch: list[str]) -> int:
        builder.join()
        if isinstance(built[0], BaseException):
            raise built[0]
        return len(built[0].encode_batch_flat(batch, add_special_tokens=False)[0]) // 4

    seen_lines: set[int] = set()  # a byte-identical line is a repeat before it is parsed
    seen: set[int] = set()
    counts, batch, text_bytes = [], [], 0
    with ThreadPoolExecutor(1) as encoding_thread, open(corpus, "rb") as handle:
        for line in handle:
            if not line.strip():
                continue
            text_bytes += len(line)
            line_key = xxhash.xxh3_64_intdigest(line)
            if line_key in seen_lines:
                continue
            seen_lines.add(line_key)
            text = json.loads(line)[text_column]
            key = xxhash.xxh3_64_intdigest(text.encode())
            if key in seen:
                continue
            seen.add(key)
            batch.append(text)
            if len(batch) == batch_size:
                counts.append(encoding_thread.submit(encode, batch))
                batch = []
        if batch:
            counts.append(encoding_thread.submit(encode, batch))
        tokens = sum(count.result() for count in counts)
    return len(seen), tokens, text_bytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", help="JSONL file with a text field")
    parser.add_argument("tokenizer_dir", help="directory holding tokenizer.json")
    parser.add_argument("--engine", choices=["hf", "fastokens"], default="hf")
    parser.add_argument("--batch_size", type=int, default=1000)
    parser.add_argument("--text_column", default="text")
    parser.add_argument("--floor", action="store_true",
                        help="fastokens only: built beside the read, exact repeats skipped, encoding beside reading")
    args = parser.parse_args()

    start = time.perf_counter()
    if args.floor:
        if args.engine != "fastokens":
            parser.error("--floor is a fastokens pipeline: give --engine fastokens")
        documents, tokens, text_bytes = floor(args.corpus, args.tokenizer_dir, args.batch_size, args.text_column)
        seconds = time.perf_counter() - start
        print(f"docs: {documents} tokens: {tokens} seconds: {seconds:.2f} MB/s: {text_bytes / 2**20 / seconds:.2f}")
        return
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
