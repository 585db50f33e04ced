"""Benchmark scores equal lm-evaluation-harness's (issue 45): the same prompts for every shape, zero- and five-shot,
and on a tiny trained model the same per-choice log-likelihoods (within 1e-4, fp32) and acc / acc_norm as lm-eval's
HFLM running its own task YAML (kmmlu's, kobest's, ...) over the same local files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmark_items import tiny_model, write_benchmark
from rankzero.data.screen.benchmark_files import read_suites

lm_eval = pytest.importorskip("lm_eval")  # a test dependency (pyproject's `test` extra), never a runtime one
TASKS = Path(lm_eval.__file__).parent / "tasks"

# shape: (lm-eval's task YAML to include, the splits our files have, the name lm-eval gives each split)
CASES = {
    "kmmlu": ("kmmlu/default/_default_kmmlu_yaml", {"dev": 5, "test": 12}),
    "kobest_boolq": ("kobest/kobest_boolq.yaml", {"train": 7, "validation": 3, "test": 9}),
    "kobest_copa": ("kobest/kobest_copa.yaml", {"train": 7, "validation": 3, "test": 10}),
    "kobest_hellaswag": ("kobest/kobest_hellaswag.yaml", {"train": 6, "validation": 2, "test": 8}),
    "kobest_sentineg": ("kobest/kobest_sentineg.yaml", {"train": 6, "validation": 2, "test": 8}),
    "kobest_wic": ("kobest/kobest_wic.yaml", {"train": 6, "validation": 2, "test": 8}),
    "haerae": ("haerae/_default_haerae_yaml", {"test": 9}),
    "click": ("click/click_cul/_default_click_cul_yaml", {"train": 9}),
}


def _task_yaml(shape: str, files: list[Path]) -> str:
    """lm-eval's own task for `shape`, its dataset swapped for our local files (and acc_norm asked for)."""
    include, splits = CASES[shape]
    # CLIcK's only split is called train by lm-eval; our file has no split in its name (all of it is scored)
    names = ["train"] if shape == "click" else list(splits)
    data_files = "\n".join(f"    {name}: {path}" for name, path in zip(names, files))
    return (f"include: {TASKS / include}\ntask: rz_{shape}\ndataset_path: {'csv' if shape == 'kmmlu' else 'json'}\n"
            f"dataset_name: null\ndataset_kwargs:\n  data_files:\n{data_files}\n"
            "metric_list:\n  - metric: acc\n  - metric: acc_norm\n")


@pytest.fixture(scope="module")
def benchmarks(tmp_path_factory):
    """Our files of every shape (one directory each) and a TaskManager that knows lm-eval's task over each (it
    indexes every task lm-eval ships: made once)."""
    from lm_eval.tasks import TaskManager

    root = tmp_path_factory.mktemp("benchmarks")
    (root / "tasks").mkdir()
    for shape, (_, splits) in CASES.items():
        files = write_benchmark(root / shape, shape, {"": splits["train"]} if shape == "click" else splits)
        (root / "tasks" / f"rz_{shape}.yaml").write_text(_task_yaml(shape, files), encoding="utf-8")
    return root, TaskManager(include_path=str(root / "tasks"))


@pytest.fixture(scope="module", autouse=True)
def offline():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setenv("HF_DATASETS_OFFLINE", "1")
        yield


@pytest.mark.parametrize("shots", [0, 5])
@pytest.mark.parametrize("shape", list(CASES))
def test_prompts_and_choices_are_lm_evals(benchmarks, shape, shots):
    """Every item's prompt (its shots drawn by lm-eval's sampler with its seed, joined by its delimiters), choices
    and answer are those lm-eval's task builds from the same file."""
    root, manager = benchmarks
    task = manager.load([f"rz_{shape}"])["tasks"][f"rz_{shape}"]
    task.set_fewshot_seed(1234)
    docs = list(task.test_docs())
    (suite,) = read_suites([root / shape], shots=shots)
    assert suite.shape == shape and len(suite.items) == len(docs) > 0
    for question, doc in zip(suite.items, docs):
        assert question.context == task.fewshot_context(doc, num_fewshot=shots)
        choices = task.doc_to_choice(doc)
        assert list(question.choices) == choices
        target = task.doc_to_target(doc)
        assert question.gold == (choices.index(target) if isinstance(target, str) else target)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tokenizer_dir):
    return tiny_model(tmp_path_factory.mktemp("model"), tokenizer_dir)


