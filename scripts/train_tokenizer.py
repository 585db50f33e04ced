"""Train a lossless, Korean-aware byte-level BPE tokenizer from the same sources as train.py.

    python scripts/train_tokenizer.py --dataset data/sample/ --vocab_size 32000 --output_dir tokenizers/ko32k
    python scripts/train_tokenizer.py --dataset corpus/*.jsonl --vocab_size 64000 --max_bytes 2000000000 \
        --output_dir tokenizers/ko64k
    python scripts/train_tokenizer.py --dataset ko_news.parquet --vocab_size 40000 \
        --base_tokenizer tokenizers/en32k --output_dir tokenizers/en32k+ko     # extend, old ids kept

Sources are read as a stream (one pass, records→text as in train.py), capped by --max_documents or
--max_bytes; a deterministic 1/--heldout_fraction of documents is never trained on and gives the
chars-per-token figure printed at the end (with --base_tokenizer, the base's on the same text beside it).
Progress goes to stderr; the last stdout line is `saved: <output_dir>`. The choices behind the tokenizer are documented in rankzero/tokenizer_trainer.py.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from a checkout


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", nargs="+", required=True,
                        help="Sources as for train.py: files (.jsonl .json .parquet .csv .txt), dirs, globs, "
                             "save_to_disk dirs, hub names.")
    parser.add_argument("--vocab_size", type=int, required=True,
                        help="Vocabulary size (with --base_tokenizer: the size after extension).")
    parser.add_argument("--output_dir", required=True, help="Where the HF fast tokenizer is saved.")
    parser.add_argument("--text_column", default=None, help="Column holding the text (default: detected).")
    parser.add_argument("--txt_sample_by", default="line", choices=["line", "paragraph", "document"],
                        help="How .txt files split into documents.")
    parser.add_argument("--max_documents", type=int, default=None, help="Stop reading after this many documents.")
    parser.add_argument("--max_bytes", type=int, default=None, help="Stop reading after this many bytes of text.")
    parser.add_argument("--base_tokenizer", default=None,
                        help="An HF byte-level BPE tokenizer dir to extend; every existing token keeps its id.")
    parser.add_argument("--heldout_fraction", type=float, default=0.01,
                        help="Share of documents held out of training to measure chars per token.")
    args = parser.parse_args(argv)

    problems = []  # all argument problems reported together, before any reading
    if args.vocab_size <= 0:
        problems.append(f"--vocab_size {args.vocab_size}: must be positive")
    for flag in ("max_documents", "max_bytes"):
        value = getattr(args, flag)
        if value is not None and value <= 0:
            problems.append(f"--{flag} {value}: must be positive (leave it out for no cap)")
    if not 0.0 <= args.heldout_fraction < 1.0:
        problems.append(f"--heldout_fraction {args.heldout_fraction}: must be in [0, 1)")
    if args.base_tokenizer and not os.path.isfile(os.path.join(args.base_tokenizer, "tokenizer.json")):
        problems.append(f"--base_tokenizer {args.base_tokenizer}: no tokenizer.json there")
    from rankzero.data.inputs.specs import resolve_source
    from rankzero.errors import RankzeroError

    for spec in args.dataset:
        try:
            resolve_source(spec)
        except RankzeroError as error:
            problems.append(str(error))
    if os.path.isfile(args.output_dir):
        problems.append(f"--output_dir {args.output_dir}: is a file")
    if problems:
        raise ValueError(problems[0] if len(problems) == 1 else
                         f"{len(problems)} problems with the arguments:\n  " + "\n  ".join(problems))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    from rankzero.data.inputs.readers import iter_texts
    from rankzero.tokenizer_trainer import DocumentStream, chars_per_token, hangul_share, train_tokenizer

    texts = iter_texts(args.dataset, text_column=args.text_column, txt_sample_by=args.txt_sample_by)
    first = next(texts, None)  # an empty source is an error before training, not an empty tokenizer
    if first is None:
        raise ValueError(f"--dataset {' '.join(args.dataset)}: no documents to train on")
    documents = DocumentStream(
        itertools.chain([first], texts), max_documents=args.max_documents, max_bytes=args.max_bytes,
        heldout_fraction=args.heldout_fraction,
    )
    mode = f"extending {args.base_tokenizer} to" if args.base_tokenizer else "training"
    print(f"{mode} a byte-level BPE of {args.vocab_size:,} tokens on {' '.join(args.dataset)}: "
          "reading, then merging", file=sys.stderr, flush=True)
    started = time.monotonic()
    tokenizer = train_tokenizer(documents, args.vocab_size, args.output_dir,
                                base_tokenizer=args.base_tokenizer, show_progress=True)
    print(f"trained in {time.monotonic() - started:.1f} s ({documents.elapsed_s:.1f} s of it reading); "
          f"{len(tokenizer):,} tokens", file=sys.stderr, flush=True)

    heldout = documents.heldout
    if heldout:
        korean = [text for text in heldout if hangul_share(text) >= 0.4]

        def figures(encoder) -> str:
            line = (f"{chars_per_token(encoder, heldout):.3f} ({len(heldout):,} docs, "
                    f"{sum(map(len, heldout)):,} chars)")
            return line + (f"; Korean docs: {chars_per_token(encoder, korean):.3f} ({len(korean):,} docs)"
                           if korean else "")

        print(f"held-out chars/token: {figures(tokenizer)}", flush=True)
        if args.base_tokenizer:  # what the extension gained, on the same text
            from transformers import AutoTokenizer

            print(f"  the base {args.base_tokenizer} on the same text: "
                  f"{figures(AutoTokenizer.from_pretrained(args.base_tokenizer))}", flush=True)
    else:
        print(f"held-out chars/token: n/a (no document held out at --heldout_fraction {args.heldout_fraction} "
              f"of {documents.documents:,} docs)", flush=True)
    print(f"saved: {args.output_dir}", flush=True)
    return 0


if __name__ == "__main__":
    from rankzero.errors import run_cli

    sys.exit(run_cli(main))
