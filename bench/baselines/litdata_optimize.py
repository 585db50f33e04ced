"""Baseline (l): LitData's `optimize` writing token chunks, tokenized by fastokens. Runs in its own venv
(litdata needs torch; never a rankzero dependency), started by bench/prep_bench.py `--litdata_python`:

    python3 -m venv /work/peers/litdata
    /work/peers/litdata/bin/pip install "torch==2.13.0" litdata fastokens   # torch pinned: the CPU build
    /work/peers/litdata/bin/python bench/baselines/litdata_optimize.py CORPUS.jsonl TOK_DIR OUT_DIR \
        [--block_size 2048 --num_workers 2]

The job of rankzero's prepare as far as LitData has it, and nothing else: no dedup, no filter, no
personal-information masking. The JSONL file is cut at line boundaries into pieces of at most `--piece_mb`
(LitData hands whole inputs to its workers, so a single file needs cutting to use every core); each
worker reads its pieces' lines, encodes them with fastokens' `encode_batch_flat` in batches of
`--batch_size` documents, appends the tokenizer's eos to each document (rankzero's `ids + [eos]`) and
yields each batch as one flat array, which `optimize(item_loader=TokensLoader())` concatenates into
chunk files of `--chunk_blocks` blocks of `--block_size` tokens (LitData's LLM pre-training recipe;
the reader cuts the blocks). Ids are uint16 when the vocabulary fits, as rankzero stores them.
Each worker process runs fastokens on one thread (FASTOKENS_BPE_THREADS and RAYON_NUM_THREADS = 1):
with `--num_workers` = the cores that is LitData at its best here; more threads only contend.
Prints one summary line: documents, tokens written, whole blocks, seconds.
"""

from __future__ import annotations

import os

# Before fastokens starts its pools in any worker (they inherit this environment): one thread each.
for _name in ("FASTOKENS_BPE_THREADS", "RAYON_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402


def line_pieces(path: str, piece_bytes: int) -> list[tuple[str, int, int]]:
    """(path, start, end) byte ranges of about `piece_bytes`, each ending at a line end."""
    size = os.path.getsize(path)
    pieces, start = [], 0
    with open(path, "rb") as handle:
        while start < size:
            handle.seek(min(start + piece_bytes, size))
            handle.readline()  # to the end of the line the cut fell in
            end = min(handle.tell(), size)
            pieces.append((path, start, end))
            start = end
    return pieces


@functools.lru_cache(maxsize=1)
def load_tokenizer(tokenizer_dir: str):
    """fastokens' tokenizer and the eos id of tokenizer_config.json, once per worker process."""
    import fastokens

    tokenizer = fastokens.Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))
    with open(os.path.join(tokenizer_dir, "tokenizer_config.json"), encoding="utf-8") as handle:
        eos = json.load(handle)["eos_token"]
    eos_id = tokenizer.token_to_id(eos if isinstance(eos, str) else eos["content"])
    if eos_id is None:
        raise SystemExit(f"litdata_optimize: eos_token {eos!r} is not in {tokenizer_dir}/tokenizer.json")
    return tokenizer, eos_id


def tokenize_piece(piece: tuple[str, int, int], tokenizer_dir: str, batch_size: int, text_column: str,
                   dtype_name: str):
    """LitData's `fn`: yields one flat array of `ids + [eos]` per batch of documents of the piece."""
    import numpy as np

    tokenizer, eos_id = load_tokenizer(tokenizer_dir)
    dtype = np.dtype(dtype_name)
    path, start, end = piece

    def encode(texts: list[str]):
        raw_ids, raw_offsets = tokenizer.encode_batch_flat(texts, add_special_tokens=False)
        ids = np.frombuffer(raw_ids, dtype="<u4")
        offsets = np.frombuffer(raw_offsets, dtype="<u8").astype(np.int64)
        return np.insert(ids, offsets[1:], eos_id).astype(dtype)  # eos after each document

    with open(path, "rb") as handle:
        handle.seek(start)
        texts: list[str] = []
        for line in handle.read(end - start).splitlines():
            if not line.strip():
                continue
            texts.append(json.loads(line)[text_column])
            if len(texts) == batch_size:
                yield encode(texts)
                texts = []
        if texts:
            yield encode(texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", help="JSONL file with a text field")
    parser.add_argument("tokenizer_dir", help="directory holding tokenizer.json and tokenizer_config.json")
    parser.add_argument("output_dir")
    parser.add_argument("--block_size", type=int, default=2048)
    parser.add_argument("--chunk_blocks", type=int, default=1024, help="blocks per chunk file")
    parser.add_argument("--num_workers", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--piece_mb", type=float, default=4.0,
                        help="most bytes of input handed to a worker at once (a small corpus gets 8 pieces a worker)")
    parser.add_argument("--batch_size", type=int, default=1000, help="documents per encode call")
    parser.add_argument("--text_column", default="text")
    parser.add_argument("--start_method", choices=("spawn", "fork"), default=None,
                        help="how LitData starts its workers (default: LitData's, spawn)")
    args = parser.parse_args()

    start = time.perf_counter()
    from litdata import TokensLoader, optimize

    tokenizer, _ = load_tokenizer(args.tokenizer_dir)
    highest = max([tokenizer.vocab_size - 1] + [token["id"] for token in tokenizer.added_tokens()])
    dtype = "uint16" if highest < 2**16 else "uint32"
    # Pieces small enough that every worker gets several (the shared work queue then evens out their ends).
    piece_bytes = min(int(args.piece_mb * 2**20), os.path.getsize(args.corpus) // (8 * args.num_workers) + 1)
    pieces = line_pieces(args.corpus, piece_bytes)
    fn = functools.partial(tokenize_piece, tokenizer_dir=args.tokenizer_dir, batch_size=args.batch_size,
                           text_column=args.text_column, dtype_name=dtype)
    optimize(fn=fn, inputs=pieces, output_dir=args.output_dir, chunk_size=args.block_size * args.chunk_blocks,
             item_loader=TokensLoader(), num_workers=args.num_workers, reorder_files=False, start_method=args.start_method,
             verbose=False)

    with open(os.path.join(args.output_dir, "index.json"), encoding="utf-8") as handle:
        chunks = json.load(handle)["chunks"]
    tokens = sum(chunk["dim"] for chunk in chunks)
    blocks = sum(chunk["dim"] // args.block_size for chunk in chunks)  # what TokensLoader will serve
    print(f"pieces: {len(pieces)} chunks: {len(chunks)} tokens: {tokens} blocks: {blocks} dtype: {dtype} "
          f"seconds: {time.perf_counter() - start:.1f}")


if __name__ == "__main__":
    main()