@pytest.fixture(scope="module")
def short_bos_model_dir(tmp_path_factory, model_dir):
    """The same model whose tokenizer adds BOS to every encoding and whose context is 96 tokens: five-shot KMMLU
    prompts are cut from the left, as HFLM cuts them."""
    import shutil

    from tokenizers import Tokenizer, processors

    directory = tmp_path_factory.mktemp("short_bos")
    shutil.copytree(model_dir, directory, dirs_exist_ok=True)
    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    bos = tokenizer.token_to_id("<s>")
    tokenizer.post_processor = processors.Sequence([processors.ByteLevel(trim_offsets=False),
                                                    processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B",
                                                                                  special_tokens=[("<s>", bos)])])
    tokenizer.save(str(directory / "tokenizer.json"))
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 96}))
    return directory


@pytest.mark.slow
@pytest.mark.parametrize("shots", [0, 5])
@pytest.mark.parametrize("shape", ["kmmlu", "kobest_copa", "kobest_boolq", "kmmlu with BOS, cut to 96 tokens"])
def test_scores_equal_lm_evals_hflm(request, benchmarks, model_dir, shape, shots):
    """Per choice, the summed log-likelihood and greediness equal HFLM's (within 1e-4 in fp32), and so do acc and
    acc_norm: KMMLU's CSV, KoBEST's JSONL (boolq's prompt ends in a space: _encode_pair moves it), and a tokenizer
    that adds BOS with a context shorter than the prompts."""
    import torch
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rankzero.train.benchmarks import score_suites

    if shape.startswith("kmmlu with BOS"):
        shape, model_dir = "kmmlu", request.getfixturevalue("short_bos_model_dir")
    root, manager = benchmarks
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    suites = read_suites([root / shape], shots=shots)
    if model_dir.name.startswith("short_bos"):
        assert tokenizer.encode("정답")[0] == tokenizer.bos_token_id
        assert shots == 0 or max(len(tokenizer.encode(q.context)) for q in suites[0].items) > 96
    reference = simple_evaluate(model=HFLM(pretrained=str(model_dir), batch_size=4, device="cpu", dtype="float32"),
                                tasks=[f"rz_{shape}"], num_fewshot=shots, log_samples=True, task_manager=manager,
                                random_seed=0, numpy_random_seed=0, torch_random_seed=0)
    samples = sorted(reference["samples"][f"rz_{shape}"], key=lambda sample: sample["doc_id"])
    metrics = reference["results"][f"rz_{shape}"]

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    scores = score_suites(model, tokenizer, suites, batch_size=3)[shape]
    assert scores["items"] == len(samples)
    for prediction, sample in zip(scores["predictions"], samples):
        theirs = [response[0] for response in sample["resps"]]
        assert prediction["loglikelihoods"] == pytest.approx([ll for ll, _ in theirs], abs=1e-4)
        assert prediction["greedy"] == [greedy for _, greedy in theirs]
    assert scores["acc"] == pytest.approx(metrics["acc,none"], abs=1e-12)
    assert scores["acc_norm"] == pytest.approx(metrics["acc_norm,none"], abs=1e-12)
    # the trained model tells choices apart: a tie everywhere would make acc equal by accident
    assert len({round(ll, 3) for p in scores["predictions"] for ll in p["loglikelihoods"]}) > len(samples)
