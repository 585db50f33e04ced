"""Personal data behind other separators (issue 47): what the masker catches per separator class, the look-alikes
written the same ways, and the masker's speed, against another checkout (the code before) in the same rounds.

    python bench/pii_separators_bench.py --baseline_repo /tmp/pii-old            # a checkout of 1e7f917, say
    python bench/pii_separators_bench.py --baseline_repo /tmp/pii-old --rounds 5 --out results.json

1. Catches: every document of /work/shared/corpora/ko_real_dev (read from there) gets one personal number (phone,
   resident and foreigner registration, card, account in turn; e-mails for the e-mail classes) written with a member
   of the class (the members in turn, taken from the Unicode database here, not from rankzero), and one look-alike
   of bench/pii_bench.py's list written with the same member. Caught: the value's digits no longer appear in order
   (anything but digits, up to 4 characters, between them) and its detector's placeholder does. Kept: the
   look-alike comes through unchanged. Both checkouts mask the same documents.
2. Speed over the real documents, MB/s per core (process time, best of 3 passes): the masker alone (`mask`, which
   looks for the at signs itself), and the screen's path (the compiled pass's marks of the texts, then `find` and
   `apply` on the texts they mark, as screen/screening.py does with --pii mask). Each checkout in its own process, paired
   rounds (baseline, then this one); the ratio is the median of the per-round ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import unicodedata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.pii_bench import CORPUS, LOOK_ALIKES, birth, digits, luhn_complete, plant, read_texts  # noqa: E402

_EVERY = [chr(code) for code in range(0x110000)]
CLASSES = {  # name -> (members, how a member goes into a number: "separator" between groups, "inside" a group)
    "ASCII '-' (control)": (["-"], "separator"),
    "spaces (Zs but ' ' and U+3000)": ([c for c in _EVERY if unicodedata.category(c) == "Zs" and c not in " \u3000"],
                                       "separator"),
    "line breaks (\\n, \\r\\n, \\v, \\f, U+0085, U+2028, U+2029)": (
        ["\n", "\r\n", "\v", "\f", "\x85", "\u2028", "\u2029"], "separator"),
    "dashes (Pd but '-' and U+FF0D)": ([c for c in _EVERY if unicodedata.category(c) == "Pd" and c not in "-\uff0d"],
                                       "separator"),
    "minus signs (U+2212, U+FE63)": (["\u2212", "\ufe63"], "separator"),
    "Hangul ㅡ (U+3161) typed as a dash": (["\u3161"], "separator"),
    "a dash, then a line break (a wrapped line)": (["-\n", "- \n", "-\r\n"], "separator"),
    "a spaced dash": ([" - ", " – "], "separator"),
    "invisible format characters (Cf) inside": ([c for c in _EVERY if unicodedata.category(c) == "Cf"], "inside"),
}
EMAIL_CLASSES = {
    "e-mail: full-width ＠ / ．, small ﹫, all full-width": ["＠", "．", "﹫", "full"],
    "e-mail: invisible format characters (Cf) inside": [c for c in _EVERY if unicodedata.category(c) == "Cf"],
}
KINDS = ["phone", "resident_registration", "foreigner_registration", "card", "account"]


def number(kind: str, rng: random.Random) -> tuple[str, str]:
    """(the number with '-' between its groups, the sentence around it: {} where the number goes)."""
    if kind == "phone":
        value = rng.choice([f"010-{digits(rng, 4)}-{digits(rng, 4)}", f"02-{digits(rng, 3)}-{digits(rng, 4)}",
                            f"031-{digits(rng, 3)}-{digits(rng, 4)}", f"070-{digits(rng, 4)}-{digits(rng, 4)}"])
        return value, rng.choice(["연락처 {}", "전화{}로 문의", "담당: 김민수({})"])
    if kind == "resident_registration":
        return f"{birth(rng)}-{rng.choice('1234')}{digits(rng, 6)}", "주민등록번호 {} 확인"
    if kind == "foreigner_registration":
        return f"{birth(rng)}-{rng.choice('5678')}{digits(rng, 6)}", "외국인등록번호: {}"
    if kind == "card":
        prefix = rng.choice(["4", "51", "3528", "9410", "62"])
        card = luhn_complete(prefix + digits(rng, 15 - len(prefix)))
        return "-".join(card[i:i + 4] for i in range(0, 16, 4)), "결제 카드 {} 승인"
    value = rng.choice([f"{digits(rng, 6)}-{digits(rng, 2)}-{digits(rng, 6)}",
                        f"{digits(rng, 3)}-{digits(rng, 6)}-{digits(rng, 5)}"])
    return value, rng.choice(["입금계좌 국민은행 {} 예금주 홍길동", "{} (신한은행)로 송금"])


def written(value: str, member: str, how: str, rng: random.Random) -> str:
    if how == "separator":
        return value.replace("-", member)
    spots = [i for i in range(1, len(value)) if value[i - 1].isdigit() or value[i - 1] == "-"]
    for at in sorted(rng.sample(spots, 2), reverse=True):  # two invisible characters, in a group or by a dash
        value = value[:at] + member + value[at:]
    return value


def email(member: str, rng: random.Random) -> tuple[str, str]:
    user = rng.choice(["kim", "lee.sun", "park_ji", "hong123"]) + digits(rng, 2)
    value = f"{user}@{rng.choice(['naver.com', 'daum.net', 'korea.ac.kr', 'gmail.com'])}"
    if member == "full":
        return value, "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in value)
    if member in "＠﹫":
        return value, value.replace("@", member)
    if member == "．":
        return value, value.replace(".", member)
    at = rng.randrange(1, len(value))
    return value, value[:at] + member + value[at:]


def planted_sets(texts: list[str]) -> dict:
    """{class: {"documents", "values": [(detector, value)], "looks": [written look-alike or None]}}."""
    sets = {}
    for name, (members, how) in CLASSES.items():
        rng = random.Random(name)
        documents, values, looks = [], [], []
        for index, text in enumerate(texts):
            member, kind = members[index % len(members)], KINDS[index % len(KINDS)]
            value, sentence = number(kind, rng)
            look = rng.choice([look for look in LOOK_ALIKES if "-" in look])
            look = written(look, member, how, rng) if how == "inside" else look.replace("-", member)
            documents.append(plant(text, [sentence.format(written(value, member, how, rng)), f"참고: {look}."], rng))
            values.append((kind, value))
            looks.append(look)
        sets[name] = {"documents": documents, "values": values, "looks": looks}
    for name, members in EMAIL_CLASSES.items():
        rng = random.Random(name)
        documents, values = [], []
        for index, text in enumerate(texts):
            value, form = email(members[index % len(members)], rng)
            documents.append(plant(text, [f"문의{form}로 보내 주세요."], rng))
            values.append(("email", value))
        sets[name] = {"documents": documents, "values": values, "looks": [None] * len(texts)}
    return sets


WORKER = r"""
import json, sys, time
from rankzero.data.screen.pii import PLACEHOLDERS, PiiMasker
task = json.load(open(sys.argv[1], encoding="utf-8"))
masker = PiiMasker()
result = {"placeholders": PLACEHOLDERS}
if "sets" in task:
    result["outputs"] = {name: [masker.mask(text).text for text in documents]
                         for name, documents in task["sets"].items()}
