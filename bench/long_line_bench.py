"""Memory for one very long document: rankzero's prepare against encoding the line whole.

    python bench/long_line_bench.py                 # a 50 MB JSONL line made of the bench corpus
    python bench/long_line_bench.py --size_mb 10

The corpus is one JSON line whose text is the bench corpus's documents joined by blank lines (plus
one short document). Each run is a fresh process, measured by its peak PSS (bench/_measure.py):
  (a)  rankzero   train.py --tokenize_only (default engine; long texts are encoded in pieces)
  (a-hf)          the same with --tokenizer_engine hf
  (w)  whole      the line's text encoded in one `encode_batch_fast` call of the HF tokenizer — what
                  rankzero did before pieces, and what any pipeline that tokenizes a document at once does
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

from _measure import machine_info, run_measured  # noqa: E402
from prep_bench import make_corpus, prepare_tokenizer  # noqa: E402

WHOLE = """
import json, sys
from tokenizers import Tokenizer
text = json.loads(open(sys.argv[1], encoding="utf-8").readline())["text"]
tokens = len(Tokenizer.from_file(sys.argv[2] + "/tokenizer.json").encode_batch_fast([text], add_special_tokens=False)[0])
print("tokens", tokens)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size_mb", type=float, default=50)
    parser.add_argument("--workdir", type=Path, default=BENCH / "out" / "prep")
    parser.add_argument("--tokenizer", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    corpus, _ = make_corpus(args.workdir, args.size_mb, args.seed)
    tokenizer, _ = prepare_tokenizer(args, corpus)
    line = args.workdir / f"long-line-{args.size_mb:g}mb.jsonl"
    texts = [json.loads(row)["text"] for row in corpus.read_text(encoding="utf-8").splitlines()]
    with open(line, "w", encoding="utf-8") as handle:
        handle.write(json.dumps({"text": "\n\n".join(texts)}, ensure_ascii=False) + "\n")
        handle.write(json.dumps({"text": "짧은 문서 하나."}, ensure_ascii=False) + "\n")
    line_mb = line.stat().st_size / 1e6
    rows = []
    for label, extra in (("a", []), ("a-hf", ["--tokenizer_engine", "hf"]), ("w", None)):
        scratch = Path(tempfile.mkdtemp(dir=args.workdir))
        try:
            if extra is None:
                cmd = [sys.executable, "-c", WHOLE, str(line), str(tokenizer)]
            else:
                cmd = [sys.executable, "train.py", "--tokenize_only", "--dataset", str(line), "--tokenizer_path",
                       str(tokenizer), "--max_seq_length", "2048", "--cache_dir", str(scratch), *extra]
            result = run_measured(cmd, cwd=str(REPO), timeout_s=3600)
            if result["returncode"]:
                raise SystemExit(f"({label}) failed:\n{result['stderr'][-2000:]}")
            rows.append((label, result["wall_s"], result["peak_pss_mb"]))
            print(f"[{label}] {result['wall_s']:.1f} s, peak PSS {result['peak_pss_mb']:.0f} MB", file=sys.stderr)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    machine = machine_info()
    print(f"One {line_mb:.0f} MB JSONL line; {machine['cpu']}, {machine['cores']} cores\n")
    print("| run | wall s | peak PSS MB | bytes of memory per input byte |\n|---|---:|---:|---:|")
    for label, wall, pss in rows:
        print(f"| ({label}) | {wall:.1f} | {pss:.0f} | {pss / line_mb:.1f} |")
    line.unlink()


if __name__ == "__main__":
    main()
