"""Could a cheap classifier, distilled from the full filter's verdicts, replace Kiwi for the short Korean
documents the surface cannot decide? Measured for issue 20: no (docs/quality.md, "What the filter costs").

    python bench/quality_distill_probe.py --dev ../shared/corpora/ko_real_dev --real ../real_ko ../statutes \
        --train_errors 0 0.005 --models a b fasttext      # fasttext: pip install fasttext-wheel

1. Every corpus (as `bench/quality_eval.py --throughput` reads them) goes through the filter's cheap rules;
   the Korean documents the surface does not keep are the ones Kiwi reads today (their sample, and the
   whole when re-read: what Kiwi's CPU time is measured on). Each is labelled with the full filter's
   verdict (keep/drop) and described by what the filter computes without Kiwi: the surface statistics,
   the Hangul shares, character, word and repetition shares, lengths.
2. Classifiers: (a) logistic regression on those features; (b) the same plus hashed character 1-3-grams
   (what fastText learns, without its embedding), both in numpy; (c) fastText itself. A classifier
   decides a document only where it is confident, its P(keep) above a keep bar or below a drop bar,
   both chosen from 5-fold out-of-fold predictions on the training part (the laxest bars with at most
   `--train_errors` of the decided training documents wrong); Kiwi reads the rest.
3. Held-out evaluation only: within a corpus, trained on the first half of its Kiwi documents (what a
   prepare would train on: its first N) or on the even documents, measured on the rest; across corpora,
   trained on every other corpus (for the genres also every other genre), measured on this one; a
   learning curve; and an optimistic bound (the keep bar chosen on the measured part itself). Reported:
   the share of Kiwi's characters the classifier would spare, the disagreements with the full filter as
   a share of ALL the documents of the measured part (the issue allows 0.5%), and the genre or junk kind
   whose kept rate moves most (the issue allows 1 point).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import zlib
from collections import defaultdict
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from rankzero.data.quality import QualityFilter, characters, korean, mojibake, repetition, words  # noqa: E402
from rankzero.data.quality.filter import _NEEDS_KIWI  # noqa: E402

import quality_cost  # noqa: E402

HASH_BUCKETS = 2**13
HEADER = ("| test set | docs | reach Kiwi | Kiwi chars | spared | wrong keeps | wrong drops | agreement | "
          "worst genre moved, points |\n|---|---:|---:|---:|---:|---:|---:|---:|---|")
MODELS = {False: "(a) logistic regression on the cheap features",
          True: "(b) logistic regression on the cheap features + hashed character 1-3-grams",
          "fasttext": "(c) fastText on the text (word bigrams, character 1-3-grams)"}


def cheap_features(text: str, config) -> list[float]:
    """What the filter knows about a document before Kiwi, as numbers."""
    stats = {}
    stats.update(korean.hangul_statistics(text))
    stats.update(korean.surface_statistics(text))
    stats.update(characters.statistics(text, config))
    stats.update(words.statistics(text, config))
    stats.update(repetition.statistics(text, config))
    values = [float(value) for _, value in sorted(stats.items())]
    lines = text.count("\n") + 1
    runs = korean._HANGUL_WORD.findall(text)
    last = runs[-1][-1] if runs else ""
    values += [math.log(len(text)), math.log(lines), float(text.rstrip()[-1:] in ".!?"),
               float(last in korean._FINAL_SYLLABLES), float(last in korean._PARTICLE_SYLLABLES),
               math.log1p(stats["surface_words"]), math.log1p(stats["surface_sentences"])]
    return values


def ngram_buckets(text: str) -> np.ndarray:
    """Hashed character 1-3-grams (crc32, stable across runs), counts normalised to sum 1."""
    counts = defaultdict(float)
    padded = f" {text} "
    for n in (1, 2, 3):
        for start in range(len(padded) - n + 1):
            counts[zlib.crc32(padded[start:start + n].encode()) % HASH_BUCKETS] += 1.0
    total = sum(counts.values())
    keys = np.fromiter(counts.keys(), dtype=np.int64)
    return keys, np.fromiter(counts.values(), dtype=np.float64) / total


def kiwi_reads(quality: QualityFilter, text: str) -> list[str]:
    """What Kiwi reads of this document today: its sample, and the whole when re-read."""
    config = quality.config
    sample = korean.kiwi_sample(text, config.kiwi_max_chars, config.kiwi_windows)
    if len(text) <= config.kiwi_max_chars:
        return [sample]
    stats = korean.prose_statistics(sample, quality._kiwi.tokenize(sample), config)
    if korean.kiwi_reason(stats, config) or korean.near_threshold(stats, config):
        return [sample, text[:config.kiwi_recheck_max_chars]]
    return [sample]


def kiwi_documents(quality: QualityFilter, records: list[dict]) -> dict:
    """The documents Kiwi reads today (index, group, chars, features, n-grams, full verdict keeps?),
    and every document's verdict by group."""
    config = quality.config
    verdicts = quality.judge_batch([record["text"] for record in records])
    rows, kiwi_s = [], 0.0
    for index, record in enumerate(records):
        text, reason = mojibake.repair(record["text"], config.repair_mojibake)
        text = text.strip()
        if reason or quality._reason_before_kiwi(text) is not _NEEDS_KIWI:
            continue
        if korean.surface_keeps(korean.surface_statistics(text)):
            continue
        reads = kiwi_reads(quality, text)
        start = time.process_time()
        for piece in reads:
            quality._kiwi.tokenize(piece)
        kiwi_s += time.process_time() - start
        rows.append({"index": index, "group": record["group"], "chars": sum(map(len, reads)),
                     "features": cheap_features(text, config), "ngrams": ngram_buckets(text),
                     "keep": verdicts[index] is None, "text": text})
    return {"rows": rows, "groups": [record["group"] for record in records], "verdicts": verdicts, "kiwi_s": kiwi_s,
            "bytes": sum(len(record["text"].encode()) for record in records)}


