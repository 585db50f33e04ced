"""--benchmarks in the training loop: files checked before any work, scores at each evaluation and at the end, training
untouched, the same scores under FSDP on two gloo ranks as in one process, decontamination by default, and where
the numbers go (log line, log_history, benchmarks.json, the picture, the summary)."""

from __future__ import annotations

import csv
import json
import sys

import pytest
from helpers import REPO, TINY, data_args, free_port, log_history, losses, plan_of, run, train_flags, write_jsonl

from rankzero.errors import ConfigError

QUESTIONS = ["대한민국의 수도는 어디인가?", "한글을 만든 왕은 누구인가?", "김치의 주재료는 무엇인가?",
             "조선의 마지막 왕조 궁궐은?", "독도는 어느 바다에 있는가?", "한국의 전통 명절은?", "태극기의 가운데 색은?"]


def kmmlu_csv(path, rows=7, broken_at=None):
    """A KMMLU-style CSV of `rows` items; with `broken_at` (a file line), that row's answer is 7."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["question", "A", "B", "C", "D", "answer"])
        writer.writeheader()
        for index in range(rows):
            answer = "7" if index + 2 == broken_at else str(index % 4 + 1)
            writer.writerow({"question": QUESTIONS[index % len(QUESTIONS)] + f" ({index})", "A": "서울", "B": "부산",
                             "C": "세종대왕", "D": "배추", "answer": answer})
    return path


def kobest_jsonl(path, rows=5):
    """KoBEST COPA's shape: a premise, 원인 or 결과, two alternatives, the 0-based label."""
    return write_jsonl(path, [{"premise": f"{QUESTIONS[index]}", "question": "결과" if index % 2 else "원인",
                               "alternative_1": "그렇다", "alternative_2": "아니다 전혀", "label": index % 2}
                              for index in range(rows)])


