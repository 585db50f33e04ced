"""Baseline (e): Kiwi morphological analysis alone over a corpus's Korean documents, on all cores.

    python bench/baselines/kiwi_only.py corpus.jsonl [--num_workers N] [--min_hangul_share 0.4]

One `split_into_sents(texts, return_tokens=True)` pass per document — the analysis the Korean quality
filter needs — through Kiwi's own thread pool, the generator iterated to the end. Documents whose
Hangul share of non-space characters is below `--min_hangul_share` are skipped, as a filter would skip
them (English, code, symbol junk never reach Kiwi). Compare `--quality_filter ko` against this.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time


HANGUL = re.compile("[\uac00-\ud7a3]")
SPACE = re.compile(r"\s")


def hangul_share(text: str) -> float:
    """Share of complete Hangul syllables among the non-space characters."""
    letters = len(text) - len(SPACE.findall(text))
    return len(HANGUL.findall(text)) / letters if letters else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", help="JSONL file with a text field")
    parser.add_argument("--num_workers", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--min_hangul_share", type=float, default=0.4)
    parser.add_argument("--text_column", default="text")
    args = parser.parse_args()

    start = time.perf_counter()
    from kiwipiepy import Kiwi

    kiwi = Kiwi(num_workers=args.num_workers)
    counts = {"documents": 0, "korean": 0, "characters": 0}

    def korean_texts():
        with open(args.corpus, "rb") as handle:
            for line in handle:
                if not line.strip():
                    continue
                counts["documents"] += 1
                text = json.loads(line)[args.text_column]
                if hangul_share(text) < args.min_hangul_share:
                    continue
                counts["korean"] += 1
                counts["characters"] += len(text)
                yield text

    # One generator for the whole corpus: Kiwi reads ahead of its workers, so the pool never drains
    # between batches the way it would if we handed it one list at a time.
    sentences = morphemes = 0
    for document in kiwi.split_into_sents(korean_texts(), return_tokens=True):
        sentences += len(document)
        morphemes += sum(len(sentence.tokens) for sentence in document)
    seconds = time.perf_counter() - start
    print(f"docs: {counts['documents']} korean: {counts['korean']} sentences: {sentences} "
          f"morphemes: {morphemes} seconds: {seconds:.2f} chars/s: {counts['characters'] / seconds:.0f}")


if __name__ == "__main__":
    main()
