"""SFT rows: how much of a batch is padding with rows of whole samples bin-packed (rankzero's --mode sft)
against one sample per row (the baseline: --no_packing, or a plain SFT collator), and what the window costs.

    python bench/sft_packing_bench.py                         # the shipped chat sample, the dialogue corpus
    python bench/sft_packing_bench.py --max_seq_length 2048 --batch_size 4

Padding is what the collator adds: each batch of `--batch_size` rows (in a seeded random order, as the
sampler draws them) is padded to its longest row rounded up to 8. Sample lengths come from the stage
itself (chat template, labels, EOS) with a tokenizer trained here on data/sample (vocabulary 8000).
The dialogue corpus (../shared/corpora/ko_real_dev/dialogue.jsonl, read in place) is turned into chats
turn by turn in a temporary file. A synthetic set of 100,000 lengths (lognormal) shows how the window
size changes the fill, and how fast the packer runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rankzero.data.pack import BinPacker

DIALOGUE = REPO.parent / "shared" / "corpora" / "ko_real_dev" / "dialogue.jsonl"  # beside the main checkout


def sample_lengths(path: Path, tokenizer: Path) -> np.ndarray:
    """Each SFT sample's length as the prepare makes it (untruncated)."""
    from rankzero.args import parse_args
    from rankzero.data.plan import make_plan
    from rankzero.data.readers import iter_chunks
    from rankzero.data.stage import Stage, StageSpec

    args = parse_args(["--tokenize_only", "--dataset", str(path), "--tokenizer_path", str(tokenizer), "--mode", "sft"])
    plan = make_plan(args.sources, args.stage, args.packing, args.dedup, args.workers, args.seed)
    stage = Stage(StageSpec(plan.stage, "hf", quality=None, hashes=False, signatures=False, truncate_to=None),
                  plan.tokenizer)
    return np.concatenate([stage(chunk).lengths for chunk in iter_chunks(plan.sources[0], 0, 1000, "line")])


def dialogue_chats(source: Path, directory: Path) -> Path | None:
    if not source.is_file():
        return None
    roles = {"사용자": "user", "시스템": "assistant"}
    path = directory / "dialogue_chat.jsonl"
    with open(path, "w", encoding="utf-8") as out:
        for line in source.read_text(encoding="utf-8").splitlines():
            messages = []
            for turn in json.loads(line)["text"].splitlines():
                speaker, _, content = turn.partition(":")
                if speaker.strip() in roles and content.strip():
                    messages.append({"role": roles[speaker.strip()], "content": content.strip()})
            if any(m["role"] == "assistant" for m in messages):
                out.write(json.dumps({"messages": messages}, ensure_ascii=False) + "\n")
    return path


def bin_rows(lengths: np.ndarray, max_seq_length: int, window: int) -> list[int]:
    """Row lengths of bin packing (samples truncated to a row first, as the stage does)."""
    lengths = np.minimum(lengths, max_seq_length)
    packer = BinPacker(max_seq_length, window=window)
    ids = np.zeros(int(lengths.sum()), dtype=np.int32)
    rows = []
    for blocks in (packer.add(ids, lengths), packer.flush()):
        if blocks is not None:
            rows += [sum(row) for row in blocks.document_lengths.to_pylist()]
    return rows


def padding_share(rows: list[int], batch_size: int, seed: int = 0) -> float:
    order = np.random.default_rng(seed).permutation(len(rows))
    rows = np.asarray(rows)[order]
    real = padded = 0
    for start in range(0, len(rows), batch_size):
        batch = rows[start:start + batch_size]
        width = -(-int(batch.max()) // 8) * 8
        real += int(batch.sum())
        padded += width * len(batch)
    return 1 - real / padded


def report(name: str, lengths: np.ndarray, max_seq_length: int, batch_size: int) -> None:
    one_per_row = list(np.minimum(lengths, max_seq_length))
    packed = bin_rows(lengths, max_seq_length, 1000)
    print(f"{name}: {len(lengths):,} samples, mean {lengths.mean():.0f} tokens, longest {lengths.max():,}, "
          f"{int((lengths > max_seq_length).sum())} truncated at {max_seq_length}")
    for label, rows in (("one sample per row", one_per_row), ("bin packing (window 1000)", packed)):
        print(f"  {label:<28} rows {len(rows):>7,}   padding {100 * padding_share(rows, batch_size):5.1f}%   "
              f"mean fill {100 * np.mean(rows) / max_seq_length:5.1f}%")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max_seq_length", type=int, nargs="+", default=[512, 1024])
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--dialogue", type=Path, default=DIALOGUE, help="ko_real_dev/dialogue.jsonl (skipped if absent)")
    options = parser.parse_args()
    from rankzero.tokenizer_trainer import train_tokenizer

    with tempfile.TemporaryDirectory() as temporary:
        temporary = Path(temporary)
        texts = [json.loads(line).get("text", "") for line in (REPO / "data/sample/ko.jsonl").read_text().splitlines()]
        texts += (REPO / "data/sample/en.txt").read_text().splitlines()
        tokenizer = temporary / "tokenizer"
        train_tokenizer([t for t in texts if t], 8000, tokenizer)
        sets = {"data/sample/chat.jsonl": sample_lengths(REPO / "data/sample/chat.jsonl", tokenizer)}
        dialogue = dialogue_chats(options.dialogue, temporary)
        if dialogue is not None:
            sets["ko_real_dev/dialogue.jsonl as chats"] = sample_lengths(dialogue, tokenizer)
        for max_seq_length in options.max_seq_length:
            for name, lengths in sets.items():
                report(name, lengths, max_seq_length, options.batch_size)

    # The window: more samples to choose from fill rows better; the packer's own speed.
    rng = np.random.default_rng(0)
    synthetic = np.clip(rng.lognormal(np.log(300), 0.8, 100_000).astype(np.int64), 8, 2048)
    print(f"synthetic: 100,000 lognormal lengths (median 300, clipped to 8-2048), rows of 2048, batch "
          f"{options.batch_size}")
    for window in (100, 1000, 10_000):
        started = time.perf_counter()
        rows = bin_rows(synthetic, 2048, window)
        seconds = time.perf_counter() - started
        print(f"  window {window:>6,}: rows {len(rows):,}, padding {100 * padding_share(rows, options.batch_size):.2f}%, "
              f"packing {len(synthetic) / seconds / 1e3:,.0f}k samples/s")
    print(f"  one sample per row: rows {len(synthetic):,}, padding "
          f"{100 * padding_share(list(synthetic), options.batch_size):.1f}%")


if __name__ == "__main__":
    main()