def pretrained(tmp_path, tokenizer_dir):
    """A tiny model saved as a checkpoint, with attention dropout: every training step then draws from torch's random
    stream, so a scoring that drew from it, or left the model in eval mode, would change the losses after it."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = AutoConfig.from_pretrained(TINY, vocab_size=len(tokenizer), attention_dropout=0.1)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    path = tmp_path / "base"
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def continued_flags(corpus, tokenizer_dir, tmp_path, output_dir, **flags):
    argv = train_flags(corpus, tokenizer_dir, tmp_path / "cache", output_dir, **flags)
    at = argv.index("--model_config")
    return argv[:at] + argv[at + 2:]


# ------------------------------------------------------------------ before any work


@pytest.mark.parametrize("broken", ["answer", "empty"])
def test_a_broken_benchmark_file_stops_the_run_at_its_line_before_any_work(tmp_path, train_corpus, tokenizer_dir,
                                                                          broken):
    bad = kmmlu_csv(tmp_path / "law.csv", broken_at=4) if broken == "answer" else tmp_path / "copa.jsonl"
    if broken == "empty":
        bad.write_text("\n", encoding="utf-8")
    output_dir = tmp_path / "run"
    result = run([sys.executable, REPO / "train.py",
                  *train_flags(train_corpus, tokenizer_dir, tmp_path / "cache", output_dir, max_steps=5),
                  "--benchmarks", kmmlu_csv(tmp_path / "good.csv"), bad], check=False)
    assert result.returncode == 2, result.stderr[-2000:]
    where = f'{bad}:4: its "answer" is 7' if broken == "answer" else f"{bad}: no benchmark items"
    problems = [line for line in result.stderr.splitlines() if line.startswith("  - ")]
    assert len(problems) == 1 and where in problems[0], result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert "prepared:" not in result.stdout and not output_dir.exists() and not (tmp_path / "cache").exists()


def test_benchmarks_are_decontaminated_against_by_default_and_say_so(tmp_path, tokenizer_dir):
    corpus = write_jsonl(tmp_path / "corpus.jsonl", [{"text": "서울은 대한민국의 수도이다."}])
    bench = kmmlu_csv(tmp_path / "law.csv")
    other = kmmlu_csv(tmp_path / "other.csv")
    default = data_args(tokenizer_dir, tmp_path / "cache", [corpus], benchmarks=[bench])
    assert default.stage.decontaminate == (str(bench),)
    assert "--benchmarks" in default.defaults["decontaminate"]
    both = data_args(tokenizer_dir, tmp_path / "cache", [corpus], benchmarks=[bench], decontaminate=[other, bench])
    assert both.stage.decontaminate == (str(other), str(bench))  # named once: its items counted once
    off = data_args(tokenizer_dir, tmp_path / "cache", [corpus], benchmarks=[bench], decontaminate_benchmarks="false")
    assert off.stage.decontaminate == () and "decontaminate" not in off.defaults
    assert plan_of(default).fingerprint != plan_of(off).fingerprint
    with pytest.raises(ConfigError, match=r"--benchmark_shots -1: must be at least 0"):
        data_args(tokenizer_dir, tmp_path / "cache", [corpus], benchmarks=[bench], benchmark_shots=-1)


# ------------------------------------------------------------------ in the loop


def test_scoring_leaves_training_untouched_and_reports_before_and_after(tmp_path, corpus, tokenizer_dir):
    """20 steps of a continued model with dropout, evaluated every 5: the losses are bit-identical with and without
    --benchmarks; the scores come before the first step, at each evaluation and at the end, and go to the log,
    log_history, benchmarks.json, the picture and the summary."""
    base = pretrained(tmp_path, tokenizer_dir)
    law, copa = kmmlu_csv(tmp_path / "law.csv"), kobest_jsonl(tmp_path / "copa.jsonl")
    common = dict(pretrained_model=base, max_steps=20, logging_steps=1, eval_steps=5, validation_split_percentage=10,
                  decontaminate_benchmarks="false")  # the same data in both runs
    plain, scored = tmp_path / "plain", tmp_path / "scored"
    run([sys.executable, REPO / "train.py", *continued_flags(corpus, tokenizer_dir, tmp_path, plain, **common)])
    result = run([sys.executable, REPO / "train.py",
                  *continued_flags(corpus, tokenizer_dir, tmp_path, scored, **common), "--benchmarks", law, copa,
                  "--benchmark_max_items", 4])
    assert len(losses(plain)) == 20 and losses(scored) == losses(plain)
    entries = [entry for entry in log_history(scored) if "benchmark_seconds" in entry]
    assert [entry["step"] for entry in entries] == [0, 5, 10, 15, 20]
    for entry in entries:
        assert {"benchmark/law/acc", "benchmark/law/acc_norm", "benchmark/copa/acc", "benchmark/copa/acc_norm"} <= set(entry)
        assert entry["benchmark/law/acc"] in (0, 0.25, 0.5, 0.75, 1)  # 4 of the 7 items
    assert sum(line.startswith("benchmarks at step ") for line in result.stdout.splitlines()) == 5
    assert "benchmarks at step 20: law acc" in result.stdout and "% of the run so far" in result.stdout
    assert "  benchmark law: acc / acc_norm " in result.stdout and "(step 0) → " in result.stdout
    assert "  benchmarks: 5 scorings, " in result.stdout
    record = json.loads((scored / "benchmarks.json").read_text())
    assert [step["step"] for step in record["steps"]] == [0, 5, 10, 15, 20]
    law_record = record["benchmarks"]["law"]
    assert (law_record["items"], law_record["items_in_files"], law_record["shots"]) == (4, 7, 0)
    assert law_record["settings"] == {"benchmark_shots": 0, "benchmark_max_items": 4}
    last = law_record["evaluations"][-1]
    assert len(last["predictions"]) == 4 and all(len(p["loglikelihoods"]) == 4 for p in last["predictions"])
    assert last["acc"] == sum(p["predicted"] == p["gold"] for p in last["predictions"]) / 4
    assert (scored / "training_curves.png").is_file()


def test_the_picture_has_a_benchmark_panel_and_the_summary_before_and_after():
    from rankzero.train.report import panels, summary

    history = [{"benchmark/law/acc": 0.25, "benchmark/law/acc_norm": 0.5, "benchmark_seconds": 2.0, "step": 0},
               {"loss": 3.0, "step": 10},
               {"benchmark/law/acc": 0.75, "benchmark/law/acc_norm": 0.5, "benchmark_seconds": 2.0, "step": 10}]
    _, shown, _ = panels(history)
    assert ("benchmarks (--benchmarks)", "accuracy", [("law acc", [0.0, 10.0], [0.25, 0.75])]) in shown
    lines = summary(history, output_dir=REPO / "nowhere", wall_s=100.0, tokens=10, steps=10, saved=False,
                    tensorboard=False).splitlines()
    assert "  benchmark law: acc / acc_norm 0.2500 / 0.5000 (step 0) → 0.7500 / 0.5000 (step 10)" in lines
    assert "  benchmarks: 2 scorings, 4.0 s (2.00 s each), 4.0% of the run" in lines


def test_fsdp_on_two_gloo_ranks_scores_as_one_process(tmp_path, train_corpus, tokenizer_dir):
    """--fsdp full_shard under torchrun, 2 gloo ranks, an odd number of rows to deal: the scores before the first
    step are the base model's in one process, and those at the end the saved model's, item for item (1e-5)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rankzero.data.screen.benchmark_files import read_suites
    from rankzero.train.benchmarks import score_suites

    base = pretrained(tmp_path, tokenizer_dir)
    files = [kmmlu_csv(tmp_path / "law.csv"), kobest_jsonl(tmp_path / "copa.jsonl")]
    output_dir = tmp_path / "sharded"
    run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", 2, "--master_port", free_port(),
         REPO / "train.py", *continued_flags(train_corpus, tokenizer_dir, tmp_path, output_dir, pretrained_model=base,
                                             max_steps=4, fsdp="full_shard", decontaminate_benchmarks="false"),
         "--benchmarks", *files], timeout=600)
    record = json.loads((output_dir / "benchmarks.json").read_text())
    assert [step["step"] for step in record["steps"]] == [0, 4]
    suites = read_suites(files, max_items=500)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    for at, model_dir in ((0, base), (1, output_dir)):
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        alone = score_suites(model, tokenizer, suites)
        for name, scores in alone.items():
            sharded = record["benchmarks"][name]["evaluations"][at]
            assert [p["predicted"] for p in sharded["predictions"]] == [p["predicted"] for p in scores["predictions"]]
            for ours, theirs in zip(sharded["predictions"], scores["predictions"]):
                assert ours["loglikelihoods"] == pytest.approx(theirs["loglikelihoods"], abs=1e-5)
            assert (sharded["acc"], sharded["acc_norm"]) == (scores["acc"], scores["acc_norm"])
