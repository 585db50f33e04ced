"""Real Korean of the genres ko_real_dev lacks, for `bench/quality_eval.py --dev OUT`: read from public
repositories you clone yourself, written outside this repository (never copy them into it).

    git clone https://github.com/lovit/petitions_archive    # 청와대 국민청원 (citizen petitions)
    git clone https://github.com/e9t/nsmc                   # Naver movie reviews and synopses (CC0)
    git clone https://github.com/KLUE-benchmark/KLUE        # news, policy briefings, Airbnb reviews (CC BY-SA)
    git clone https://github.com/bab2min/Kiwi               # Kiwi's evaluation text: written, web, dialects
    python scripts/real_korean_sets.py --repos DIR --out ../real_ko   # DIR holds the four clones
    python bench/quality_eval.py --dev ../real_ko

Each repository is read at its HEAD commit (`git show`, so bare mirrors work too), sampled with a fixed
seed. One JSONL file per genre, records {"text", "genre"}:
  petition         500 petitions of 200+ characters (2019-04, -06, -08)
  review_short     1,000 single movie reviews of 30+ characters
  review_thread    per movie, its first 20 reviews as one document (forum-thread shaped)
  synopsis         movie synopses
  news_wikitree    KLUE-DP and KLUE-NLI news sentences (wikitree), 5 per document
  news_wikinews    KLUE-NLI wikinews premises, 5 per document
  policy_briefing  KLUE-NLI policy-briefing premises, 5 per document
  airbnb_reviews   KLUE-DP Airbnb review sentences, 4 per document, one per line
  kiwi_written     Kiwi's written-language evaluation sentences, 4 per document
  kiwi_web         Kiwi's web-text evaluation sentences, 4 per document, one per line
  dialect          Kiwi's dialect evaluation sentences (nine regions), 5 per document
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
from pathlib import Path

REPOS = {"petitions": "petitions_archive", "nsmc": "nsmc", "klue": "KLUE", "kiwi": "Kiwi"}
DIALECTS = ("chungcheong", "gangwon", "gyeongsang", "hamgyeong", "hwanghae", "jeju", "jeolla", "pyeongan",
            "gyeonggi")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repos", type=Path, required=True,
                        help="directory holding the clones (petitions_archive, nsmc, KLUE, Kiwi)")
    parser.add_argument("--out", type=Path, required=True, help="where the JSONL files go (outside this repository)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    repos = {key: _find(args.repos, name) for key, name in REPOS.items()}
    args.out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)

    def show(key: str, path: str) -> str:
        return subprocess.run(["git", "-C", str(repos[key]), "show", f"HEAD:{path}"], capture_output=True,
                              check=True).stdout.decode("utf-8")

    def write(genre: str, texts: list[str]) -> None:
        texts = [text.strip() for text in texts if len(text.strip()) >= 30]
        with open(args.out / f"{genre}.jsonl", "w", encoding="utf-8") as handle:
            for text in texts:
                handle.write(json.dumps({"text": text, "genre": genre}, ensure_ascii=False) + "\n")
        print(f"{genre}: {len(texts)} documents, {sum(map(len, texts)):,} characters")

    petitions = [json.loads(line)["content"] for month in ("2019-04", "2019-06", "2019-08")
                 for line in show("petitions", f"petitions_{month}").splitlines() if line.strip()]
    write("petition", rng.sample([text for text in petitions if len(text) >= 200], 500))

    listing = subprocess.run(["git", "-C", str(repos["nsmc"]), "ls-tree", "--name-only", "HEAD", "raw/"],
                             capture_output=True, text=True, check=True).stdout.split()
    single, threads = [], []
    for path in rng.sample(listing, 300):
        reviews = [item["review"].strip() for item in json.loads(show("nsmc", path)) if item["review"].strip()]
        single += [review for review in reviews if len(review) >= 30]
        if len(reviews) >= 8:
            threads.append("\n".join(reviews[:20]))
    write("review_short", rng.sample(single, 1000))
    write("review_thread", threads)
    write("synopsis", [item["synopsis"] for item in json.loads(show("nsmc", "synopses.json"))])

    by_source: dict[str, list[str]] = {}
    dp = show("klue", "klue_benchmark/klue-dp-v1.1/klue-dp-v1.1_dev.tsv")
    for match in re.finditer(r"^## (klue-dp\S+)\t(.*)$", dp, re.MULTILINE):
        by_source.setdefault(match.group(1).rsplit("_", 1)[1], []).append(match.group(2))
    for item in json.loads(show("klue", "klue_benchmark/klue-nli-v1.1/klue-nli-v1.1_dev.json")):
        premises = by_source.setdefault("nli_" + item["source"], [])
        if not premises or premises[-1] != item["premise"]:
            premises.append(item["premise"])
    write("news_wikitree", _groups(by_source["wikitree"], 5, " ") + _groups(by_source["nli_wikitree"], 5, " "))
    write("news_wikinews", _groups(by_source["nli_wikinews"], 5, " "))
    write("policy_briefing", _groups(by_source["nli_policy"], 5, " "))
    write("airbnb_reviews", _groups(by_source["airbnb"], 4, "\n"))

    def kiwi_lines(path: str) -> list[str]:
        return [line.split("\t")[0] for line in show("kiwi", path).splitlines() if line.strip()]

    write("kiwi_written", _groups(kiwi_lines("eval_data/written.txt"), 4, " "))
    write("kiwi_web", _groups(kiwi_lines("eval_data/web.txt"), 4, "\n"))
    write("dialect", [text for region in DIALECTS for text in _groups(kiwi_lines(f"eval_data/dialect/{region}.txt"),
                                                                       5, " ")])


def _find(root: Path, name: str) -> Path:
    for candidate in (root / name, root / name.lower()):
        if candidate.exists():
            return candidate
    raise SystemExit(f"--repos {root}: no clone named {name} in it (see this script's --help)")


def _groups(items: list[str], size: int, separator: str) -> list[str]:
    return [separator.join(items[start:start + size]) for start in range(0, len(items) - size + 1, size)]


if __name__ == "__main__":
    main()
