"""Benchmark scoring over ranks and around a training run (issue 45): scripts/evaluate.py gives the same scores in
one process, on 2 and 3 gloo ranks (torchrun) and under FSDP2 (each decoder layer sharded, a rank out of work
running its idle forwards); score_suites leaves the model's mode and the RNG as they were, and its output layer
sees only the continuation positions."""

from __future__ import annotations

import json
import re
import sys

import pytest
import torch

from benchmark_items import tiny_model, write_benchmark
from helpers import REPO, free_port, run
from rankzero.data.screen.benchmark_files import read_suites
from rankzero.train.benchmarks import encode_pair, score_suites


@pytest.fixture(scope="module")
def setup(tmp_path_factory, tokenizer_dir):
    root = tmp_path_factory.mktemp("ranks")
    model_dir = tiny_model(root / "model", tokenizer_dir, steps=20)
    write_benchmark(root / "kmmlu", "kmmlu", {"dev": 5, "test": 13})
    write_benchmark(root / "copa", "kobest_copa", {"train": 6, "test": 11})
    write_benchmark(root / "haerae", "haerae", {"": 7})
    return root, model_dir


def evaluate(root, model_dir, name, processes=None, *more):
    output = root / f"{name}.json"
    script = [REPO / "scripts" / "evaluate.py", model_dir, "--benchmarks", root / "kmmlu", root / "copa",
              root / "haerae" / "haerae.jsonl", "--benchmark_shots", 2, "--batch_size", 4, "--output", output, *more]
    launch = [sys.executable] if processes is None else [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", processes, "--master_port", free_port()]
    result = run([*launch, *script], timeout=600)
    assert f"wrote {output}" in result.stdout
    return json.loads(output.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_the_same_scores_on_one_two_and_three_ranks_and_under_fsdp(setup):
    root, model_dir = setup
    alone = evaluate(root, model_dir, "alone")
    assert {name: score["items"] for name, score in alone["benchmarks"].items()} == {"kmmlu": 13, "copa": 11,
                                                                                      "haerae": 7}
    # 31 items dealt to 3 ranks make 6, 7 and 6 forwards of 4 rows: under FSDP2 the first and third ranks run an idle
    # forward while the second finishes (without it, their gather of the results meets its layers' gathers: gloo
    # aborts on the mismatch)
    runs = {"2 ranks": evaluate(root, model_dir, "two", 2), "3 ranks": evaluate(root, model_dir, "three", 3),
            "fsdp": evaluate(root, model_dir, "fsdp", 3, "--fsdp")}
    assert runs["fsdp"]["settings"]["fsdp"] is True and runs["3 ranks"]["settings"]["ranks"] == 3
    for label, scored in runs.items():
        for name, score in alone["benchmarks"].items():
            other = scored["benchmarks"][name]
            assert (other["acc"], other["acc_norm"]) == (score["acc"], score["acc_norm"]), (label, name)
            for mine, theirs in zip(score["predictions"], other["predictions"], strict=True):
                assert mine["id"] == theirs["id"] and mine["greedy"] == theirs["greedy"]
                assert theirs["loglikelihoods"] == pytest.approx(mine["loglikelihoods"], abs=1e-5), (label, name)


def test_scoring_leaves_mode_and_rng_and_computes_only_the_continuations_logits(setup):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    root, model_dir = setup
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).train()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    suites = read_suites([root / "kmmlu"], shots=2)
    seen = []
    model.get_output_embeddings().register_forward_hook(lambda module, args, output: seen.append(
        (tuple(args[0].shape), tuple(output.shape))))
    torch.manual_seed(5)
    state = torch.random.get_rng_state()
    scores = score_suites(model, tokenizer, suites, batch_size=8)
    assert torch.equal(torch.random.get_rng_state(), state) and model.training
    # the output layer saw the continuations' positions and nothing else, [1, positions, hidden] per forward; choices
    # after the same prompt whose inputs are equal (one-token " A".." D") share one row
    rows = {}
    for question in suites[0].items:
        for continuation in question.continuations():
            context, tokens = encode_pair(tokenizer, question.context, continuation)
            key = tuple(context + tokens[:-1])
            rows[key] = max(rows.get(key, 0), len(tokens))
    assert sum(shape[1] for shape, _ in seen) == sum(rows.values()) and all(shape[0] == 1 for shape, _ in seen)
    assert all(output[-1] == model.config.vocab_size for _, output in seen)
    assert scores["kmmlu"]["items"] == 13 and len(rows) == 13 and len(seen) == -(-len(rows) // 8)


def test_an_item_one_rank_cannot_score_ends_every_rank_with_its_error(setup, tmp_path):
    """A choice longer than the model's context is found by the rank that holds it, which tells the others before
    any forward (else they would wait in their first forward for it forever): exit 1, the error once."""
    root, model_dir = setup
    short = tmp_path / "short"
    short.mkdir()
    for path in model_dir.iterdir():
        (short / path.name).write_bytes(path.read_bytes())
    config = json.loads((short / "config.json").read_text())
    (short / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 6}))
    copa = tmp_path / "copa-test.jsonl"
    copa.write_text(json.dumps({"premise": "비가 왔다.", "question": "결과", "alternative_1": "우산을 썼다.",
                                "alternative_2": "사람들이 모두 우산을 챙겨서 천천히 집으로 걸어갔다.", "label": 0},
                               ensure_ascii=False) + "\n", encoding="utf-8")
    # the item is the shortest of 14, the second rank's; scripts/torchrun.py (pretrain.sh's) keeps torchrun's own
    # traceback out, so any traceback left is a rank's: a rank that crashed in a collective instead of saying why
    result = run([sys.executable, REPO / "scripts" / "torchrun.py", "--nproc_per_node", 2, "--master_port", free_port(),
                  REPO / "scripts" / "evaluate.py", short, "--benchmarks", root / "kmmlu", copa], check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and re.fullmatch(rf"error: {re.escape(str(copa))}:1: choice \d is \d+ tokens, more than "
                                             r"the model's 6", errors[0]), result.stderr[-2000:]
