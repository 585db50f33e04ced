"""What the quality filter costs besides judging: Kiwi's start-up against a small filtered prepare, and the
CPU time quality_samples.jsonl takes inside the stage.

    python bench/quality_overheads_bench.py --tokenizer tok/ --corpus ../shared/corpora/ko_real_dev/dialogue.jsonl
    python bench/quality_overheads_bench.py --tokenizer tok/ --corpus data/quality_sample.jsonl --rounds 3

Start-up: building a QualityFilter (Kiwi's model load, the first analysis) in a fresh interpreter, against
the wall time of `train.py --tokenize_only --quality_filter ko` on the corpus (fresh cache each round), and
the prepare without the filter as the named baseline. Samples: CPU seconds of the stage over the corpus's
chunks, and of SampleTaker.take within it (process time, one process).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def kiwi_startup_s() -> tuple[float, float]:
    """(wall s, CPU s) of importing the filter and building it, in a fresh interpreter."""
    code = ("import time; s, c = time.perf_counter(), time.process_time()\n"
            "from rankzero.data.quality import QualityFilter\n"
            "QualityFilter(); print(time.perf_counter() - s, time.process_time() - c)")
    wall, cpu = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                               cwd=REPO).stdout.split()
    return float(wall), float(cpu)


def prepare_s(corpus: str, tokenizer: str, *flags: str) -> float:
    with tempfile.TemporaryDirectory() as cache:
        started = time.perf_counter()
        subprocess.run([sys.executable, REPO / "train.py", "--tokenize_only", "--dataset", corpus, "--tokenizer_path",
                        tokenizer, "--cache_dir", cache, *flags], capture_output=True, check=True, cwd=REPO)
        return time.perf_counter() - started


def sample_share(corpus: str, tokenizer: str) -> tuple[float, float, int]:
    """(stage CPU-s, of which taking samples, samples taken) over the corpus's chunks."""
    from rankzero.config import StageConfig
    from rankzero.data.encode import build_engine, load_tokenizer
    from rankzero.data.quality import QualityConfig, QualityFilter
    from rankzero.data.readers import iter_chunks
    from rankzero.data.specs import resolve_source
    from rankzero.data.stage import Stage, StageSpec

    info = load_tokenizer(tokenizer)
    spec = StageSpec(StageConfig(tokenizer_path=tokenizer, quality_filter="ko"), "hf", quality=QualityConfig(),
                     hashes=False, signatures=False, truncate_to=None)
    stage = Stage(spec, info, build_engine("hf", info), QualityFilter(QualityConfig()))
    taker, spent = stage.sample_taker, [0.0]

    class Timed:
        def take(self, *args):
            started = time.process_time()
            taken = taker.take(*args)
            spent[0] += time.process_time() - started
            return taken

    stage.sample_taker = Timed()
    started = time.process_time()
    taken = sum(len(stage(chunk).quality_samples) for chunk in iter_chunks(resolve_source(corpus), 0, 1000))
    return time.process_time() - started, spent[0], taken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    startup, filtered, plain = [], [], []
    for _ in range(args.rounds):  # the systems alternate within each round: the machine's drift hits both
        startup.append(kiwi_startup_s())
        filtered.append(prepare_s(args.corpus, args.tokenizer, "--quality_filter", "ko"))
        plain.append(prepare_s(args.corpus, args.tokenizer))
    print(f"Kiwi start-up (QualityFilter()): median {statistics.median(w for w, _ in startup):.2f} s wall, "
          f"{statistics.median(c for _, c in startup):.2f} CPU-s, of {args.rounds}")
    print(f"prepare with --quality_filter ko: median {statistics.median(filtered):.2f} s; without (baseline): "
          f"{statistics.median(plain):.2f} s; start-up / filtered prepare "
          f"{statistics.median(w / f for (w, _), f in zip(startup, filtered)):.2f}")
    stage_s, samples_s, taken = sample_share(args.corpus, args.tokenizer)
    print(f"stage {stage_s:.2f} CPU-s, of which quality samples {samples_s:.3f} ({100 * samples_s / stage_s:.1f}%), "
          f"{taken} samples")


if __name__ == "__main__":
    main()
