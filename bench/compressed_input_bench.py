"""Compressed inputs: the same corpus prepared from .jsonl, .jsonl.gz and .jsonl.zst, and memory by size.

    python bench/compressed_input_bench.py                    # 50 MiB corpus, 2 rounds, a 4x .gz at the end
    python bench/compressed_input_bench.py --size_mb 20 --rounds 3

Each run is `train.py --tokenize_only` in a fresh process (default engine, pack to 2048, a fresh cache),
measured by wall time and peak PSS (bench/_measure.py). Rounds run the three files back to back, so the
ratios against the plain file (the baseline) are paired. Each run's manifest must show the same tokens and
sequences as the plain file's. Last, a corpus 4x larger, plain and .gz: if the .gz file were held whole
(or decompressed whole), its extra memory over the plain file would grow 4x with it; read as a stream, the
extra stays what it was at 1x.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

from _measure import machine_info, run_measured  # noqa: E402
from prep_bench import make_corpus, prepare_tokenizer  # noqa: E402


def compress(plain: Path, suffix: str) -> Path:
    """gzip at its default level 6 (what `gzip` does), zstd at its default level 3; both as streams."""
    import zstandard

    target = plain.with_name(plain.name + suffix)
    with open(plain, "rb") as source, open(target, "wb") as sink:
        if suffix == ".gz":
            with gzip.GzipFile(fileobj=sink, mode="wb", mtime=0) as writer:
                shutil.copyfileobj(source, writer, 1 << 20)
        else:
            zstandard.ZstdCompressor().copy_stream(source, sink)
    return target


def prepare(path: Path, tokenizer: Path, workdir: Path) -> dict:
    scratch = Path(tempfile.mkdtemp(dir=workdir))
    try:
        result = run_measured([sys.executable, "train.py", "--tokenize_only", "--dataset", str(path),
                               "--tokenizer_path", str(tokenizer), "--max_seq_length", "2048", "--cache_dir",
                               str(scratch)], cwd=str(REPO), timeout_s=3600)
        if result["returncode"]:
            raise SystemExit(f"{path.name} failed:\n{result['stderr'][-2000:]}")
        prepared = Path(result["stdout"].split("prepared: ")[-1].strip())
        manifest = json.loads((prepared / "manifest.json").read_text())
        print(f"[{path.name}] {result['wall_s']:.1f} s, peak PSS {result['peak_pss_mb']:.0f} MB", file=sys.stderr)
        return {"wall_s": result["wall_s"], "pss_mb": result["peak_pss_mb"],
                "output": (manifest["tokens"], manifest["sequences"])}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size_mb", type=float, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=BENCH / "out" / "prep")
    parser.add_argument("--tokenizer", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    plain, _ = make_corpus(args.workdir, args.size_mb, args.seed)
    tokenizer, _ = prepare_tokenizer(args, plain)
    files = [plain, compress(plain, ".gz"), compress(plain, ".zst")]
    runs: dict[str, list[dict]] = {path.name: [] for path in files}
    for _ in range(args.rounds):
        for path in files:
            runs[path.name].append(prepare(path, tokenizer, args.workdir))
    outputs = {run["output"] for name in runs for run in runs[name]}
    assert len(outputs) == 1, f"the formats prepared different data: {outputs}"
    big, _ = make_corpus(args.workdir, args.size_mb * 4, args.seed)
    big_gz = compress(big, ".gz")
    big_runs = {path.name: prepare(path, tokenizer, args.workdir) for path in (big, big_gz)}

    machine = machine_info()
    print(f"{args.size_mb:g} MiB corpus, {args.rounds} paired rounds; {machine['cpu']}, {machine['cores']} cores\n")
    print("| input | file MiB | wall s (median) | wall / plain (per-round median) | peak PSS MB (max) |")
    print("|---|---:|---:|---:|---:|")
    for path in files:
        own = runs[path.name]
        ratios = [run["wall_s"] / base["wall_s"] for run, base in zip(own, runs[plain.name])]
        print(f"| {''.join(path.suffixes)} | {path.stat().st_size / 2**20:.1f} | "
              f"{statistics.median(r['wall_s'] for r in own):.1f} | {statistics.median(ratios):.2f} | "
              f"{max(r['pss_mb'] for r in own):.0f} |")
    for path in (big, big_gz):
        print(f"| 4x corpus {''.join(path.suffixes)} | {path.stat().st_size / 2**20:.1f} | "
              f"{big_runs[path.name]['wall_s']:.1f} | — | {big_runs[path.name]['pss_mb']:.0f} |")
    extra = [max(r["pss_mb"] for r in runs[files[1].name]) - max(r["pss_mb"] for r in runs[plain.name]),
             big_runs[big_gz.name]["pss_mb"] - big_runs[big.name]["pss_mb"]]
    print(f"\n.gz over plain, peak PSS: {extra[0]:+.0f} MB at 1x, {extra[1]:+.0f} MB at 4x")
    print(f"\nSame tokens and sequences from every format: {outputs.pop()}")
    for path in (*files[1:], big, big_gz):
        path.unlink()


if __name__ == "__main__":
    main()
