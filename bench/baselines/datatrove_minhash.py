"""Baseline: datatrove's MinHash near-dedup, its four stages on the local executor. Runs in datatrove's
own venv, never rankzero's (bench/dedup_bench.py starts it as a subprocess):

    python3 -m venv /work/venvs/datatrove
    /work/venvs/datatrove/bin/pip install datatrove regex "xxhash<4" tokenizers orjson
    /work/venvs/datatrove/bin/python bench/baselines/datatrove_minhash.py INPUT_DIR WORK_DIR \
        [--bands 14 --rows 8 --ngrams 5 --tasks 1 --workers 1 --words whitespace]

INPUT_DIR holds *.jsonl files of {"id", "text"}; datatrove reads them in file-name order and numbers the
documents of each file from 0. The stages, as datatrove's examples/minhash_deduplication.py chains them:
  1 MinhashDedupSignature   word n-gram shingles of simplify_text(text), bands x rows hashes per document
  2 MinhashDedupBuckets     per band, sorted signatures merged: equal band = a duplicate pair
  3 MinhashDedupCluster     union-find over the pairs; every member but the cluster's root is removed
  4 MinhashDedupFilter      the input read again, the removed documents written aside
Words: `whitespace` splits simplify_text's output at spaces (the word definition rankzero uses); `kiwi` is
datatrove's own Korean word tokenizer (Kiwi morphemes, FineWeb-2's setting; needs kiwipiepy in the venv).
Writes WORK_DIR/removed_ids.txt (one id a line) and WORK_DIR/stage_seconds.json; with `--pairs FILE` (a JSON
list of [line, line] pairs of the input, its files in name order) also WORK_DIR/pairs_jaccard.json: each
pair's true Jaccard on datatrove's own shingles (its normalisation and words), to tell normalisation
differences from estimation noise. Output is written
uncompressed, so gzip time is not charged to datatrove.
With `--tokenizer TOK_DIR` (bench/prep_bench.py's mode dt: datatrove's whole prepare) stage 4 tokenizes what
it keeps instead of writing it as JSONL: datatrove's DocumentTokenizer (the HF `tokenizers` library, the
tokenizer's eos after each document, documents unshuffled) writes WORK_DIR/tokens/*.ds, and the summary line
counts their tokens.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import time

from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup.minhash import (MinhashConfig, MinhashDedupBuckets, MinhashDedupCluster,
                                              MinhashDedupFilter, MinhashDedupSignature)
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.tokens import DocumentTokenizer
from datatrove.pipeline.writers.jsonl import JsonlWriter
from datatrove.utils.hashing import HashConfig
from datatrove.utils.text import simplify_text
from datatrove.utils.word_tokenizers import WordTokenizer


class SpaceWords(WordTokenizer):
    """Words = runs between spaces of datatrove's simplified text (its own fallback needs spaCy)."""

    def word_tokenize(self, text: str) -> list[str]:
        return text.split()

    def sent_tokenize(self, text: str) -> list[str]:
        return [text]

    def span_tokenize(self, text: str) -> list[tuple[int, int]]:
        return [(0, len(text))]


def write_pair_jaccard(files: list[str], pairs_path: str, signature: MinhashDedupSignature, out: str) -> None:
    """True Jaccard of each pair on the word n-grams datatrove shingles (simplify_text, then its words)."""
    texts = []
    for path in files:
        with open(path, encoding="utf-8") as handle:
            texts.extend(json.loads(line)["text"] for line in handle)
    n = signature.config.n_grams

    def shingles(text: str) -> set:
        words = signature.word_tokenizer.word_tokenize(simplify_text(text, signature.config.norm_config))
        return {tuple(words[start:start + n]) for start in range(len(words) - n + 1)}

    values = []
    with open(pairs_path, encoding="utf-8") as handle:
        for left, right in json.load(handle):
            a, b = shingles(texts[left]), shingles(texts[right])
            values.append(len(a & b) / len(a | b) if a and b else 0.0)
    with open(out, "w", encoding="utf-8") as handle:
        json.dump(values, handle)


