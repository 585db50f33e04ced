"""Benchmark files the tests write: Korean items of every shape rankzero scores, made up here (license-clean).

    write_benchmark(tmp_path / "kmmlu", "kmmlu", {"dev": 5, "test": 12})    # Law-dev.csv, Law-test.csv
    write_benchmark(tmp_path, "kobest_copa", {"train": 8, "test": 10})     # kobest_copa-train.jsonl, -test.jsonl
    tiny_model(tmp_path / "model", tokenizer_dir)                          # a tiny Llama trained a few steps
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

from helpers import _OBJECTS, _PLACES, _SUBJECTS, _VERBS, TINY, korean_documents

_FILE_STEM = {"kmmlu": "Law", "click": "click", "haerae": "haerae"}


def _record(shape: str, rng: random.Random, number: int) -> dict:
    who, place, what, verb = rng.choice(_SUBJECTS), rng.choice(_PLACES), rng.choice(_OBJECTS), rng.choice(_VERBS)
    sentence = f"{who}은 {place}에서 {what}을 {verb}"
    if shape == "kmmlu":
        return {"question": f"{number}. 다음 중 {who}이 {place}에서 {verb.rstrip('다')} 것은? ",
                **{letter: rng.choice(_OBJECTS) + ("" if rng.random() < 0.5 else " 두 개") for letter in "ABCD"},
                "answer": rng.randint(1, 4)}
    if shape == "kobest_boolq":
        return {"paragraph": f"{sentence}. {korean_documents(1, seed=number, sentences=2)[0][:80]}",
                "question": f"{who}은 {what}을 {verb}?", "label": rng.randint(0, 1)}
    if shape == "kobest_copa":
        return {"premise": f"{sentence}.", "question": rng.choice(["원인", "결과"]),
                "alternative_1": f"{rng.choice(_SUBJECTS)}이 {rng.choice(_OBJECTS)}을 찾았다.",
                "alternative_2": f"{rng.choice(_PLACES)}이 {'아주 ' * rng.randint(0, 3)}조용했다.", "label": rng.randint(0, 1)}
    if shape == "kobest_hellaswag":
        return {"context": f"{sentence}.", **{f"ending_{k}": f"{rng.choice(_SUBJECTS)}은 {rng.choice(_VERBS)}"
                                               for k in range(1, 5)}, "label": rng.randint(0, 3)}
    if shape == "kobest_sentineg":
        return {"sentence": f"{sentence}. {'정말 좋았다' if number % 2 else '별로였다'}", "label": number % 2}
    if shape == "kobest_wic":
        return {"word": what, "context_1": f"{sentence}.", "context_2": f"{rng.choice(_SUBJECTS)}은 {what}을 샀다.",
                "label": rng.randint(0, 1)}
    if shape == "haerae":
        options = rng.sample(_OBJECTS, 5)
        return {"query": f"다음 중 {who}이 {verb.rstrip('다')} 것은?\n" + "\n".join(
                    f"({letter}) {option}" for letter, option in zip("ABCDE", options)),
                "options": options, "answer": f"({rng.choice('ABCDE')})"}
    if shape == "click":
        choices = rng.sample(_OBJECTS, 4)
        return {"id": f"KIIP_society_{number}", "paragraph": sentence if number % 2 else "",
                "question": f"{who}이 {place}에서 {verb.rstrip('다')} 것은?", "choices": choices,
                "answer": rng.choice(choices)}
    raise ValueError(shape)


def write_benchmark(directory: Path, shape: str, splits: dict[str, int], seed: int = 0) -> list[Path]:
    """One file per split ({"": n} for a file without a split in its name): KMMLU's as CSV, the others JSONL."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = random.Random(f"{shape}-{seed}")
    paths, number = [], 0
    for split, count in splits.items():
        records = []
        for _ in range(count):
            records.append(_record(shape, rng, number))
            number += 1
        stem = _FILE_STEM.get(shape, shape) + (f"-{split}" if split else "")
        if shape == "kmmlu":
            path = directory / f"{stem}.csv"
            with open(path, "w", newline="", encoding="utf-8") as handle:
                writer = csv.DictWriter(handle, list(records[0]))
                writer.writeheader()
                writer.writerows(records)
        else:
            path = directory / f"{stem}.jsonl"
            path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
        paths.append(path)
    return paths


def tiny_model(directory: Path, tokenizer_dir: Path, steps: int = 40) -> Path:
    """The tiny Llama (configs/model_config_tiny.json) trained `steps` Adam steps on Korean documents, saved with
    the tokenizer: its choices' log-likelihoods differ by more than float noise, so acc means something."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = AutoConfig.for_model(**json.loads(Path(TINY).read_text()))
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    ids = [tokenizer.encode(text)[:64] for text in korean_documents(64, seed=1)]
    for step in range(steps):
        batch = torch.tensor([ids[(step * 4 + k) % len(ids)][:48] for k in range(4)])
        model(input_ids=batch, labels=batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
