"""Issue 47 end to end: `train.py --tokenize_only` on files whose every text field carries personal numbers written
with other separators (and e-mails in full-width forms), in files whose names hold a phone number and a resident
registration number. Nothing raw in any written file (rows decoded, manifest, sample files) nor in the log; the
look-alikes written the same ways come through unchanged; the names are masked without changing the fingerprint."""

import json
import re
import subprocess
import sys

import datasets
from helpers import REPO, korean_documents, write_jsonl
from stdnum import luhn
from test_pii_separators import INVISIBLE, SEPARATORS

from rankzero.data.screen.pii import PLACEHOLDERS

LOOK_ALIKES = ["2024\u201303\u201315", "ISBN 978\u201389\u20136626\u2013123\u20134", "1990\u20132020년",
               "고객센터 1588\u00a01234", "12:30:45", "주문번호 2024\u00a00315\u00a01234\u00a05678"]


def planted(number: int, separator: str) -> tuple[str, str, str]:
    """(detector, the number as an ASCII writer types it, a sentence with it written with `separator`), distinct
    digits per `number`."""
    kind = ("phone", "resident_registration", "card", "account", "foreigner_registration")[number % 5]
    if kind == "phone":
        value, context = f"010-{2000 + number:04d}-{5000 + number:04d}", "연락처 "
    elif kind in ("resident_registration", "foreigner_registration"):
        value = f"8{number % 10}0{number % 9 + 1}{number % 27 + 1:02d}-{'1' if kind[0] == 'r' else '5'}{number:06d}"
        context = "주민등록번호 " if kind[0] == "r" else "외국인등록번호 "
    elif kind == "card":
        digits = f"41116{number:010d}"
        value, context = "-".join((digits + luhn.calc_check_digit(digits))[i:i + 4] for i in range(0, 16, 4)), "카드 "
    else:
        value, context = f"{300000 + number}-{number % 90 + 10}-{600000 + number}", "입금계좌 국민은행 "
    if separator in INVISIBLE.values():
        written = value[:2] + separator + value[2:].replace("-", separator + "-")
    else:
        written = value.replace("-", separator)
    return kind, value, f"{context}{written} 입니다."


def raw_pattern(value: str) -> re.Pattern:
    """The value's digits in order with anything but digits, a few characters of it, between them."""
    return re.compile(r"\D{0,4}".join(re.sub(r"\D", "", value)))


def written_strings(out) -> str:
    """Every string the build wrote: JSON files' keys and values, JSONL lines', the rows decoded elsewhere."""
    strings = []

    def walk(value):
        if isinstance(value, dict):
            for key, item in value.items():
                strings.append(key)
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str):
            strings.append(value)

    for path in out.rglob("*"):
        if path.suffix == ".json":
            walk(json.loads(path.read_text(encoding="utf-8")))
        elif path.suffix == ".jsonl":
            for line in path.read_text(encoding="utf-8").splitlines():
                walk(json.loads(line))
        elif path.is_file() and path.suffix != ".arrow":
            strings.append(path.read_text(encoding="utf-8"))
        strings.append(str(path))
    return "\n".join(strings)


def test_a_prepare_writes_no_personal_number_behind_any_separator(tmp_path, tokenizer_dir):
    separators = list(SEPARATORS.values()) + list(INVISIBLE.values())
    plants = [planted(number, separators[number % len(separators)]) for number in range(3 * len(separators))]
    emails = ["kim.minsu＠naver.com", "ｌｅｅ＠ｄａｕｍ．ｎｅｔ", "park.ji\u200b@korea.ac.kr", "hong@hani\u00ad.co.kr"]
    texts = korean_documents(len(plants) + len(emails), seed=13)
    sentences = [sentence for _, _, sentence in plants] + [f"문의{address}로 보내 주세요." for address in emails]
    looks = {index: LOOK_ALIKES[index % len(LOOK_ALIKES)] for index in range(0, len(texts), 3)}
    planted_parts = [sentence + (f" 참고: {looks[i]}." if i in looks else "") for i, sentence in enumerate(sentences)]
    # Every text field a record has: plain text, instruction/input/output, chat messages.
    third = len(texts) // 3
    source = tmp_path / "고객자료"
    source.mkdir()
    write_jsonl(source / "연락처_010\u20139876\u20135432.jsonl",
                [{"text": f"{text}\n{part}"} for text, part in zip(texts[:third], planted_parts[:third])])
    write_jsonl(source / "주민_900101-1234568.jsonl",
                [{"instruction": text, "input": part, "output": "확인했습니다."}
                 for text, part in zip(texts[third:2 * third], planted_parts[third:2 * third])])
    write_jsonl(tmp_path / "상담_kim.minsu@naver.com.jsonl",
                [{"messages": [{"role": "user", "content": text}, {"role": "assistant", "content": part}]}
                 for text, part in zip(texts[2 * third:], planted_parts[2 * third:])])
    held = write_jsonl(tmp_path / "평가_010-1111-2222.jsonl", [{"text": text} for text in korean_documents(5, seed=14)])
    command = [sys.executable, str(REPO / "train.py"), "--tokenize_only", "--dataset", str(source),
               str(tmp_path / "상담_kim.minsu@naver.com.jsonl"), "--eval_dataset", str(held), "--tokenizer_path",
               str(tokenizer_dir), "--cache_dir", str(tmp_path / "cache"), "--max_seq_length", "2048", "--no_packing"]
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr[-3000:]
    out = next(path for path in (tmp_path / "cache").iterdir() if path.is_dir())

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    rows = "\n".join(tokenizer.decode(row["input_ids"]) for row in datasets.load_from_disk(str(out)))
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["docs_in"] == len(texts) + 5 and manifest["docs_kept"] == len(texts) + 5
    everything = "\n".join([rows, written_strings(out), result.stdout, result.stderr])
    for kind, value, _ in plants:
        assert not raw_pattern(value).search(everything), value
    for name in ("9876\u20135432", "900101-1234568", "1111-2222", "kim.minsu@naver", "kim.minsu", "ｌｅｅ", "park.ji",
                 "hong@"):
        assert name not in everything, name
    masked = manifest["pii"]["total"]["spans_masked"]
    expected = {kind: sum(1 for plant in plants if plant[0] == kind) for kind in {plant[0] for plant in plants}}
    assert masked == {**expected, "email": len(emails)}, masked
    assert rows.count(PLACEHOLDERS["email"]) == len(emails)
    for kind, count in expected.items():
        assert rows.count(PLACEHOLDERS[kind]) == count, kind
    for look in looks.values():
        assert f"참고: {look}." in rows, look
    # The names, masked wherever the build wrote them; the fingerprint is of the inputs as given.
    files = manifest["sources"][1]["files"]  # --eval_dataset's sources come first
    assert f"{source}/연락처_{PLACEHOLDERS['phone']}.jsonl" in files
    assert f"{source}/주민_{PLACEHOLDERS['resident_registration']}.jsonl" in files
    assert manifest["sources"][2]["spec"] == f"{tmp_path}/상담_{PLACEHOLDERS['email']}.jsonl"
    assert manifest["validation"]["eval_dataset"] == [f"{tmp_path}/평가_{PLACEHOLDERS['phone']}.jsonl"]
    again = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    assert again.returncode == 0 and again.stdout.splitlines()[-1] == result.stdout.splitlines()[-1], again.stderr
