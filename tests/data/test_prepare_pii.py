"""--pii and --decontaminate through a whole prepare (rankzero/data/screen/screening.py): what is masked and dropped,
the manifest's counts per detector, source and benchmark, the two sample files, and nothing raw written."""

import csv
import json

import datasets
import pytest
from helpers import data_args, korean_documents, plan_of, prepare, write_jsonl

from rankzero.errors import RankzeroError

QUESTIONS = [
    "다음 중 대한민국 헌법상 국회의 권한에 속하지 않는 것으로 가장 적절한 것은 무엇인가?",
    "조선 시대 세종대왕이 집현전 학자들과 함께 창제한 훈민정음의 창제 목적으로 옳지 않은 것은?",
    "광합성 과정에서 빛에너지를 화학에너지로 전환하는 엽록체 내부 구조의 이름으로 옳은 것은?",
]
RAW = ["010-2345-6789", "kim.minsu@naver.com", "900101-1234567", "4111-1111-1111-1111"]


def planted_corpus(tmp_path):
    """Korean documents with personal data in 4, benchmark questions in 2 (one re-spaced), a contact dump."""
    texts = korean_documents(120, seed=5)
    texts[3] += f" 문의는 {RAW[0]}로 연락하거나 메일{RAW[1]}로 보내 주세요."
    texts[10] += f" 신청자 주민등록번호 {RAW[2]} 확인 완료."
    texts[20] += f" 결제 카드 {RAW[3]} 승인. 사업자등록번호 124-81-00998."
    texts[30] += f" 담당자 전화 {RAW[0]}"
    texts[40] += f" 어제 본 시험 문제: {QUESTIONS[0]} 정말 헷갈렸다."
    texts[50] += " 기출 " + QUESTIONS[1].replace(" ", "")
    texts[60] = "\n".join(f"회원{i} 010-{3000 + i}-{4000 + i}" for i in range(20))
    corpus = write_jsonl(tmp_path / "ko.jsonl", [{"text": t} for t in texts])
    benchmark = tmp_path / "kmmlu"
    benchmark.mkdir()
    with open(benchmark / "Law-test.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["question", "A", "B", "C", "D", "answer"])
        for question in QUESTIONS:
            writer.writerow([question, "가", "나", "다", "라", 1])
    return corpus, benchmark


def build(tmp_path, tokenizer_dir, corpus, name, **flags):
    # A row per document, long enough for any of them: each row decodes to one whole document.
    args = data_args(tokenizer_dir, tmp_path / f"cache-{name}", [corpus], max_seq_length=1024, packing=False, **flags)
    out = prepare(args, seed=0)
    return out, json.loads((out / "manifest.json").read_text())


def decoded(out, tokenizer_dir) -> str:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    return "\n".join(tokenizer.decode(row["input_ids"]) for row in datasets.load_from_disk(str(out)))


def test_masked_dropped_and_counted(tmp_path, tokenizer_dir):
    corpus, benchmark = planted_corpus(tmp_path)
    out, manifest = build(tmp_path, tokenizer_dir, corpus, "mask", decontaminate=[benchmark])
    assert manifest["docs_in"] == 120
    assert manifest["dropped"]["benchmark_contamination"] == 2 and manifest["dropped"]["pii_dump"] == 1
    source = manifest["pii"]["per_source"][str(corpus)]
    assert source["spans_masked"] == {"card": 1, "email": 1, "phone": 2, "resident_registration": 1}
    assert source["documents_touched"] == {"business_registration": 1, "card": 1, "email": 1, "phone": 2,
                                           "resident_registration": 1}
    assert source["spans_public_kept"] == {"business_registration": 1}
    assert source["documents_dropped_as_dumps"] == 1 and source["spans_in_dropped_documents"] == {"phone": 20}
    kmmlu = manifest["decontamination"]["benchmarks"]["kmmlu"]
    assert kmmlu["items"] == kmmlu["items_indexed"] == 3 and kmmlu["items_found"] == 2
    assert kmmlu["documents_dropped"] == 2 and kmmlu["tokens_dropped"] > 40
    rows = [json.loads(line) for line in (out / "contaminated_items.jsonl").read_text().splitlines()]
    assert sorted(row["id"] for row in rows) == ["Law-test:2", "Law-test:3"]
    assert {row["benchmark"] for row in rows} == {"kmmlu"} and {row["source"] for row in rows} == {str(corpus)}

    text = decoded(out, tokenizer_dir)
    assert "PHONE_NUMBER" in text and "EMAIL_ADDRESS" in text and "124-81-00998" in text
    assert "헌법상" not in text and "세종대왕이" not in text
    # Nothing raw anywhere: the rows, the manifest, the samples, whatever else was written.
    for raw in RAW + ["010-3005-4005", "kim.minsu", "9001011234567"]:
        assert raw not in text
        for path in out.rglob("*"):
            if path.is_file():
                assert raw.encode() not in path.read_bytes(), (raw, path)
    samples = [json.loads(line) for line in (out / "pii_samples.jsonl").read_text().splitlines()]
    assert {sample["detector"] for sample in samples} == {"card", "email", "phone", "resident_registration"}
    assert not any(c.isdigit() for sample in samples for c in sample["context"])


def test_without_a_c_compiler_the_same_prepare(tmp_path, tokenizer_dir, monkeypatch):
    """Without the extension (no C compiler at install): near dedup, the index's scan and the masker's marks run
    their numpy versions, to the same rows and counts."""
    from rankzero.data.dedup import kernel
    from rankzero.data.screen import scan

    corpus, benchmark = planted_corpus(tmp_path)
    compiled, compiled_manifest = build(tmp_path, tokenizer_dir, corpus, "compiled", decontaminate=[benchmark])
    calls = []
    monkeypatch.setenv("RANKZERO_PASSES", "numpy")
    for function in (kernel.shingle_hashes, scan.scan_texts):
        monkeypatch.setattr(function, "reference",
                            lambda *a, _f=function.reference: calls.append(_f.__name__) or _f(*a))
    numpy, numpy_manifest = build(tmp_path, tokenizer_dir, corpus, "numpy", decontaminate=[benchmark])
    assert {"numpy_shingle_hashes", "_reference_scan_texts"} <= set(calls)
    assert decoded(numpy, tokenizer_dir) == decoded(compiled, tokenizer_dir)
    for key in ("dropped", "pii", "decontamination", "near_dedup", "docs_in"):
        assert numpy_manifest[key] == compiled_manifest[key], key
    assert (numpy / "contaminated_items.jsonl").read_text() == (compiled / "contaminated_items.jsonl").read_text()


def test_pii_off_and_the_fingerprint(tmp_path, tokenizer_dir):
    corpus, benchmark = planted_corpus(tmp_path)
    out, manifest = build(tmp_path, tokenizer_dir, corpus, "off", pii="off")
    assert manifest["pii"] == {"setting": "off"} and "decontamination" not in manifest
    assert "pii_dump" not in manifest["dropped"] and not (out / "pii_samples.jsonl").exists()
    assert RAW[1] in decoded(out, tokenizer_dir)
    fingerprints = {plan_of(data_args(tokenizer_dir, tmp_path, [corpus], **flags)).fingerprint
                    for flags in ({}, {"pii": "off"}, {"decontaminate": [benchmark]})}
    (benchmark / "Law-test.csv").write_text("question,A,B,C,D,answer\n다른 문제,가,나,다,라,1\n", encoding="utf-8")
    fingerprints.add(plan_of(data_args(tokenizer_dir, tmp_path, [corpus], decontaminate=[benchmark])).fingerprint)
    assert len(fingerprints) == 4  # the benchmark files enter by content


def test_benchmark_file_errors_stop_before_the_build(tmp_path, tokenizer_dir):
    corpus, benchmark = planted_corpus(tmp_path)
    (benchmark / "broken.jsonl").write_text('{"question": "좋은 질문"}\n{"question": \n', encoding="utf-8")
    with pytest.raises(RankzeroError, match=r"broken.jsonl:2: not valid JSON"):
        plan_of(data_args(tokenizer_dir, tmp_path, [corpus], decontaminate=[benchmark]))
    with pytest.raises(ValueError, match="--decontaminate .*missing: no such file or directory"):
        data_args(tokenizer_dir, tmp_path, [corpus], decontaminate=[tmp_path / "missing"])


def test_placeholders_are_one_token_each(tokenizer_dir):
    from transformers import AutoTokenizer

    from rankzero.data.screen.pii import PLACEHOLDERS

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    for placeholder in PLACEHOLDERS.values():
        token = tokenizer.convert_tokens_to_ids(placeholder)
        assert tokenizer(placeholder, add_special_tokens=False)["input_ids"] == [token] != [tokenizer.unk_token_id]
        glued = tokenizer(f"문의{placeholder}로", add_special_tokens=False)["input_ids"]
        assert glued.count(token) == 1 and tokenizer.decode(glued) == f"문의{placeholder}로"


def shingles(text: str) -> set:
    words = text.split()
    return {" ".join(words[i:i + 5]) for i in range(len(words) - 4)}


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


@pytest.mark.parametrize("dedup", ["exact", "none"])
def test_eval_overlap_keeps_evaluation_text_out_of_training(tmp_path, tokenizer_dir, dedup):
    texts = korean_documents(400, seed=9)
    evaluation, training = texts[:30], texts[30:]
    # One word changed in each of 10 evaluation documents, 5 quoted whole inside a longer page, 3 exact copies.
    near = [" ".join("바뀐낱말" if i == 7 else w for i, w in enumerate(t.split())) for t in evaluation[:10]]
    pages = [f"{texts[100 + i]}\n{t}\n{texts[200 + i]}" for i, t in enumerate(evaluation[10:15])]
    training = training + near + pages + evaluation[20:23]
    corpus = write_jsonl(tmp_path / "train.jsonl", [{"text": t} for t in training])
    held = write_jsonl(tmp_path / "eval.jsonl", [{"text": t} for t in evaluation])
    out, manifest = build(tmp_path, tokenizer_dir, corpus, dedup, dedup=dedup, eval_dataset=[held],
                          validation_split_percentage=10)
    # (a planted document the percentage split holds out itself is not dropped)
    assert manifest["dropped"]["eval_overlap"] >= 12 and manifest["dropped"]["in_eval_dataset"] == 3
    # The acceptance rule: no training document is a near-copy (Jaccard >= 0.8 on word 5-grams) of a
    # validation one, --eval_dataset's or the percentage split's.
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    rows = {split: [shingles(tokenizer.decode(row["input_ids"]).replace("</s>", ""))
                    for row in datasets.load_from_disk(str(path))]
            for split, path in (("train", out), ("validation", out / "validation"))}
    assert len(rows["validation"]) > 30 and manifest["eval_overlap"]["documents_dropped"] == manifest["dropped"]["eval_overlap"]
    worst = max(jaccard(a, b) for a in rows["train"] for b in rows["validation"])
    assert worst < 0.8


def test_quality_samples_are_masked_too(tmp_path, tokenizer_dir):
    texts = korean_documents(60, seed=8) + [f"연락처 {RAW[0]}", f"mail {RAW[1]} ok ok ok ok ok"]
    corpus = write_jsonl(tmp_path / "ko.jsonl", [{"text": t} for t in texts])
    out, manifest = build(tmp_path, tokenizer_dir, corpus, "quality", quality_filter="ko")
    samples = (out / "quality_samples.jsonl").read_text(encoding="utf-8")
    assert manifest["docs_kept"] < 62 and "|||" in samples
    for path in out.rglob("*"):
        if path.is_file():
            assert not any(raw.encode() in path.read_bytes() for raw in RAW[:2]), path