def design(rows: list[dict], with_ngrams: bool, mean=None, std=None):
    dense = np.array([row["features"] for row in rows])
    if mean is None:
        mean, std = dense.mean(0), dense.std(0) + 1e-9
    dense = (dense - mean) / std
    if not with_ngrams:
        return dense, mean, std
    sparse = np.zeros((len(rows), HASH_BUCKETS))
    for i, row in enumerate(rows):
        keys, values = row["ngrams"]
        np.add.at(sparse[i], keys, values * 30.0)  # scaled to the dense features' spread
    return np.hstack([dense, sparse]), mean, std


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float, steps: int = 300) -> np.ndarray:
    """L2-regularised logistic regression by gradient descent with Adam (x gets a bias column)."""
    x = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(x.shape[1])
    m = v = np.zeros_like(w)
    for step in range(1, steps + 1):
        p = 1 / (1 + np.exp(-np.clip(x @ w, -30, 30)))
        grad = x.T @ (p - y) / len(y) + l2 * np.r_[w[:-1], 0.0]
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad**2
        w = w - 0.05 * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
    return w


def predict(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-np.clip(np.hstack([x, np.ones((len(x), 1))]) @ w, -30, 30)))


def thresholds(p: np.ndarray, y: np.ndarray, allowed: float) -> tuple[float, float]:
    """The laxest (keep, drop) probability bars under which at most `allowed` of the decided training
    documents are wrong, each side on its own."""
    order = np.argsort(-p)  # keep side: from the most confident keep down
    wrong = np.cumsum(y[order] == 0)
    ok = np.nonzero(wrong <= allowed * np.arange(1, len(p) + 1))[0]
    keep = p[order][ok[-1]] if len(ok) else 1.01
    order = np.argsort(p)
    wrong = np.cumsum(y[order] == 1)
    ok = np.nonzero(wrong <= allowed * np.arange(1, len(p) + 1))[0]
    drop = p[order][ok[-1]] if len(ok) else -0.01
    return max(keep, 0.5), min(drop, 0.5)


def fasttext_probabilities(train: list[dict], test: list[dict]) -> np.ndarray:
    """fastText (supervised, word bigrams and character 1-3-grams of words, one thread: deterministic)
    trained on `train`, P(keep) of each `test` document."""
    import tempfile

    import fasttext

    with tempfile.NamedTemporaryFile("w", suffix=".txt", encoding="utf-8", delete=False) as handle:
        for row in train:
            handle.write(f"__label__{'keep' if row['keep'] else 'drop'} {' '.join(row['text'].split())}\n")
    model = fasttext.train_supervised(handle.name, epoch=25, lr=0.5, dim=32, wordNgrams=2, minn=1, maxn=3,
                                      thread=1, seed=0, verbose=0)
    Path(handle.name).unlink()
    result = []
    for row in test:
        pairs = dict((label, prob) for prob, label in model.f.predict(" ".join(row["text"].split()), 2, 0.0, "strict"))
        result.append(pairs.get("__label__keep", 0.0))
    return np.array(result)


