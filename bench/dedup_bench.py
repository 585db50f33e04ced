"""Near-duplicate removal: rankzero's `--dedup near` against datatrove's MinHash pipeline (issue 19).

    python bench/dedup_bench.py --part planted --real_dir ../shared/corpora/ko_real_dev
    python bench/dedup_bench.py --part timing --size_mb 50 --rounds 2
    python bench/dedup_bench.py --part planted --skip_rankzero        # datatrove and the generator only
    python bench/dedup_bench.py --part planted --threshold 0.5        # rankzero at --dedup_threshold 0.5

--part planted: the near-copies corpus of bench/dedup_planted.py (real Korean + bench corpus, planted copies
of five kinds) through rankzero.data.dedup.near.near_duplicate_indices and through datatrove's four MinHash
stages (bench/baselines/datatrove_minhash.py, run by `--datatrove_python`, its own venv) at the same
shingle size, bands and rows. Reports, per planted kind, the share of copies removed (all of them, and
those whose true Jaccard with the original is >= the threshold), the share of distinct originals removed
(originals that genuinely near-copy an earlier original, true Jaccard >= threshold, are counted apart),
and the agreement of the two removed sets (Jaccard of the sets, and who removes what). `--threshold` sets
rankzero's --dedup_threshold (and with it its bands x rows); "true Jaccard >= threshold" in the report stays at
rankzero's default, so that the copies and the distinct originals counted are the same at every threshold.
With `--tokenizer`, the corpus also goes through `train.py --tokenize_only --dedup near` (the manifest's counts
against the function's); rankzero's first-holder rule is checked against an oracle on the same signatures.
--part timing: a `--size_mb` bench corpus (scripts/make_corpus.py) through rankzero's whole prepare
(train.py --tokenize_only --packing --max_seq_length 1024, no quality filter) with --dedup none and
--dedup near, and through datatrove's pipeline (the corpus cut into `--datatrove_shards` files so its
tasks run in parallel); paired rounds with the order alternating, wall time and peak PSS of the whole
process tree (bench/_measure.py). Ratios are medians of per-round ratios (the VM drifts).
The markdown printed at the end is ready for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(REPO))

from _measure import machine_info, run_measured, tool_env  # noqa: E402
from dedup_planted import REAL_DIR, jaccard, reference_shingles, write_planted  # noqa: E402
from dedup_report import normalisation_report, planted_report, timing_report  # noqa: E402
from scripts.make_corpus import generate  # noqa: E402

DATATROVE_SCRIPT = BENCH / "baselines" / "datatrove_minhash.py"
DEFAULT_DATATROVE_PYTHON = Path("/work/venvs/datatrove/bin/python")
SEQUENCE_LENGTH = 1024


def rankzero_settings(threshold: float | None = None) -> dict | None:
    """Shingle size, bands and rows of rankzero's --dedup near at `threshold` (None: its default), the threshold
    and the default (None: rankzero not there)."""
    try:
        from rankzero import config
        from rankzero.data.dedup import minhash, near as neardup  # noqa: F401  (neardup: the function measured)
    except ImportError:
        return None
    default = getattr(config, "DEFAULT_DEDUP_THRESHOLD", 0.8)
    threshold = default if threshold is None else threshold
    bands, rows = minhash.lsh_shape(threshold) if hasattr(minhash, "lsh_shape") else (minhash.BANDS, minhash.ROWS)
    return {"ngrams": minhash.SHINGLE_WORDS, "bands": bands, "rows": rows, "threshold": threshold,
            "default_threshold": default}


def run_datatrove(python: Path, input_dir: Path, work: Path, bands: int, rows: int, ngrams: int,
                  tasks: int, words: str = "whitespace", pairs: Path | None = None) -> list[str]:
    cmd = datatrove_command(python, input_dir, work, bands, rows, ngrams, tasks, words)
    if pairs is not None:
        cmd += ["--pairs", str(pairs)]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"datatrove failed (exit {result.returncode}):\n{result.stderr[-3000:]}")
    return (work / "removed_ids.txt").read_text(encoding="utf-8").split()


def datatrove_command(python: Path, input_dir: Path, work: Path, bands: int, rows: int, ngrams: int,
                      tasks: int, words: str = "whitespace") -> list[str]:
    return [str(python), str(DATATROVE_SCRIPT), str(input_dir), str(work), "--bands", str(bands), "--rows",
            str(rows), "--ngrams", str(ngrams), "--tasks", str(tasks), "--workers", str(tasks), "--words", words]


# --- planted ------------------------------------------------------------------------------------------


def planted_part(args: argparse.Namespace) -> str:
    work = args.workdir / "planted"
    shutil.rmtree(work, ignore_errors=True)
    corpus, label_path = write_planted(work / "input", args.real_dir, args.bench_mib, args.per_kind, args.seed)
    texts = [json.loads(line)["text"] for line in open(corpus, encoding="utf-8")]
    labels = json.loads(label_path.read_text(encoding="utf-8"))
    removed: dict[str, set[int]] = {}
    seconds: dict[str, float] = {}
    settings = rankzero_settings(args.threshold) if not args.skip_rankzero else None
    bands = args.bands or (settings or {}).get("bands") or 14
    rows = args.rows or (settings or {}).get("rows") or 8
    # `threshold` draws the near-copy line of the report (its default: the same copies at every --threshold);
    # rankzero removes at `rankzero_threshold`.
    threshold = (settings or {}).get("default_threshold", 0.8)
    rankzero_threshold = (settings or {}).get("threshold", threshold)
    rankzero = "rankzero" if rankzero_threshold == threshold else f"rankzero {rankzero_threshold:g}"
    if settings is not None:
        from rankzero.data.dedup.near import near_duplicate_indices
        start = time.perf_counter()
        removed[rankzero] = set(near_duplicate_indices(texts, threshold=rankzero_threshold))
        seconds[rankzero] = time.perf_counter() - start
    pairs = [[index, label["of"]] for index, label in enumerate(labels) if label["kind"] != "original"]
    (work / "pairs.json").write_text(json.dumps(pairs), encoding="utf-8")
    pair_jaccard: dict[str, list[float]] = {}
    if settings is not None:
        pair_jaccard["rankzero"] = rankzero_pair_jaccard(texts, pairs)
    for run in args.datatrove_runs or [f"whitespace:{bands}x{rows}"]:
        words, shape = run.split(":")
        run_bands, run_rows = (int(value) for value in shape.split("x"))
        name = f"datatrove {shape}" + ("" if words == "whitespace" else f" {words}")
        start = time.perf_counter()
        run_work = work / f"datatrove-{words}-{shape}"
        first_of_words = f"datatrove {words}" not in pair_jaccard
        ids = run_datatrove(args.datatrove_python, corpus.parent, run_work, run_bands, run_rows, 5, 1, words,
                            work / "pairs.json" if first_of_words else None)
        removed[name] = {int(doc_id) for doc_id in ids}
        if first_of_words:
            pair_jaccard[f"datatrove {words}"] = json.loads((run_work / "pairs_jaccard.json").read_text())
        seconds[name] = time.perf_counter() - start
    report = planted_report(texts, labels, removed, seconds, threshold, bands, rows, args,
                            rankzero_threshold if settings is not None else None)
    report += normalisation_report(pairs, labels, pair_jaccard, threshold)
    if settings is not None:
        report += "\n\n" + first_holder_check(texts, removed[rankzero], rankzero_threshold)
    if settings is not None and args.tokenizer:
        report += "\n" + end_to_end(args, corpus, work, texts, removed[rankzero], rankzero_threshold)
    return report


def end_to_end(args: argparse.Namespace, corpus: Path, work: Path, texts: list[str], near: set[int],
               threshold: float) -> str:
    """The same corpus through `train.py --tokenize_only --dedup near`: the manifest's counts against the function's
    (the prepare drops exact copies first, so exact + near there = the function's set joined with the exact copies)."""
    from prep_setup import check_prepared
    cmd = [sys.executable, "train.py", "--tokenize_only", "--dataset", str(corpus), "--tokenizer_path",
           str(args.tokenizer), "--max_seq_length", str(SEQUENCE_LENGTH), "--packing", "--cache_dir",
           str(work / "cache"), "--dedup", "near", "--dedup_threshold", f"{threshold:g}"]
    env = tool_env()
    result = subprocess.run(cmd, cwd=args.rankzero_repo.resolve(), env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"prepare --dedup near failed (exit {result.returncode}):\n{result.stderr[-3000:]}")
    dropped = check_prepared(result.stdout)[1].get("dropped") or {}
    seen: set[str] = set()
    expected = near | {index for index, text in enumerate(texts) if text in seen or seen.add(text)}
    total = dropped.get("near_duplicate", 0) + dropped.get("exact_duplicate", 0)
    return (f"End to end (`train.py --tokenize_only --dedup near` on this corpus): manifest dropped {dropped}; "
            f"near_duplicate_indices and exact copies: {len(expected)} "
            f"({'the same' if total == len(expected) else 'NOT the same'} total).")


def rankzero_pair_jaccard(texts: list[str], pairs: list[list[int]]) -> list[float] | None:
    """True Jaccard of each pair on rankzero's own shingles (rankzero.data.dedup.minhash, internal: None if gone)."""
    try:
        from rankzero.data.dedup.minhash import shingle_hashes
    except ImportError:
        return None
    import numpy as np
    flat, counts = shingle_hashes(texts)
    starts = np.concatenate([[0], np.cumsum(counts)])
    sets = [frozenset(flat[starts[i]:starts[i + 1]].tolist()) for i in range(len(texts))]
    return [jaccard(sets[left], sets[right]) for left, right in pairs]


def first_holder_check(texts: list[str], near: set[int], threshold: float) -> str:
    """rankzero compares a document only with the first earlier holder of each of its band keys; an oracle on
    the same signatures compares it with every earlier document sharing a band key. What the rule misses."""
    try:
        from rankzero.data.dedup.minhash import band_hashes, lsh_shape, minhash_signatures
        from rankzero.data.dedup.near import required_matches
    except ImportError:
        return ""
    import numpy as np
    parts = [minhash_signatures(texts[start:start + 1000]) for start in range(0, len(texts), 1000)]
    signatures = np.concatenate([part[0] for part in parts])
    counts = np.concatenate([part[1] for part in parts])
    keys = band_hashes(signatures, lsh_shape(threshold)[1])
    need = required_matches(threshold)
    holders: dict[tuple[int, int], list[int]] = collections.defaultdict(list)
    oracle, compared = set(), 0
    for index in range(len(texts)):
        if counts[index] == 0:
            continue
        band_keys = [(band, int(key)) for band, key in enumerate(keys[index])]
        candidates = {earlier for band_key in band_keys for earlier in holders[band_key]}
        if candidates:
            earlier = np.fromiter(candidates, dtype=np.int64)
            compared += len(earlier)
            if ((signatures[earlier] == signatures[index]).sum(axis=1) >= need).any():
                oracle.add(index)
        for band_key in band_keys:
            holders[band_key].append(index)
    return (f"First-holder rule against an oracle comparing every earlier band-sharer ({compared:,} pairs): "
            f"the oracle removes {len(oracle)}, rankzero {len(near)}; {len(oracle - near)} only by the oracle, "
            f"{len(near - oracle)} only by rankzero.")


# --- timing -------------------------------------------------------------------------------------------


def timing_part(args: argparse.Namespace) -> str:
    from prep_setup import check_prepared, split_corpus, train_tokenizer
    corpus = args.workdir / f"corpus-{args.size_mb:g}mb-seed{args.seed}.jsonl"
    if not corpus.is_file():  # generated aside, then renamed: an interrupted run leaves no half corpus
        generate(int(args.size_mb * 2**20), corpus.with_suffix(".tmp"), seed=args.seed)
        os.replace(corpus.with_suffix(".tmp"), corpus)
    shards = args.workdir / f"corpus-{args.size_mb:g}mb-seed{args.seed}-shards{args.datatrove_shards}"
    if not shards.is_dir():
        split_corpus(corpus, shards, args.datatrove_shards)
    tokenizer = args.tokenizer or args.workdir / f"tokenizer-seed{args.seed}"
    if not (tokenizer / "tokenizer.json").is_file():
        print("training the benchmark tokenizer ...", file=sys.stderr)
        train_tokenizer(corpus, tokenizer)
    settings = rankzero_settings(args.threshold) or {}
    bands, rows = args.bands or settings.get("bands", 14), args.rows or settings.get("rows", 8)
    env = tool_env()
    modes = ["none", "near", "datatrove"] if not args.skip_rankzero else ["datatrove"]
    results: dict[str, list[dict]] = {mode: [] for mode in modes}
    for round_index in range(args.rounds):
        for mode in (modes if round_index % 2 == 0 else modes[::-1]):
            scratch = args.workdir / f"run-{mode}"
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.mkdir(parents=True)
            if mode == "datatrove":
                cmd = datatrove_command(args.datatrove_python, shards, scratch, bands, rows, 5, args.datatrove_shards)
            else:
                cmd = [sys.executable, "train.py", "--tokenize_only", "--dataset", str(corpus), "--tokenizer_path",
                       str(tokenizer), "--max_seq_length", str(SEQUENCE_LENGTH), "--packing", "--cache_dir",
                       str(scratch / "cache"), "--dedup", mode]
                if mode == "near":
                    cmd += ["--dedup_threshold", f"{settings['threshold']:g}"]
            result = run_measured(cmd, env=env, cwd=str(args.rankzero_repo.resolve()))
            if result["returncode"] != 0:
                raise SystemExit(f"{mode} failed (exit {result['returncode']}):\n{result['stderr'][-3000:]}")
            entry = {"wall_s": result["wall_s"], "peak_pss_mb": result["peak_pss_mb"]}
            if mode == "datatrove":
                shutil.copyfile(scratch / "removed_ids.txt", args.workdir / "timing_datatrove_removed.txt")
                entry["removed"] = len((scratch / "removed_ids.txt").read_text().split())
                entry["stages"] = json.loads((scratch / "stage_seconds.json").read_text())
            else:
                entry["dropped"] = check_prepared(result["stdout"])[1].get("dropped")
            results[mode].append(entry)
            print(f"round {round_index + 1} {mode}: {json.dumps(entry)}", file=sys.stderr)
            shutil.rmtree(scratch, ignore_errors=True)
    report = timing_report(results, corpus, bands, rows, args)
    if "near" in results:
        report += "\n" + corpus_agreement(corpus, shards, args.workdir / "timing_datatrove_removed.txt",
                                          settings["threshold"], bands, rows)
    return report


def corpus_agreement(corpus: Path, shards: Path, datatrove_removed: Path, threshold: float, bands: int,
                     rows: int, sample: int = 40) -> str:
    """rankzero's removals on the timing corpus (its near_duplicate_indices, and exact copies as the prepare
    drops them first) against datatrove's, and the true Jaccard of a sample of the documents only one removes."""
    from rankzero.data.dedup.near import near_duplicate_indices
    texts = [json.loads(line)["text"] for line in open(corpus, encoding="utf-8")]
    first_line, start = {}, 0
    for path in sorted(shards.glob("*.jsonl")):  # datatrove's ids are "<file>/<line in that file>"
        first_line[path.name] = start
        start += sum(1 for _ in open(path, "rb"))
    ids = datatrove_removed.read_text(encoding="utf-8").split()
    datatrove = set()
    for doc_id in ids:
        path, line = doc_id.rsplit("/", 1)
        datatrove.add(first_line[Path(path).name] + int(line))
    seen: set[str] = set()
    exact = {index for index, text in enumerate(texts) if text in seen or seen.add(text)}
    near = set(near_duplicate_indices(texts, threshold))
    rankzero = exact | near
    shingles = [reference_shingles(text) for text in texts]
    lines = [f"Removed sets on this corpus ({len(texts):,} documents; rankzero = its exact copies and "
             f"near_duplicate_indices, datatrove at {bands} x {rows}): {len(rankzero & datatrove)} by both, "
             f"{len(rankzero - datatrove)} only by rankzero ({len(exact - near - datatrove)} of them exact copies "
             f"of < 5 words, which datatrove cannot shingle), {len(datatrove - rankzero)} only by datatrove; "
             f"Jaccard {len(rankzero & datatrove) / max(1, len(rankzero | datatrove)):.3f}."]
    lone_sets = {"rankzero": sorted((rankzero - datatrove) - exact), "datatrove": sorted(datatrove - rankzero)}
    for name, lone in lone_sets.items():
        if not lone:
            continue
        picked = lone[:: max(1, len(lone) // sample)][:sample]
        best = sorted(max((jaccard(shingles[index], shingles[other]) for other in range(index)), default=0.0)
                      for index in picked)
        lines.append(f"- only {name}, {len(picked)} of {len(lone)} sampled evenly: true Jaccard with the closest "
                     f"earlier document min {best[0]:.2f}, median {statistics.median(best):.2f}, max {best[-1]:.2f}; "
                     f"{sum(value >= threshold for value in best)} at >= {threshold}.")
    lines.append(first_holder_check(texts, near, threshold))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("planted", "timing"), required=True)
    parser.add_argument("--workdir", type=Path, default=REPO / "bench" / "out" / "dedup")
    parser.add_argument("--real_dir", type=Path, default=REAL_DIR)
    parser.add_argument("--bench_mib", type=float, default=3.0, help="planted: bench-corpus share of the originals")
    parser.add_argument("--per_kind", type=int, default=300, help="planted: copies per kind")
    parser.add_argument("--size_mb", type=float, default=50.0, help="timing: corpus size")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tokenizer", type=Path, default=None,
                        help="HF tokenizer dir (timing: default trains one; planted: given, the prepare runs too)")
    parser.add_argument("--bands", type=int, default=None, help="default: rankzero's, else 14")
    parser.add_argument("--rows", type=int, default=None, help="default: rankzero's, else 8")
    parser.add_argument("--threshold", type=float, default=None,
                        help="rankzero's --dedup_threshold (default: rankzero's default); its bands x rows follow it")
    parser.add_argument("--datatrove_python", type=Path, default=DEFAULT_DATATROVE_PYTHON)
    parser.add_argument("--datatrove_runs", nargs="+", default=None, metavar="WORDS:BANDSxROWS",
                        help="planted: datatrove runs, e.g. whitespace:20x6 kiwi:14x8 (words: whitespace or kiwi, "
                             "datatrove's Korean tokenizer); default: whitespace at rankzero's bands x rows")
    parser.add_argument("--datatrove_shards", type=int, default=2, help="timing: files and tasks for datatrove")
    parser.add_argument("--rankzero_repo", type=Path, default=REPO,
                        help="the rankzero checkout to measure (default: this one)")
    parser.add_argument("--skip_rankzero", action="store_true", help="datatrove and the generator only")
    args = parser.parse_args()
    if args.threshold is not None and not 0 < args.threshold <= 1:
        parser.error(f"--threshold {args.threshold:g}: must be above 0 and at most 1 (rankzero's --dedup_threshold)")
    if args.threshold is not None and args.skip_rankzero:
        print(f"warning: --threshold {args.threshold:g} is ignored with --skip_rankzero (it is rankzero's)",
              file=sys.stderr)
    sys.path.insert(0, str(args.rankzero_repo.resolve()))  # rankzero is imported (and train.py run) from there
    args.workdir = args.workdir.resolve()  # train.py runs in --rankzero_repo: every path handed to it is absolute
    args.tokenizer = args.tokenizer.resolve() if args.tokenizer else None
    if not args.datatrove_python.is_file():
        raise SystemExit(f"--datatrove_python {args.datatrove_python}: not there (make the venv: see "
                         f"{DATATROVE_SCRIPT.relative_to(REPO)})")
    args.workdir.mkdir(parents=True, exist_ok=True)
    report = planted_part(args) if args.part == "planted" else timing_part(args)
    info = machine_info()
    print(f"\n{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {info['cpu']}, {info['cores']} usable "
          f"cores, {info['ram_gb']} GB RAM; command: python bench/dedup_bench.py {' '.join(sys.argv[1:])}\n")
    print(report)


if __name__ == "__main__":
    main()