def keep_step(tokenizer_dir: str | None, work: str):
    """What stage 4 does with the kept documents: write them, or tokenize them as datatrove's prepare does."""
    if tokenizer_dir is None:
        return JsonlWriter(os.path.join(work, "kept"), compression=None)
    with open(os.path.join(tokenizer_dir, "tokenizer_config.json"), encoding="utf-8") as handle:
        eos = json.load(handle)["eos_token"]
    return DocumentTokenizer(os.path.join(work, "tokens"), os.path.join(tokenizer_dir, "tokenizer.json"),
                             eos_token=eos if isinstance(eos, str) else eos["content"], shuffle_documents=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input_dir")
    parser.add_argument("work_dir")
    parser.add_argument("--bands", type=int, default=14, help="num_buckets")
    parser.add_argument("--rows", type=int, default=8, help="hashes_per_bucket")
    parser.add_argument("--ngrams", type=int, default=5)
    parser.add_argument("--precision", type=int, default=64, choices=(32, 64))
    parser.add_argument("--tasks", type=int, default=1, help="tasks of stages 1 and 4 (one input file each)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--words", choices=("whitespace", "kiwi"), default="whitespace")
    parser.add_argument("--pairs", default=None, help="JSON [[line, line], ...]: write their true Jaccard")
    parser.add_argument("--tokenizer", default=None,
                        help="HF tokenizer dir: stage 4 tokenizes the kept documents into WORK_DIR/tokens")
    args = parser.parse_args()

    files = sorted(glob.glob(os.path.join(args.input_dir, "*.jsonl")))
    if not files:
        raise SystemExit(f"datatrove_minhash: no *.jsonl in {args.input_dir}")
    config = MinhashConfig(n_grams=args.ngrams, num_buckets=args.bands, hashes_per_bucket=args.rows,
                           hash_config=HashConfig(precision=args.precision))
    language = SpaceWords() if args.words == "whitespace" else "ko"
    work = args.work_dir
    logs = os.path.join(work, "logs")

    def reader() -> JsonlReader:
        return JsonlReader(args.input_dir, glob_pattern="*.jsonl", id_key="id", add_file_path=False)

    stages = {
        "signatures": LocalPipelineExecutor(
            [reader(), MinhashDedupSignature(os.path.join(work, "signatures"), config=config, language=language)],
            tasks=args.tasks, workers=args.workers, logging_dir=os.path.join(logs, "1")),
        "buckets": LocalPipelineExecutor(
            [MinhashDedupBuckets(os.path.join(work, "signatures"), os.path.join(work, "buckets"), config=config)],
            tasks=args.bands, workers=args.workers, logging_dir=os.path.join(logs, "2")),
        "cluster": LocalPipelineExecutor(
            [MinhashDedupCluster(os.path.join(work, "buckets"), os.path.join(work, "remove_ids"), config=config)],
            tasks=1, workers=1, logging_dir=os.path.join(logs, "3")),
        "filter": LocalPipelineExecutor(
            [reader(),
             MinhashDedupFilter(os.path.join(work, "remove_ids"),
                                exclusion_writer=JsonlWriter(os.path.join(work, "removed"), compression=None)),
             keep_step(args.tokenizer, work)],
            tasks=args.tasks, workers=args.workers, logging_dir=os.path.join(logs, "4")),
    }
    seconds = {}
    for name, executor in stages.items():
        start = time.perf_counter()
        executor.run()
        seconds[name] = round(time.perf_counter() - start, 3)

    removed = []
    for path in sorted(glob.glob(os.path.join(work, "removed", "*.jsonl"))):
        with open(path, encoding="utf-8") as handle:
            removed.extend(json.loads(line)["id"] for line in handle if line.strip())
    with open(os.path.join(work, "removed_ids.txt"), "w", encoding="utf-8") as handle:
        handle.writelines(f"{doc_id}\n" for doc_id in removed)
    with open(os.path.join(work, "stage_seconds.json"), "w", encoding="utf-8") as handle:
        json.dump(seconds, handle)
    if args.pairs:
        signature = stages["signatures"].pipeline[1]
        write_pair_jaccard(files, args.pairs, signature, os.path.join(work, "pairs_jaccard.json"))
    summary = {"removed": len(removed), "stage_seconds": seconds}
    if args.tokenizer:
        tokenizer_step = stages["filter"].pipeline[-1]
        token_bytes = sum(os.path.getsize(path) for path in glob.glob(os.path.join(work, "tokens", "*.ds")))
        summary["tokens"] = token_bytes // tokenizer_step.token_size
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