def evaluate(train: list[dict], test: list[dict], with_ngrams, allowed: float):
    """(kiwi chars of the test rows, chars spared, wrong keeps, wrong drops, per group moved kept count)."""
    y = np.array([row["keep"] for row in train], dtype=float)
    if not test or y.min() == y.max():  # one class only: nothing to learn, Kiwi reads everything
        return sum(row["chars"] for row in test), 0, 0, 0, {}
    if with_ngrams == "fasttext":
        folds = np.arange(len(y)) % 5
        out_of_fold = np.zeros(len(y))
        for fold in range(5):
            inside = folds != fold
            out_of_fold[~inside] = fasttext_probabilities([r for r, i in zip(train, inside) if i],
                                                          [r for r, i in zip(train, inside) if not i])
        keep_bar, drop_bar = thresholds(out_of_fold, y, allowed)
        p = fasttext_probabilities(train, test)
        return decide(test, p, keep_bar, drop_bar)
    x, mean, std = design(train, with_ngrams)
    l2 = 1e-3 if not with_ngrams else 1e-4
    # The bars come from out-of-fold predictions (5 folds of the training part): a model's
    # confidence on the documents it was fitted on says nothing about new ones.
    folds = np.arange(len(y)) % 5
    out_of_fold = np.zeros(len(y))
    for fold in range(5):
        inside = folds != fold
        if y[inside].min() == y[inside].max():
            out_of_fold[~inside] = y[inside][0]
            continue
        out_of_fold[~inside] = predict(fit_logistic(x[inside], y[inside], l2), x[~inside])
    keep_bar, drop_bar = thresholds(out_of_fold, y, allowed)
    w = fit_logistic(x, y, l2)
    return decide(test, predict(w, design(test, with_ngrams, mean, std)[0]), keep_bar, drop_bar)


def decide(test: list[dict], p: np.ndarray, keep_bar: float, drop_bar: float):
    spared = wrong_keep = wrong_drop = 0
    moved = defaultdict(int)
    for row, prob in zip(test, p):
        decided = True if prob >= keep_bar else False if prob <= drop_bar else None
        if decided is None:
            continue
        spared += row["chars"]
        if decided != row["keep"]:
            wrong_keep += decided
            wrong_drop += not decided
            moved[row["group"]] += 1 if decided else -1
    return sum(row["chars"] for row in test), spared, wrong_keep, wrong_drop, moved


def report(name: str, rows_test: list[dict], all_docs: int, group_docs: dict, result) -> None:
    if not rows_test:
        return
    kiwi_chars, spared, wrong_keep, wrong_drop, moved = result
    worst = max(((abs(n) / group_docs[g], g) for g, n in moved.items()), default=(0.0, "-"))
    print(f"| {name} | {all_docs:,} | {len(rows_test):,} | {kiwi_chars:,} | {spared / max(kiwi_chars, 1):.1%} | "
          f"{wrong_keep} | {wrong_drop} | {1 - (wrong_keep + wrong_drop) / all_docs:.2%} | "
          f"{worst[0] * 100:.1f} ({worst[1]}) |")


