"""Personal-information masking and benchmark decontamination on real Korean text (issue 32).

    python bench/pii_bench.py --benchmarks kmmlu_criminal_law.json logickor.jsonl
    python bench/pii_bench.py --benchmarks B... --datatrove_python /tmp/side/bin/python --prepare_mb 40 --rounds 3
    python bench/pii_bench.py --benchmarks B... --prepare_only --real petitions.jsonl --baseline_repo /tmp/old-checkout
    python bench/pii_bench.py --pii_only --datatrove_python D/bin/python --presidio_python P/bin/python

Five measurements, each against a named baseline in the same run:
  1. recall and precision: every document of /work/shared/corpora/ko_real_dev (read from there) gets two
     planted personal values of the detectors' kinds and two look-alikes (dates, prices, ISBNs, statute
     numbers, ...) at line or sentence breaks; recall = planted values gone, each behind its kind's
     placeholder; look-alikes must come through unchanged. Baseline: datatrove's PIIFormatter (FineWeb-2's
     e-mail and IP masking) on the kinds it covers, when --datatrove_python names an interpreter that has
     datatrove (a side venv: it is no dependency of rankzero); Presidio's Korean and generic pattern recognizers
     (bench/baselines/presidio_recognizers.py) on every kind, with their MB/s per core, with --presidio_python.
  2. speed: MB/s per core (process time, best of 5) of the masker and of the contamination index.
  3. decontamination: the --benchmarks items planted three ways into real documents (whole item with its
     choices, the question alone inside a page, the question re-spaced) and with two words changed; the
     share of those documents found, and of the unplanted real documents (false drops), at N = 5, 8, 13.
  4. prepare time: `train.py --tokenize_only` with `--pii mask` (the default) and with `--pii mask
     --decontaminate B...`, each against `--pii off`: whole processes, wall and CPU time (user + sys of the
     process tree), paired rounds (the ratio is the median of the per-round ratios), on the real documents
     (the dev corpus and any --real files) repeated, each copy numbered so no two are equal, up to
     --prepare_mb; with --baseline_repo, that checkout's train.py runs the same arms in the same rounds. One
     uncounted warm-up round first (passes.c is compiled into the kernel cache on a first run).
  5. eval overlap: the real documents plus a one-word-edited copy of 150 of them, `--dedup exact
     --validation_split_percentage 10`: near-copy pairs (Jaccard >= 0.8, word 5-grams) in the input against
     training/validation pairs in the output.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._measure import run_measured  # noqa: E402
from bench.baselines.pii_compare import datatrove_baseline, presidio_baseline  # noqa: E402
from rankzero.data.screen import decontaminate  # noqa: E402
from rankzero.data.screen.pii import PLACEHOLDERS, PiiMasker  # noqa: E402
from rankzero.data.screen.pii_checks import registration_check_ok  # noqa: E402

CORPUS = Path("/work/shared/corpora/ko_real_dev")


def read_texts(path: Path) -> list[str]:
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    return [json.loads(line)["text"] for file in files for line in file.open(encoding="utf-8") if line.strip()]


def digits(rng, count: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(count))


def luhn_complete(prefix: str) -> str:
    total = 0
    for position, digit in enumerate(reversed(prefix + "0")):
        value = int(digit)
        if position % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return prefix + str((10 - total % 10) % 10)


def birth(rng) -> str:
    return f"{rng.randrange(100):02d}{rng.randrange(1, 13):02d}{rng.randrange(1, 29):02d}"


def planted_value(kind: str, rng) -> tuple[str, str, str]:
    """(kind's detector, the value, the sentence that carries it)."""
    if kind == "email":
        user = rng.choice(["kim", "Lee.Sun", "park_ji", "HONG123", "news.desk"]) + digits(rng, 2)
        value = f"{user}@{rng.choice(['naver.com', 'Daum.net', 'korea.ac.kr', 'gmail.com', 'hani.co.kr'])}"
        return "email", value, rng.choice([f"문의{value}로 보내 주세요.", f"기자 이메일: {value}", f"({value})"])
    if kind == "phone":
        value = rng.choice([f"010-{digits(rng, 4)}-{digits(rng, 4)}", f"02-{digits(rng, 3)}-{digits(rng, 4)}",
                            f"031.{digits(rng, 3)}.{digits(rng, 4)}", f"010{digits(rng, 8)}", f"(02) {digits(rng, 4)}-{digits(rng, 4)}",
                            f"+82 10-{digits(rng, 4)}-{digits(rng, 4)}", f"070-{digits(rng, 4)}-{digits(rng, 4)}",
                            f"0505-{digits(rng, 3)}-{digits(rng, 4)}", f"080-{digits(rng, 3)}-{digits(rng, 4)}"])
        return "phone", value, rng.choice([f"연락처 {value}", f"전화{value}로 문의", f"담당: 김민수({value})"])
    if kind == "rrn":  # random final digits: most fail the old check digit, as numbers since 2020 do
        value = f"{birth(rng)}-{rng.choice('1234')}{digits(rng, 6)}"
        return "resident_registration", value, f"주민등록번호 {value} 확인"
    if kind == "rrn_bare":
        twelve = birth(rng) + rng.choice("1234") + digits(rng, 5)
        value = next(twelve + d for d in "0123456789" if registration_check_ok(twelve + d))
        return "resident_registration", value, f"번호 {value} 입력"
    if kind == "foreigner":
        value = f"{birth(rng)}-{rng.choice('5678')}{digits(rng, 6)}"
        return "foreigner_registration", value, f"외국인등록번호: {value}"
    if kind == "card":
        prefix = rng.choice(["4", "51", "3528", "9410", "62"])
        number = luhn_complete(prefix + digits(rng, 15 - len(prefix)))
        grouped = rng.choice([" ", "-"]).join(number[i:i + 4] for i in range(0, 16, 4))
        value = rng.choice([grouped, number])
        return "card", value, f"결제 카드 {value} 승인"
    if kind == "account":
        value = rng.choice([f"{digits(rng, 6)}-{digits(rng, 2)}-{digits(rng, 6)}", f"3333{digits(rng, 9)}",
                            f"{digits(rng, 3)}-{digits(rng, 6)}-{digits(rng, 5)}"])
        return "account", value, rng.choice([f"입금계좌 국민은행 {value} 예금주 홍길동", f"{value} (신한은행)로 송금"])
    if kind == "passport":
        value = rng.choice("MSRODG") + rng.choice([digits(rng, 8), digits(rng, 3) + rng.choice("ABCXYZ") + digits(rng, 4)])
        return "passport", value, f"여권번호 {value}"
    if kind == "licence":
        value = f"{rng.randrange(11, 29)}-{digits(rng, 2)}-{digits(rng, 6)}-{digits(rng, 2)}"
        return "driver_license", value, f"운전면허번호 {value}"
    if kind == "ipv4":
        first = rng.choice([1, 8, 14, 23, 45, 58, 61, 101, 110, 121, 175, 203, 211, 218, 222])  # public blocks
        value = f"{first}.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
        return "ip_address", value, f"접속 IP {value} 차단"
    value = f"2001:4860:{rng.randrange(1, 9999):x}::{rng.randrange(1, 9999):x}"
    return "ip_address", value, f"서버 주소 {value}"


KINDS = ["email", "phone", "rrn", "rrn_bare", "foreigner", "card", "account", "passport", "licence", "ipv4", "ipv6"]
LOOK_ALIKES = [
    "2024-03-15", "2023.11.02.", "1,234,000원", "₩3,500,000", "ISBN 978-89-6626-123-4", "1990-2020년",
    "(1861-1904)", "법률 제12345호", "의안번호 2101234", "2019다123456 판결", "v2.7.18.4", "Python 3.12.1",
    "37.5665, 126.9780", "주문번호 2024031512345678", "주문번호 20240315-0012345", "고객센터 1588-1234",
    "사업자등록번호 124-81-00998", "ISSN 1234-5678", "10:30:45", "제3조 제2항 제1호"]


def insert(text: str, piece: str, rng) -> str:
    return plant(text, [piece], rng)


def plant(text: str, pieces: list[str], rng) -> str:
    """Each piece as its own sentence at a line break or a sentence end of the original text (never inside
    a number, nor inside another piece)."""
    breaks = [i + 1 for i, c in enumerate(text) if c == "\n" or (c == "." and text[i + 1:i + 2] == " ")]
    positions = sorted((rng.choice(breaks + [len(text)]) for _ in pieces), reverse=True)
    for at, piece in zip(positions, pieces):
        text = f"{text[:at]} {piece} {text[at:]}"
    return text


def recall_precision(texts: list[str], datatrove_python: str | None, presidio_python: str | None = None) -> dict:
    rng = random.Random(0)
    masker = PiiMasker()
    planted, documents = [], []
    for number, text in enumerate(texts):
        values, sentences = [], []
        for k in range(2):
            kind = KINDS[(2 * number + k) % len(KINDS)]
            detector, value, sentence = planted_value(kind, rng)
            values.append((kind, detector, value))
            sentences.append(sentence)
        looks = rng.sample(LOOK_ALIKES, 2)
        planted.append((values, looks))
        documents.append(plant(text, sentences + [f"참고: {look}." for look in looks], rng))
    found, missed, kept_looks, changed = Counter(), Counter(), 0, Counter()
    outputs = [masker.mask(text).text for text in documents]
    for (values, looks), output in zip(planted, outputs):
        for kind, detector, value in values:
            ok = value not in output and PLACEHOLDERS[detector] in output
            (found if ok else missed)[kind] += 1
        for look in looks:
            if look in output:
                kept_looks += 1
            else:
                changed[look] += 1
    baseline = Counter(name for text in texts for name in masker.mask(text).masked.elements())
    result = {"documents": len(texts), "planted": sum(found.values()) + sum(missed.values()),
              "recall": round(sum(found.values()) / max(1, sum(found.values()) + sum(missed.values())), 4),
              "recall_by_kind": {k: f"{found[k]}/{found[k] + missed[k]}" for k in KINDS},
              "look_alikes_kept": f"{kept_looks}/{2 * len(texts)}", "look_alikes_changed": dict(changed),
              "spans_masked_in_unplanted_real_documents": dict(baseline)}
    if datatrove_python:
        result["datatrove_pii_formatter"] = datatrove_baseline(datatrove_python, documents, planted)
    if presidio_python:
        result["presidio_recognizers"] = presidio_baseline(presidio_python, documents, planted, texts, KINDS)
    return result


def per_core_mb_s(function, texts: list[str], repeats: int = 5) -> float:
    megabytes = sum(len(t.encode()) for t in texts) / 1e6
    best = min(_timed(function) for _ in range(repeats))
    return round(megabytes / best, 1)


def _timed(function) -> float:
    started = time.process_time()
    function()
    return time.process_time() - started


def respace(text: str, rng) -> str:
    words = text.split()
    out = words[0]
    for word in words[1:]:
        out += rng.choice(["", " ", " "]) + word  # a third of the spaces dropped
    return out.replace("에 대한", "에대한").replace("것은", "것 은")


def decontamination(texts: list[str], paths: list[str]) -> dict:
    items = decontaminate.read_benchmarks(paths)
    result = {"items": len(items), "benchmarks": dict(Counter(item.benchmark for item in items))}
    for n in (5, 8, 13):
        decontaminate.N = n
        index = decontaminate.ContaminationIndex(items)
        rng = random.Random(1)
        planted = {"whole_item": [], "question_in_page": [], "respaced": [], "two_words_changed": []}
        for number, item in enumerate(items):
            page = texts[number % len(texts)]
            question = " ".join(item.parts)
            choices = " ".join(f"{'①②③④⑤'[i]} {c}" for i, c in enumerate(item.choices[:5]))
            words = question.split()
            for at in rng.sample(range(len(words)), min(2, len(words))):
                words[at] = "무엇"
            planted["whole_item"].append(insert(page, f"{question}\n{choices}\n정답: ③", rng))
            planted["question_in_page"].append(insert(page, question, rng))
            planted["respaced"].append(insert(page, respace(question, rng), rng))
            planted["two_words_changed"].append(insert(page, " ".join(words), rng))
        found = {way: sum(1 for hits in index.find(documents) if hits) / len(documents)
                 for way, documents in planted.items()}
        false_drops = sum(1 for hits in index.find(texts) if hits)
        result[f"N={n}"] = {"items_indexed": int(index.indexed.sum()),
                            **{way: round(share, 4) for way, share in found.items()},
                            "real_documents_dropped": f"{false_drops}/{len(texts)}"}
    decontaminate.N = 8
    index = decontaminate.ContaminationIndex(items)
    result["find_mb_s_per_core"] = per_core_mb_s(lambda: [index.find(texts[i:i + 500]) for i in range(0, len(texts), 500)], texts)
    return result


def train_tokenizer(tokenizer: Path) -> None:
    """A vocab-8000 tokenizer trained on the real corpus (the prepare timings' and the overlap check's)."""
    if not tokenizer.exists():
        subprocess.run([sys.executable, str(REPO / "scripts" / "train_tokenizer.py"), "--dataset", str(CORPUS),
                        "--vocab_size", "8000", "--output_dir", str(tokenizer)], check=True, capture_output=True)


def prepare_time(texts: list[str], paths: list[str], size_mb: float, rounds: int, workdir: Path,
                 baseline_repo: Path | None = None) -> dict:
    rng = random.Random(2)
    corpus, tokenizer = workdir / "corpus.jsonl", workdir / "tokenizer"
    written, copy = 0, 0
    with corpus.open("w", encoding="utf-8") as handle:
        while written < size_mb * 1e6:
            for text in texts:
                if rng.random() < 0.05:
                    text = insert(text, planted_value(rng.choice(KINDS), rng)[2], rng)
                line = json.dumps({"text": f"{text}\n(사본 {copy})"}, ensure_ascii=False) + "\n"
                handle.write(line)
                written += len(line.encode())
            copy += 1
    train_tokenizer(tokenizer)
    arms = {"pii_off": ["--pii", "off"], "pii_mask": [], "pii_mask_decontaminate": ["--decontaminate", *paths]}
    repos = {"": REPO} | ({"baseline:": baseline_repo} if baseline_repo else {})
    times = {prefix + arm: [] for prefix in repos for arm in arms}
    cpu = {name: [] for name in times}
    stages = {name: [] for name in times}
    # Round -1 is a warm-up, not counted: native/ compiles passes.c into its cache on a first run.
    for round_number in range(-1, rounds):
        for prefix, repo in repos.items():
            for arm, flags in arms.items():
                name = prefix + arm
                cache = workdir / f"cache-{name.replace(':', '-')}-{round_number}"
                command = [sys.executable, str(repo / "train.py"), "--tokenize_only", "--dataset", str(corpus),
                           "--tokenizer_path", str(tokenizer), "--cache_dir", str(cache), "--max_seq_length", "2048",
                           *flags]
                measured = run_measured(command, env={**os.environ, "PYTHONPATH": str(repo)})
                assert measured["returncode"] == 0, measured["stderr"][-2000:]
                if round_number < 0:
                    shutil.rmtree(cache)
                    continue
                times[name].append(round(measured["wall_s"], 2))
                cpu[name].append(round(measured["cpu_s"], 2))
                manifest = json.loads(next(cache.glob("*/manifest.json")).read_text())
                stages[name].append(manifest["timings"]["encode_stage_seconds_summed_over_workers"])
                shutil.rmtree(cache)
    result = {"corpus_mb": round(written / 1e6, 1), "documents_per_copy": len(texts), "copies": copy,
              "rounds": rounds, "seconds": times, "cpu_seconds": cpu}
    for prefix in repos:
        off = prefix + "pii_off"
        for arm in ("pii_mask", "pii_mask_decontaminate"):
            name = prefix + arm
            wall = [b / a for a, b in zip(times[off], times[name])]
            work = [b / a for a, b in zip(cpu[off], cpu[name])]
            result[f"{name} / pii_off"] = {"wall_median": round(statistics.median(wall), 3),
                                            "wall_rounds": [round(x, 3) for x in wall],
                                            "cpu_median": round(statistics.median(work), 3)}
        for name in (prefix + arm for arm in arms):
            result[f"{name} stage seconds (median over rounds)"] = {
                stage: round(statistics.median(row[stage] for row in stages[name]), 3) for stage in stages[name][0]}
    return result


def shingles(text: str) -> set:
    words = text.split()
    return {" ".join(words[i:i + 5]) for i in range(len(words) - 4)}


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def eval_overlap(texts: list[str], workdir: Path) -> dict:
    """The acceptance line "with --dedup exact, no validation document has a near-copy (Jaccard >= 0.8 on word
    5-grams) in training": the real documents plus a copy with one word changed of 150 of them, split 10%."""
    import datasets
    from transformers import AutoTokenizer

    rng = random.Random(3)
    copies = []
    for text in rng.sample(texts, 150):
        words = text.split()
        words[rng.randrange(len(words))] = "바뀐낱말"
        copies.append(" ".join(words))
    corpus = workdir / "overlap.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts + copies), encoding="utf-8")
    cache = workdir / "cache-overlap"
    command = [sys.executable, str(REPO / "train.py"), "--tokenize_only", "--dataset", str(corpus), "--tokenizer_path",
               str(workdir / "tokenizer"), "--cache_dir", str(cache), "--dedup", "exact", "--validation_split_percentage",
               "10", "--no_packing", "--max_seq_length", "8192"]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    out = Path(result.stdout.strip().splitlines()[-1].split(": ", 1)[1])
    manifest = json.loads((out / "manifest.json").read_text())
    tokenizer = AutoTokenizer.from_pretrained(str(workdir / "tokenizer"))
    rows = {split: [shingles(tokenizer.decode(row["input_ids"]).replace("</s>", " ")) for row in datasets.load_from_disk(str(path))]
            for split, path in (("train", out), ("validation", out / "validation"))}
    pairs = sum(1 for a in rows["train"] for b in rows["validation"] if jaccard(a, b) >= 0.8)
    raw = [shingles(t) for t in texts + copies]
    before = sum(1 for i, a in enumerate(raw) for b in raw[i + 1:] if jaccard(a, b) >= 0.8)
    return {"documents": len(texts) + len(copies), "near_copy_pairs_in_input": before,
            "validation_documents": len(rows["validation"]), "training_documents": len(rows["train"]),
            "dropped": manifest["dropped"], "train_validation_pairs_jaccard_ge_0.8": pairs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--benchmarks", nargs="+", default=[], help="benchmark files or dirs, as --decontaminate")
    parser.add_argument("--datatrove_python", default=None, help="an interpreter with datatrove (the baseline)")
    parser.add_argument("--presidio_python", default=None,
                        help="an interpreter with presidio-analyzer and phonenumbers (the second baseline)")
    parser.add_argument("--pii_only", action="store_true",
                        help="measure the planted values and the masker's speed only (with the baselines given)")
    parser.add_argument("--prepare_mb", type=float, default=40.0, help="corpus size for the prepare timing (0: skip)")
    parser.add_argument("--rounds", type=int, default=3, help="paired prepare rounds")
    parser.add_argument("--real", type=Path, nargs="*", default=[],
                        help="more real Korean JSONL ({\"text\"}) for the prepare corpus, beside the dev corpus")
    parser.add_argument("--baseline_repo", type=Path, default=None,
                        help="another checkout whose train.py runs the same arms in the same rounds (before/after)")
    parser.add_argument("--prepare_only", action="store_true", help="measure the prepare time only")
    parser.add_argument("--workdir", type=Path, default=REPO / "bench" / "out" / "pii")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args()
    if not args.benchmarks and not args.pii_only:
        parser.error("--benchmarks is required (benchmark files or dirs, as --decontaminate) unless --pii_only")
    args.workdir.mkdir(parents=True, exist_ok=True)
    texts = read_texts(CORPUS)
    masker = PiiMasker()
    results = {"corpus": f"{CORPUS} ({len(texts)} documents, {sum(len(t.encode()) for t in texts) / 1e6:.2f} MB)"}
    if not args.prepare_only:
        results |= {"recall_precision": recall_precision(texts, args.datatrove_python, args.presidio_python),
                    "pii_mb_s_per_core": per_core_mb_s(lambda: [masker.mask(t) for t in texts], texts)}
    if not (args.prepare_only or args.pii_only):
        results["decontamination"] = decontamination(texts, args.benchmarks)
        train_tokenizer(args.workdir / "tokenizer")
        results["eval_overlap"] = eval_overlap(texts, args.workdir)
    if args.prepare_mb and not args.pii_only:
        real = [text for path in args.real for text in read_texts(path)]
        results["prepare_corpus"] = [str(CORPUS), *map(str, args.real)]
        results["prepare"] = prepare_time(real + texts, args.benchmarks, args.prepare_mb, args.rounds, args.workdir,
                                          args.baseline_repo)
    text = json.dumps(results, ensure_ascii=False, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
