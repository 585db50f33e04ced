"""Chars per token on unseen Korean text: our tokenizer against a plain byte-level BPE, same data and vocab.

    python bench/tokenizer_bench.py                       # data/sample, vocab 2000 4000 8000
    python bench/tokenizer_bench.py --vocab_sizes 2000 --heldout_share 0.25

Data: the unique sentences of data/sample/ko.jsonl are split (seeded) into training and held-out
sentences; the training text is every sample document with its held-out sentences removed (so
frequent sentences stay frequent, as in a crawl), plus the training lines of data/sample/en.txt.
Held-out sentences never reach a trainer, so the figures are not flattered by memorisation; they are
measured as paragraphs of five sentences, as they occur in documents.

Tokenizers, all trained by the same `tokenizers` BpeTrainer on the same text with the same special
tokens and vocab size:
  ours               rankzero.tokenizer_trainer (Hangul runs kept with their leading space and may end in one
                     sentence mark, scripts separated, single digits, other punctuation apart, no normalizer)
  baseline           the default ByteLevel pre-tokenizer (GPT-2 regex, prefix space added) and nothing else
  ours+digit-runs    ablation: digit runs instead of single digits (what splitting digits costs)
  ours+prefix-space  ablation: a space added before each text, as the baseline does (not lossless)
  ours-final-punct   ablation: . , ? ! may not close a Hangul run (so "습니다." cannot become one token)
Also measured: extending a tokenizer trained on the English lines alone with Korean text
(`base_tokenizer=`), against that English-only base.

Columns: Korean and English held-out chars/token (higher is better), and whether decode(encode(x))
gives back x on the held-out text plus tricky strings (tabs, CRLF, NBSP, ①, emoji, leading spaces).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rankzero import tokenizer_trainer as rz  # noqa: E402

SENTENCE_SPLIT = re.compile(r"(?<=[.?!])\s+|\n+")
TRICKY = [" leading space", "tab\there", "crlf\r\nline", "nbsp\u00a0zero\u200bwidth", "제1조 ① ② ③",
          "이모지 👍🏽🇰🇷", "  두 칸  띄어쓰기  ", "x == y -> z\n\tif a:\n"]


def load_split(heldout_share: float, seed: int) -> tuple[list[str], list[str], list[str], list[str]]:
    """(training texts, Korean held-out sentences, English held-out lines, English training lines)."""
    documents = [json.loads(line)["text"] for line in open(REPO / "data/sample/ko.jsonl", encoding="utf-8")]
    sentences = sorted({s.strip() for d in documents for s in SENTENCE_SPLIT.split(d) if s.strip()})
    rng = random.Random(seed)
    heldout = set(rng.sample(sentences, round(len(sentences) * heldout_share)))
    training = []
    for document in documents:
        kept = [p for p in SENTENCE_SPLIT.split(document) if p.strip() and p.strip() not in heldout]
        if kept:
            training.append(" ".join(kept))
    english = [line.strip() for line in open(REPO / "data/sample/en.txt", encoding="utf-8") if line.strip()]
    rng.shuffle(english)
    cut = round(len(english) * (1 - heldout_share))
    # Held-out sentences are evaluated as paragraphs of five, as they occur in documents: a lone
    # sentence has no space before its first word, which would make every first word look rare.
    heldout_sentences = sorted(heldout)
    rng.shuffle(heldout_sentences)
    paragraphs = [" ".join(heldout_sentences[i:i + 5]) for i in range(0, len(heldout_sentences), 5)]
    return training + english[:cut], paragraphs, english[cut:], english[:cut]


VARIANTS = ("ours", "baseline", "ours+digit-runs", "ours+prefix-space", "ours-final-punct")


def train_variant(name: str, texts: list[str], vocab_size: int):
    """Train one variant; the ablations change exactly one of our choices."""
    from tokenizers import Regex, pre_tokenizers

    backend, trainer = rz.build_backend(vocab_size, korean_choices=name != "baseline")
    pattern, prefix_space = rz.PRETOKENIZE_PATTERN, False
    if name == "ours+digit-runs":
        pattern = pattern.replace(r" ?\p{N}|", r" ?\p{N}+|")
    elif name == "ours-final-punct":
        pattern = pattern.replace(r" ?\p{Hangul}+[.,?!]?|", r" ?\p{Hangul}+|")
    elif name == "ours+prefix-space":
        prefix_space = True
    if name != "baseline":
        assert name in ("ours", "ours+prefix-space") or pattern != rz.PRETOKENIZE_PATTERN, name
        backend.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=prefix_space, use_regex=False),
        ])
    backend.train_from_iterator(texts, trainer=trainer)
    return backend


def lossless(backend, texts: list[str]) -> bool:
    return all(backend.decode(backend.encode(t, add_special_tokens=False).ids, skip_special_tokens=False) == t
               for t in texts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab_sizes", type=int, nargs="+", default=[2000, 4000, 8000])
    parser.add_argument("--heldout_share", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not (REPO / "data/sample/ko.jsonl").is_file():
        raise SystemExit("data/sample/ko.jsonl is missing: run python data/sample/make_sample.py")

    training, korean, english, english_training = load_split(args.heldout_share, args.seed)
    print(f"# tokenizer bench — {platform.node()}, {platform.processor() or platform.machine()}, "
          f"{date.today().isoformat()}, tokenizers {__import__('tokenizers').__version__}")
    print(f"training: {len(training)} texts, {sum(map(len, training)):,} chars; held-out: {len(korean)} Korean "
          f"paragraphs ({sum(map(len, korean)):,} chars), {len(english)} English lines "
          f"({sum(map(len, english)):,} chars)\n")
    print("| vocab | tokenizer | Korean chars/token | English chars/token | lossless | train s |")
    print("|---:|---|---:|---:|:---:|---:|")
    for vocab_size in args.vocab_sizes:
        for name in VARIANTS:
            started = time.perf_counter()
            backend = train_variant(name, training, vocab_size)
            elapsed = time.perf_counter() - started
            print(f"| {backend.get_vocab_size()} | {name} | {rz.chars_per_token(backend, korean):.3f} | "
                  f"{rz.chars_per_token(backend, english):.3f} | "
                  f"{'yes' if lossless(backend, korean + english + TRICKY) else 'no'} | {elapsed:.2f} |", flush=True)

    print("\nExtending an English-only tokenizer with Korean (`base_tokenizer=`), old ids kept:\n")
    print("| tokenizer | vocab | Korean chars/token | English chars/token | lossless |")
    print("|---|---:|---:|---:|:---:|")
    korean_training = training[: len(training) - len(english_training)]
    base_size = min(args.vocab_sizes)
    with tempfile.TemporaryDirectory() as work:
        base = rz.train_tokenizer(english_training, base_size, os.path.join(work, "base"))
        rows = [("English-only base", base)]
        for vocab_size in sorted(v for v in args.vocab_sizes if v > base_size):
            extended = rz.train_tokenizer(korean_training, vocab_size, os.path.join(work, f"ext{vocab_size}"),
                                          base_tokenizer=os.path.join(work, "base"))
            old = base.get_vocab()
            assert all(extended.get_vocab()[t] == i for t, i in old.items())
            rows.append(("base + Korean", extended))
        for name, tokenizer in rows:
            backend = tokenizer.backend_tokenizer
            print(f"| {name} | {len(tokenizer)} | {rz.chars_per_token(backend, korean):.3f} | "
                  f"{rz.chars_per_token(backend, english):.3f} | "
                  f"{'yes' if lossless(backend, korean + english + TRICKY) else 'no'} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