def frontier(corpus: dict) -> None:
    """An optimistic bound: the keep bar chosen on the measured part itself, the most Kiwi characters
    a classifier could spare for a given number of wrong keeps (drops decided too would only add errors)."""
    rows, groups = corpus["rows"], corpus["groups"]
    splits = {"even → odd docs": ([r for r in rows if r["index"] % 2 == 0], [r for r in rows if r["index"] % 2],
                                  sum(1 for i in range(len(groups)) if i % 2)),
              "first half → second": (rows[:len(rows) // 2], rows[len(rows) // 2:],
                                      len(groups) - rows[len(rows) // 2]["index"])}
    print("\n### Optimistic bound on real_ko: the keep bar chosen on the measured part itself\n")
    print("| split | model | measured docs | spared at 0 / 2 / 5 / 10 / 20 wrong keeps |\n|---|---|---:|---|")
    for split, (train, test, documents) in splits.items():
        for with_ngrams in (False, True):
            y = np.array([row["keep"] for row in train], dtype=float)
            x, mean, std = design(train, with_ngrams)
            p = predict(fit_logistic(x, y, 1e-3 if not with_ngrams else 1e-4), design(test, with_ngrams, mean, std)[0])
            keeps = np.array([row["keep"] for row in test])
            chars = np.array([row["chars"] for row in test])
            order = np.argsort(-p)
            wrong, spared = np.cumsum(~keeps[order]), np.cumsum(chars[order]) / chars.sum()
            cells = [f"{spared[np.nonzero(wrong <= k)[0][-1]]:.0%} ({k / documents:.2%})" for k in (0, 2, 5, 10, 20)]
            print(f"| {split} | {MODELS[with_ngrams][:3]} | {documents:,} | {' / '.join(cells)} |")


def counts(groups: list[str]) -> dict[str, int]:
    result = defaultdict(int)
    for group in groups:
        result[group] += 1
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dev", type=Path)
    parser.add_argument("--real", type=Path, nargs="*", default=[])
    parser.add_argument("--train_errors", type=float, nargs="+", default=[0.0, 0.005, 0.02],
                        help="share of decided training documents allowed wrong when choosing the bars")
    parser.add_argument("--models", nargs="*", choices=("a", "b", "fasttext"), default=["a", "b"],
                        help="which classifiers (fasttext: pip install fasttext-wheel); none: the learning curve alone")
    args = parser.parse_args()
    quality = QualityFilter()
    sets = quality_cost.corpora(quality_cost.REPO / "data" / "quality_sample.jsonl", args.dev, args.real, None)
    data = {name: kiwi_documents(quality, records) for name, records in sets.items()}
    for name, corpus in data.items():
        rows = corpus["rows"]
        print(f"{name}: {len(corpus['groups']):,} docs, {len(rows):,} reach Kiwi "
              f"({sum(r['chars'] for r in rows):,} chars read), {sum(not r['keep'] for r in rows)} of them dropped; "
              f"Kiwi's CPU on them: {corpus['kiwi_s']:.2f} s, "
              f"{corpus['kiwi_s'] / max(sum(r['chars'] for r in rows), 1) * 1e6:.1f} µs a character, "
              f"{corpus['kiwi_s'] / corpus['bytes'] * 1e9:.0f} CPU-s per GB of the corpus ({corpus['bytes'] / 1e6:.2f} MB)")
    if "real_ko" in data:
        frontier(data["real_ko"])
        # Does more training help? (a) on a growing share of the genres' even documents, the odd ones measured.
        rows, groups = data["real_ko"]["rows"], data["real_ko"]["groups"]
        even, test = [r for r in rows if r["index"] % 2 == 0], [r for r in rows if r["index"] % 2]
        odd = [g for i, g in enumerate(groups) if i % 2]
        for allowed in args.train_errors:
            print(f"\n### Learning curve, {MODELS[False]}, bars at ≤ {allowed:.1%}: real_ko, even docs (shuffled, "
                  "a share of them) → odd docs\n")
            print(HEADER)
            order = np.random.default_rng(0).permutation(len(even))
            for share in (0.25, 0.5, 1.0):
                train = [even[i] for i in sorted(order[:int(share * len(even))])]
                report(f"{len(train)} training docs ({sum(not r['keep'] for r in train)} dropped)", test, len(odd),
                       counts(odd), evaluate(train, test, False, allowed))
    for with_ngrams in [{"a": False, "b": True, "fasttext": "fasttext"}[name] for name in args.models]:
        for allowed in args.train_errors:
            print(f"\n### {MODELS[with_ngrams]}, "
                  f"bars at ≤ {allowed:.1%} training errors\n\nWithin a corpus: first half of its Kiwi "
                  f"documents trains, the second half is measured (docs: the second half's share of the corpus)\n")
            print(HEADER)
            for name, corpus in data.items():
                rows = corpus["rows"]
                if len(rows) < 40:
                    continue
                # First half: what a prepare trains on (its first documents), in the corpus's own order.
                half = len(rows) // 2
                cut = rows[half]["index"]
                report(f"{name}, first half → second", rows[half:], len(corpus["groups"]) - cut,
                       counts(corpus["groups"][cut:]), evaluate(rows[:half], rows[half:], with_ngrams, allowed))
                # Alternate documents: as if the corpus were shuffled before the first N were taken.
                odd = [g for i, g in enumerate(corpus["groups"]) if i % 2]
                test = [r for r in rows if r["index"] % 2]
                report(f"{name}, even → odd docs", test, len(odd), counts(odd),
                       evaluate([r for r in rows if r["index"] % 2 == 0], test, with_ngrams, allowed))
            print("\nAcross corpora: trained on every other corpus (genres: every other genre), measured on this one\n")
            print(HEADER)
            tests = [(name, [n for n in data if n != name], None) for name in data]
            genres = data.get("real_ko", {"groups": []})["groups"]
            tests += [(f"real_ko/{g}", ["real_ko"], g) for g in sorted(set(genres))]
            for name, train_sets, genre in tests:
                if genre is None:
                    train = [r for n in train_sets for r in data[n]["rows"]]
                    test = data[name]["rows"]
                    groups = data[name]["groups"]
                else:
                    train = [r for r in data["real_ko"]["rows"] if r["group"] != genre]
                    test = [r for r in data["real_ko"]["rows"] if r["group"] == genre]
                    groups = [g for g in genres if g == genre]
                report(name, test, len(groups), counts(groups), evaluate(train, test, with_ngrams, allowed))


if __name__ == "__main__":
    main()