def screened(texts):  # what screen/screening.py does with --pii mask: the compiled pass's marks, the masker where they say
    from rankzero.data.native.constants import NUMBERS
    from rankzero.data.screen.scan import marks_of
    marks, runs = marks_of(texts)
    for text, mark, (start, end) in zip(texts, marks.tolist(), runs.tolist()):
        if mark:
            masker.apply(text, *masker.find(text, (start, end) if mark & NUMBERS else False, mark))
def best_mb_s(work, texts):
    best = None
    for _ in range(3):
        started = time.process_time()
        work(texts)
        spent = time.process_time() - started
        best = spent if best is None else min(best, spent)
    return sum(len(t.encode()) for t in texts) / 1e6 / best
if "speed" in task:
    screened(task["speed"])  # passes.c compiled or loaded, tables read: outside the timing
    result["mb_s"] = best_mb_s(lambda texts: [masker.mask(text) for text in texts], task["speed"])
    result["screen_mb_s"] = best_mb_s(screened, task["speed"])
print(json.dumps(result, ensure_ascii=False))
"""


def run_worker(repo: Path, task: dict, workdir: Path) -> dict:
    path = workdir / "task.json"
    path.write_text(json.dumps(task, ensure_ascii=False), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(repo)}
    done = subprocess.run([sys.executable, "-c", WORKER, str(path)], capture_output=True, text=True, env=env,
                          cwd=repo, check=True)
    return json.loads(done.stdout)


def raw(value: str) -> re.Pattern:
    return re.compile(r"\D{0,4}".join(re.escape(c) for c in value if c.isalnum() or c in "@."))


def score(sets: dict, outputs: dict, placeholders: dict) -> dict:
    table = {}
    for name, planted in sets.items():
        caught = kept = 0
        for (kind, value), look, output in zip(planted["values"], planted["looks"], outputs[name]):
            target = re.sub(r"\D", "", value) if kind != "email" else value
            caught += not raw(target).search(output) and placeholders[kind] in output
            kept += look is not None and f"참고: {look}." in output
        looks = sum(look is not None for look in planted["looks"])
        table[name] = {"caught": f"{caught}/{len(planted['values'])}",
                       "look_alikes_kept": f"{kept}/{looks}" if looks else "-"}
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline_repo", type=Path, required=True, help="another checkout (the code before)")
    parser.add_argument("--rounds", type=int, default=5, help="paired speed rounds")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args()
    texts = read_texts(CORPUS)
    sets = planted_sets(texts)
    repos = {"baseline": args.baseline_repo.resolve(), "this": REPO}
    results = {"corpus": f"{CORPUS} ({len(texts)} documents)", "baseline_repo": str(repos["baseline"]),
               "members": {name: len(members) for name, (members, _) in CLASSES.items()}
               | {name: len(members) for name, members in EMAIL_CLASSES.items()}}
    with tempfile.TemporaryDirectory() as workdir:
        for arm, repo in repos.items():
            done = run_worker(repo, {"sets": {name: s["documents"] for name, s in sets.items()}}, Path(workdir))
            results[f"catches ({arm})"] = score(sets, done["outputs"], done["placeholders"])
        speeds = {(arm, path): [] for arm in repos for path in ("mb_s", "screen_mb_s")}
        for _ in range(args.rounds):
            for arm, repo in repos.items():
                done = run_worker(repo, {"speed": texts}, Path(workdir))
                for path in ("mb_s", "screen_mb_s"):
                    speeds[arm, path].append(round(done[path], 1))
    for path, label in (("mb_s", "masker alone (mask)"), ("screen_mb_s", "the screen's path (marks, then find)")):
        ratios = [this / base for base, this in zip(speeds["baseline", path], speeds["this", path])]
        results[f"MB/s per core, {label}"] = {"baseline": speeds["baseline", path], "this": speeds["this", path],
                                               "this / baseline, median": round(statistics.median(ratios), 3),
                                               "rounds": [round(r, 3) for r in ratios]}
    text = json.dumps(results, ensure_ascii=False, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
