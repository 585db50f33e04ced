"""Real Korean statutes for `bench/quality_eval.py --dev OUT`: read from a public repository you fetch
yourself, written outside this repository (never copy them into it).

    git clone https://github.com/Bullskc/Legalize-KR     # law.go.kr's statutes (public domain, 저작권법 제7조)
    python scripts/korean_statutes.py --repo Legalize-KR --out ../real_ko
    python bench/quality_eval.py --dev ../real_ko

The repository is read at its HEAD commit (`git show`, so a bare mirror works too). Two genres, one
JSONL file each, records {"text", "genre", "source"}:
  statute_markdown  legalize-kr/kr/*/*.md: acts, decrees, rules and the Constitution as Markdown
                    (`## 제1장 총칙`, `##### 제4조 (간호사 면허)`, `**①**`, `  1\\.` items, `## 부칙` with
                    `부칙 <제542호,1960.2.1>`), the front matter removed
  statute_text      legalize-kr/.cache/detail/*.xml: law.go.kr's own text of each law, one element per line,
                    in the order the API gives them: `제1조(목적) 이 법은 …`, `① …`, `1.  …`, `가. …`, the
                    chapter headings, and every `부칙 <제27676호,2016.12.22>` with its articles
Each law is cut at line breaks into documents of 200-5000 characters (a cut after 2,000 characters
falls before an article, a chapter heading or a 부칙), and up to `--per_law` of them are drawn with a
fixed seed, so that a long law (관세법 시행령, 700 KB) does not outweigh the Constitution.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import xml.etree.ElementTree as ElementTree
from pathlib import Path

MIN_CHARS, MAX_CHARS, CUT_AFTER_CHARS = 200, 5000, 2000
# Where a document may end once it holds CUT_AFTER_CHARS: before an article, a chapter or a 부칙.
_UNIT_START = re.compile(r"(?:#+ )?(?:제\d+(?:조|장|편|절)|부칙)")
_TEXT_ELEMENTS = ("조문내용", "항내용", "호내용", "목내용", "부칙내용")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, required=True, help="a clone (or bare mirror) of Bullskc/Legalize-KR")
    parser.add_argument("--out", type=Path, required=True, help="where the JSONL files go (outside this repository)")
    parser.add_argument("--per_law", type=int, default=12, help="documents drawn from each law at most")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not (args.repo / "HEAD").exists() and not (args.repo / ".git").exists():
        parser.error(f"--repo {args.repo}: not a git repository (clone Bullskc/Legalize-KR, see --help)")
    args.out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    files = subprocess.run(["git", "-C", str(args.repo), "-c", "core.quotepath=off", "ls-tree", "-r", "--name-only",
                            "HEAD", "legalize-kr/"], capture_output=True, text=True, check=True).stdout.splitlines()

    def show(path: str) -> str:
        return subprocess.run(["git", "-C", str(args.repo), "show", f"HEAD:{path}"], capture_output=True,
                              check=True).stdout.decode("utf-8")

    genres = {"statute_markdown": [(path, markdown_body(show(path))) for path in sorted(files)
                                   if path.startswith("legalize-kr/kr/") and path.endswith(".md")],
              "statute_text": [(path, xml_text(show(path))) for path in sorted(files)
                               if path.startswith("legalize-kr/.cache/detail/") and path.endswith(".xml")]}
    for genre, laws in genres.items():
        records = []
        for path, text in laws:
            pieces = documents(text)
            for piece in rng.sample(pieces, min(args.per_law, len(pieces))):
                records.append({"text": piece, "genre": genre, "source": path})
        with open(args.out / f"{genre}.jsonl", "w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        print(f"{genre}: {len(records)} documents from {len(laws)} laws, "
              f"{sum(len(record['text']) for record in records):,} characters")


def markdown_body(text: str) -> str:
    """The Markdown without its YAML front matter (title, ids, dates: metadata, not the law's text)."""
    if text.startswith("---\n"):
        end = text.find("\n---\n", 4)
        if end >= 0:
            return text[end + 5:]
    return text


def xml_text(text: str) -> str:
    """law.go.kr's text of a law from its XML: every article, clause, item, sub-item and 부칙, one per line."""
    root = ElementTree.fromstring(text)
    lines = []
    for element in root.iter():
        if element.tag in _TEXT_ELEMENTS:
            lines += [line.rstrip() for line in "".join(element.itertext()).strip().split("\n") if line.strip()]
    return "\n".join(lines)


def documents(text: str) -> list[str]:
    """The text cut at line breaks into pieces of MIN_CHARS-MAX_CHARS characters (see the module docstring)."""
    pieces, piece, size = [], [], 0
    for line in text.splitlines(keepends=True):
        boundary = not line.strip() or _UNIT_START.match(line)
        if piece and (size + len(line) > MAX_CHARS or (size >= CUT_AFTER_CHARS and boundary)):
            pieces.append("".join(piece).strip())
            piece, size = [], 0
        if len(line) > MAX_CHARS:
            continue  # one line longer than a document (a table flattened into a line): left out
        piece.append(line)
        size += len(line)
    if piece:
        pieces.append("".join(piece).strip())
    return [piece for piece in pieces if len(piece) >= MIN_CHARS]


if __name__ == "__main__":
    main()
