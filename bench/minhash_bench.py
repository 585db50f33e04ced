"""MinHash signatures on real Korean text: which implementation near-dedup uses, and is it right.

    python bench/minhash_bench.py                        # ko_real_dev, 3 paired rounds
    python bench/minhash_bench.py --corpus FILE.jsonl --rounds 5

Needs `pip install datasketch` (a baseline here only; rankzero uses rensa).

Candidates, all on one core, all over the same word 5-gram shingles of the same normalised text
(NFKC, lower-case, digits folded to 0, punctuation and symbols a word break), 120 permutations:

  datasketch   datasketch.MinHash(num_perm=120).update_batch(shingles as bytes), one object per document
  rensa-doc    rensa.RMinHash(120, seed).update(shingle strings), one object per document
  numpy        rankzero's numpy shingle hashes, then MinHash in numpy (multiply-shift permutations), no library
  rankzero     rankzero.data.dedup.minhash.minhash_signatures: numpy shingle hashes, rensa's flat-buffer digest

datasketch and rensa-doc get their shingles from regular expressions and `str.split` (what a user of either
library would write; timed with them). A round runs every candidate once over the same
documents, in a rotated order; the ratios are per round (paired), against datasketch (the baseline).

Correctness: (1) rankzero's shingle counts equal the plain normaliser's distinct 5-grams per document
(the numpy path folds and splits the same way); (2) on planted near-copies (a header added, 2% or 5% of
the words replaced) and on pairs of distinct documents, each candidate's estimated Jaccard similarity is
compared with the exact one of the two shingle sets: the mean error and the share beyond 3 standard
deviations of a 120-permutation estimate.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
import unicodedata
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from rankzero.data.dedup import minhash  # noqa: E402

DEFAULT_CORPUS = REPO.parent.parent / "shared" / "corpora" / "ko_real_dev"
K = minhash.PERMUTATIONS


def read_texts(path: Path) -> list[str]:
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    return [json.loads(line)["text"] for file in files for line in file.open(encoding="utf-8") if line.strip()]


def plain_words(text: str) -> list[str]:
    """The normalisation, one character at a time (the reference the numpy path must agree with)."""
    out = []
    for char in unicodedata.normalize("NFKC", text).lower():
        if char.isspace() or unicodedata.category(char)[0] in "PS" or char == "_":
            out.append(" ")
        elif unicodedata.category(char) in ("Cf", "Cc", "Cs"):
            continue
        elif unicodedata.category(char) == "Nd":
            out.append("0")
        else:
            out.append(char)
    return "".join(out).split()


_DIGIT = re.compile(r"\d")
_PUNCTUATION = re.compile(r"[^\w\s]|_")


def regex_words(text: str) -> list[str]:
    """The same normalisation as a user of datasketch or rensa would write it (regular expressions; it differs
    from plain_words only on combining marks and the like, which \\w does not count as word characters)."""
    return _PUNCTUATION.sub(" ", _DIGIT.sub("0", unicodedata.normalize("NFKC", text).lower())).split()


def plain_shingles(text: str, words_of=plain_words) -> set[str]:
    words = words_of(text)
    return {" ".join(words[i:i + minhash.SHINGLE_WORDS]) for i in range(len(words) - minhash.SHINGLE_WORDS + 1)}


# --- the candidates: shingle sets (or texts) → (n, K) signatures ---------------------------------


def run_datasketch(shingle_sets: list[list[bytes]], texts: list[str]) -> np.ndarray:
    from datasketch import MinHash

    rows = []
    for shingles in shingle_sets:
        sketch = MinHash(num_perm=K, seed=minhash.SEED)
        sketch.update_batch(shingles)
        rows.append(sketch.hashvalues.astype(np.uint32))
    return np.array(rows)


def run_rensa_doc(shingle_sets: list[list[str]], texts: list[str]) -> np.ndarray:
    import rensa

    rows = []
    for shingles in shingle_sets:
        sketch = rensa.RMinHash(K, minhash.SEED)
        sketch.update(shingles)
        rows.append(sketch.digest())
    return np.array(rows, dtype=np.uint32)


_rng = np.random.default_rng(minhash.SEED)
_A = _rng.integers(1, 2 ** 63, size=K, dtype=np.uint64) | np.uint64(1)
_B = _rng.integers(0, 2 ** 63, size=K, dtype=np.uint64)


def run_numpy(_, texts: list[str]) -> np.ndarray:
    shingles, per_text = minhash.shingle_hashes(texts)
    out = np.full((len(texts), K), 0xFFFFFFFF, dtype=np.uint32)
    starts = np.concatenate(([0], np.cumsum(per_text)[:-1]))
    for permutation in range(K):  # one pass per permutation keeps memory at one value per shingle
        values = ((shingles * _A[permutation] + _B[permutation]) >> np.uint64(32)).astype(np.uint32)
        nonempty = per_text > 0
        out[nonempty, permutation] = np.minimum.reduceat(values, starts[nonempty]) if len(values) else 0
    return out


def run_rankzero(_, texts: list[str]) -> np.ndarray:
    return minhash.minhash_signatures(texts)[0]


CANDIDATES = {"datasketch": run_datasketch, "rensa-doc": run_rensa_doc, "numpy": run_numpy, "rankzero": run_rankzero}


def timed(name: str, texts: list[str], batch: int) -> float:
    """Seconds for `name` over `texts` in batches of `batch`, shingling included (each does its own)."""
    started = time.perf_counter()
    for start in range(0, len(texts), batch):
        part = texts[start:start + batch]
        if name in ("datasketch", "rensa-doc"):
            sets = [list(plain_shingles(t, regex_words)) for t in part]
            CANDIDATES[name]([[s.encode() for s in x] for x in sets] if name == "datasketch" else sets, part)
        else:
            CANDIDATES[name](None, part)
    return time.perf_counter() - started


# --- correctness ----------------------------------------------------------------------------------


def planted(text: str, share: float, rng: np.random.Generator) -> str:
    words = text.split()
    vocabulary = ["새로운", "기자", "오늘", "관련", "사진", "무단", "전재", "배포", "금지", "출처"]
    for index in rng.choice(len(words), size=int(round(share * len(words))), replace=False):
        words[index] = vocabulary[rng.integers(len(vocabulary))]
    return "[연합뉴스 제공] 무단 전재 및 재배포 금지\n" + " ".join(words)


def estimate(signatures: np.ndarray, a: int, b: int) -> float:
    return float((signatures[a] == signatures[b]).mean())


def check(texts: list[str], pairs: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    counts = minhash.shingle_hashes(texts)[1]
    distinct_ours = []
    shingles, _ = minhash.shingle_hashes(texts)
    for piece in np.split(shingles, np.cumsum(counts)[:-1]):
        distinct_ours.append(len(np.unique(piece)))
    reference = [len(plain_shingles(t)) for t in texts]
    same_counts = sum(a == b for a, b in zip(distinct_ours, reference))
    long = [t for t in texts if len(t.split()) >= 100]
    chosen = [long[i] for i in rng.choice(len(long), size=min(pairs, len(long)), replace=False)]
    cases = []  # (name, text a, text b)
    for text in chosen:
        for share in (0.0, 0.02, 0.05):
            cases.append((f"header+{share:.0%} words", text, planted(text, share, rng)))
    for i in range(len(chosen) - 1):
        cases.append(("distinct", chosen[i], chosen[i + 1]))
    result = {"shingle_counts_equal": f"{same_counts}/{len(texts)}", "cases": {}}
    flat = [t for _, a, b in cases for t in (a, b)]
    sets = [sorted(plain_shingles(t)) for t in flat]
    signatures = {"datasketch": run_datasketch([[s.encode() for s in x] for x in sets], flat),
                  "rensa-doc": run_rensa_doc(sets, flat), "numpy": run_numpy(None, flat),
                  "rankzero": run_rankzero(None, flat)}
    for index, (name, a, b) in enumerate(cases):
        sa, sb = set(sets[2 * index]), set(sets[2 * index + 1])
        exact = len(sa & sb) / len(sa | sb)
        entry = result["cases"].setdefault(name, {"exact": [], **{c: [] for c in signatures}})
        entry["exact"].append(exact)
        for candidate, matrix in signatures.items():
            entry[candidate].append(estimate(matrix, 2 * index, 2 * index + 1))
    summary = {}
    for name, entry in result["cases"].items():
        exact = np.array(entry["exact"])
        sd = np.sqrt(exact * (1 - exact) / K) + 1e-9
        summary[name] = {"pairs": len(exact), "exact_jaccard_median": round(float(np.median(exact)), 3)}
        for candidate in signatures:
            error = np.array(entry[candidate]) - exact
            summary[name][candidate] = {"mean_error": round(float(error.mean()), 4),
                                        "beyond_3_sd": int((np.abs(error) > 3 * sd + 1 / K).sum())}
    result["cases"] = summary
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="a .jsonl file or a dir of them")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3, help="time over the corpus this many times over")
    parser.add_argument("--batch", type=int, default=1000, help="documents per call (the stage's chunk)")
    parser.add_argument("--numpy_share", type=float, default=1.0, help="numpy runs on this share only (it is slow)")
    parser.add_argument("--pairs", type=int, default=60)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    texts = read_texts(args.corpus)
    if not texts:
        raise SystemExit(f"--corpus {args.corpus}: no documents")
    timed_texts = texts * args.repeat
    mib = sum(len(t.encode()) for t in timed_texts) / 2 ** 20
    names = list(CANDIDATES)
    rounds = []
    for round_index in range(args.rounds):
        order = names[round_index % len(names):] + names[:round_index % len(names)]
        figures = {}
        for name in order:
            part = timed_texts[:max(1, int(len(timed_texts) * args.numpy_share))] if name == "numpy" else timed_texts
            seconds = timed(name, part, args.batch)
            figures[name] = {"docs_per_s": len(part) / seconds, "mib_per_s": mib * len(part) / len(timed_texts) / seconds}
        rounds.append(figures)
        print(f"round {round_index + 1}: " + ", ".join(f"{n} {figures[n]['docs_per_s']:,.0f} docs/s" for n in names),
              file=sys.stderr)
    summary = {name: {"docs_per_s_median": round(statistics.median(r[name]["docs_per_s"] for r in rounds)),
                      "mib_per_s_median": round(statistics.median(r[name]["mib_per_s"] for r in rounds), 2),
                      "speed_vs_datasketch_per_round": [round(r[name]["docs_per_s"] / r["datasketch"]["docs_per_s"], 2)
                                                        for r in rounds]}
               for name in names}
    summary["rankzero"]["speed_vs_each_per_round"] = {
        name: [round(r["rankzero"]["docs_per_s"] / r[name]["docs_per_s"], 2) for r in rounds]
        for name in names if name != "rankzero"}
    import datetime

    from _measure import machine_info

    report = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "machine": machine_info(), "corpus": str(args.corpus), "documents": len(timed_texts), "mib": round(mib, 2),
              "permutations": K, "rounds": args.rounds, "speed": summary, "correctness": check(texts, args.pairs, 0)}
    text = json.dumps(report, indent=None, ensure_ascii=False)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
