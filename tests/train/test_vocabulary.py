"""A checkpoint continued with an extended tokenizer: sub-word init of the new rows, and the steps that train them first."""

from __future__ import annotations

import re
import shutil

import pytest
import torch

from helpers import TINY, korean_documents

BASE_SIZE = 1000  # conftest's TOKENIZER_VOCAB_SIZE
CHECKPOINT_ROWS = 1024  # the base tokenizer's size padded to 64, as rankzero saves a new model


@pytest.fixture(scope="module")
def extended_dir(tokenizer_dir, tmp_path_factory):
    """conftest's tokenizer extended with 300 Korean tokens (ids 1000-1299), as scripts/train_tokenizer.py does."""
    from rankzero.tokenizer_trainer import train_tokenizer

    path = tmp_path_factory.mktemp("extended")
    train_tokenizer(korean_documents(400, seed=1), BASE_SIZE + 300, path, base_tokenizer=tokenizer_dir)
    return path


def save_checkpoint(directory, tokenizer_dir, *, tied=True, with_tokenizer=True):
    from transformers import AutoModelForCausalLM

    from rankzero.train.model import load_config

    config = load_config(TINY)
    config.vocab_size, config.tie_word_embeddings = CHECKPOINT_ROWS, tied
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(directory)
    if with_tokenizer:
        for path in tokenizer_dir.iterdir():
            shutil.copy(path, directory / path.name)
    return directory


def load(directory):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32)


def spread(rows: torch.Tensor) -> float:
    return rows.std(dim=0).mean().item()


@pytest.mark.parametrize("tied", [True, False])
def test_new_rows_are_their_pieces_mean_and_old_rows_stay(tmp_path, tokenizer_dir, extended_dir, tied):
    from transformers import AutoTokenizer

    from rankzero.config import ModelConfig
    from rankzero.train.model import build_model
    from rankzero.train.vocabulary import token_pieces

    checkpoint = save_checkpoint(tmp_path / "ckpt", tokenizer_dir, tied=tied)
    before = load(checkpoint)
    tokenizer, old = AutoTokenizer.from_pretrained(extended_dir), AutoTokenizer.from_pretrained(tokenizer_dir)
    model, extension = build_model(ModelConfig(pretrained_model=str(checkpoint)), tokenizer, len(tokenizer) - 1,
                                   "sdpa")
    assert (extension.first_new_row, extension.rows) == (BASE_SIZE, 1344)  # 1300 padded to 64
    assert extension.subword_rows + extension.fallback_rows == 300 and extension.padding_rows == 44
    assert extension.fallback_rows == 0  # every Korean token splits into known bytes at least
    pieces = token_pieces(tokenizer, old, BASE_SIZE)
    # the old tokenizer's split of a new token's text, checked on one whole-character token by hand (a byte-level
    # token may hold part of a character, whose decoded text is U+FFFD: token_pieces splits its bytes instead)
    token = next(t for t in range(BASE_SIZE, 1300) if len(pieces[t]) > 1 and "\ufffd" not in tokenizer.decode([t]))
    assert tokenizer.decode(pieces[token]) == tokenizer.decode([token])
    assert old.encode(tokenizer.decode([token]), add_special_tokens=False) == pieces[token]

    pairs = [(before.get_input_embeddings().weight, model.get_input_embeddings().weight),
             (before.get_output_embeddings().weight, model.get_output_embeddings().weight)]
    assert (model.get_output_embeddings().weight is model.get_input_embeddings().weight) == tied
    for old_weight, weight in pairs:
        assert torch.equal(weight[:BASE_SIZE], old_weight[:BASE_SIZE])  # (1000-1023: padding, never trained)
        new = weight[BASE_SIZE:1300]
        for token_id in range(BASE_SIZE, 1300):
            expected = old_weight[pieces[token_id]].double().mean(0).float()
            assert torch.equal(weight[token_id], expected), token_id
        assert spread(new) >= spread(old_weight[:BASE_SIZE]) / 10
        assert torch.equal(weight[1300:], old_weight[:BASE_SIZE].double().mean(0).float().expand(44, -1))
    state = {name: p for name, p in before.named_parameters() if "embed" not in name and "lm_head" not in name}
    for name, parameter in model.named_parameters():
        if name in state:
            assert torch.equal(parameter, state[name]), name


def test_tokens_that_fit_the_checkpoints_padding_rows_get_them(tmp_path, tokenizer_dir, extended_dir):
    """1000 tokens in 1024 rows: a tokenizer of 1010 needs no resize, but rows 1000-1009 were never trained."""
    from transformers import AutoTokenizer

    from rankzero.config import ModelConfig
    from rankzero.train.model import build_model
    from rankzero.tokenizer_trainer import train_tokenizer

    small = train_tokenizer(korean_documents(400, seed=1), BASE_SIZE + 10, tmp_path / "tok", base_tokenizer=tokenizer_dir)
    checkpoint = save_checkpoint(tmp_path / "ckpt", tokenizer_dir)
    before = load(checkpoint).get_input_embeddings().weight
    model, extension = build_model(ModelConfig(pretrained_model=str(checkpoint)), small, None, "sdpa")
    weight = model.get_input_embeddings().weight
    assert extension.rows == CHECKPOINT_ROWS and extension.subword_rows == 10
    assert torch.equal(weight[:BASE_SIZE], before[:BASE_SIZE])
    assert not torch.equal(weight[BASE_SIZE:1010], before[BASE_SIZE:1010])
    assert AutoTokenizer.from_pretrained(tmp_path / "tok").convert_ids_to_tokens(0) == small.convert_ids_to_tokens(0)


def test_a_checkpoint_without_a_tokenizer_falls_back_to_the_mean_and_says_so(tmp_path, tokenizer_dir, extended_dir):
    from transformers import AutoTokenizer

    from rankzero.config import ModelConfig
    from rankzero.train.model import build_model

    checkpoint = save_checkpoint(tmp_path / "ckpt", tokenizer_dir, with_tokenizer=False)
    with pytest.warns(UserWarning, match="holds no tokenizer .* every new row at the old rows' mean"):
        model, extension = build_model(ModelConfig(pretrained_model=str(checkpoint)),
                                       AutoTokenizer.from_pretrained(extended_dir), None, "sdpa")
    assert model.get_input_embeddings().num_embeddings == 1344
    assert (extension.split, extension.first_new_row, extension.fallback_rows) == (False, CHECKPOINT_ROWS, 1300 - 1024)
    new = model.get_input_embeddings().weight[CHECKPOINT_ROWS:]
    assert spread(new) < spread(model.get_input_embeddings().weight[:BASE_SIZE]) / 1000  # one shared vector


def test_a_resume_finds_the_stages_first_row_again(tmp_path, tokenizer_dir, extended_dir):
    """A resume builds the model from the run's checkpoint (its rows already made): the stage's rows are found again
    from --pretrained_model, as when the run started."""
    from transformers import AutoTokenizer

    from rankzero.config import ModelConfig
    from rankzero.train.vocabulary import new_rows_start

    tokenizer = AutoTokenizer.from_pretrained(extended_dir)
    with_tokenizer = ModelConfig(pretrained_model=str(save_checkpoint(tmp_path / "a", tokenizer_dir)),
                                 train_new_embeddings_steps=2)
    without = ModelConfig(pretrained_model=str(save_checkpoint(tmp_path / "b", tokenizer_dir, with_tokenizer=False)),
                          train_new_embeddings_steps=2)
    assert new_rows_start(with_tokenizer, tokenizer, None) == BASE_SIZE
    assert new_rows_start(without, tokenizer, None) == CHECKPOINT_ROWS
    assert new_rows_start(with_tokenizer, AutoTokenizer.from_pretrained(tokenizer_dir), None) is None
    assert new_rows_start(ModelConfig(), tokenizer, None) is None


def test_a_resume_reads_the_stages_first_row_from_its_checkpoint(tmp_path, tokenizer_dir, extended_dir):
    """The row is recorded in each checkpoint, so a resume needs --pretrained_model only for an older checkpoint,
    and says so when that dir is gone; without the stage it never reads --pretrained_model at all."""
    from transformers import AutoTokenizer

    from rankzero.config import ModelConfig
    from rankzero.errors import RankzeroError
    from rankzero.train.vocabulary import new_rows_start

    tokenizer = AutoTokenizer.from_pretrained(extended_dir)
    gone = ModelConfig(pretrained_model=str(tmp_path / "gone"), train_new_embeddings_steps=2)
    checkpoint = tmp_path / "run" / "checkpoint-2"
    checkpoint.mkdir(parents=True)
    (checkpoint / "data_fingerprint.json").write_text('{"fingerprint": "f", "new_rows_from": 1000}')
    assert new_rows_start(gone, tokenizer, None, str(checkpoint)) == BASE_SIZE
    assert new_rows_start(ModelConfig(pretrained_model=str(tmp_path / "gone")), tokenizer, None, str(checkpoint)) is None
    (checkpoint / "data_fingerprint.json").write_text('{"fingerprint": "f"}')  # an older rankzero's
    with pytest.raises(RankzeroError, match=r"--train_new_embeddings_steps 2: .*checkpoint-2 does not record which "
                                            r"embedding rows are new .* --pretrained_model .*gone, where they would be "
                                            r"found again, is gone: restore it"):
        new_rows_start(gone, tokenizer, None, str(checkpoint))


def test_a_continued_run_resumes_after_its_pretrained_model_dir_is_gone(tmp_path, tokenizer_dir, extended_dir,
                                                                       train_corpus):
    """Its recipe names --pretrained_model, which a resume does not read (the model comes from the checkpoint, the
    stage's rows from its record): the dir deleted, the resume (with --tokenizer_path) runs on from checkpoint-2."""
    import sys

    from helpers import REPO, flag_argv, losses, run

    checkpoint = save_checkpoint(tmp_path / "ckpt", tokenizer_dir)
    out = tmp_path / "run"
    flags = {"dataset": train_corpus, "tokenizer_path": extended_dir, "pretrained_model": checkpoint,
             "cache_dir": tmp_path / "cache", "output_dir": out, "max_seq_length": 64, "per_device_train_batch_size": 4,
             "max_steps": 5, "train_new_embeddings_steps": 3, "save_strategy": "steps", "save_steps": 2,
             "logging_steps": 1, "report_to": "none", "dataloader_num_workers": 0}
    run([sys.executable, REPO / "train.py", *flag_argv(flags)])
    shutil.rmtree(checkpoint)
    result = run([sys.executable, REPO / "train.py", *flag_argv({**flags, "resume_from_checkpoint": out / "checkpoint-2"})])
    assert "step 3/5" in result.stdout and set(losses(out)) == {1, 2, 3, 4, 5}
    assert "new embedding rows trained alone for 3 step(s)" in result.stderr  # the stage ends inside the resume


def test_a_tokenizer_that_is_no_extension_is_named(tmp_path, tokenizer_dir):
    from rankzero.config import ModelConfig
    from rankzero.train.model import build_model
    from rankzero.tokenizer_trainer import train_tokenizer

    other = train_tokenizer(korean_documents(400, seed=2), BASE_SIZE + 100, tmp_path / "other")  # not extended
    checkpoint = save_checkpoint(tmp_path / "ckpt", tokenizer_dir)
    with pytest.warns(UserWarning, match=r"not an extension of .* ids name other tokens"):
        build_model(ModelConfig(pretrained_model=str(checkpoint)), other, None, "sdpa")


@pytest.mark.parametrize("tied", [True, False])
def test_the_first_stage_trains_only_new_rows_then_everything(tmp_path, tokenizer_dir, extended_dir, tied):
    """Through the HF Trainer with AdamW and weight decay: after the stage's 3 steps every old row and every other
    parameter is bit-identical to the checkpoint's, the new rows moved; 2 steps later everything moved."""
    from transformers import AutoTokenizer, Trainer, TrainerCallback, TrainingArguments

    from rankzero.config import ModelConfig
    from rankzero.train.model import build_model
    from rankzero.train.vocabulary import NewEmbeddingsFirst

    tokenizer = AutoTokenizer.from_pretrained(extended_dir)
    checkpoint = save_checkpoint(tmp_path / "ckpt", tokenizer_dir, tied=tied)
    model, extension = build_model(ModelConfig(pretrained_model=str(checkpoint)), tokenizer, None, "sdpa")
    start = {name: p.detach().clone() for name, p in model.named_parameters()}
    snapshots = {}

    class Snapshot(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            snapshots[state.global_step] = {name: p.detach().clone() for name, p in model.named_parameters()}

    generator = torch.Generator().manual_seed(0)
    rows = [{"input_ids": ids, "labels": ids} for ids in torch.randint(0, len(tokenizer), (16, 24), generator=generator)]
    args = TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=5, per_device_train_batch_size=2,
                             gradient_accumulation_steps=2, learning_rate=1e-2, weight_decay=0.1, adam_beta2=0.95,
                             warmup_steps=0, optim="adamw_torch", use_cpu=True, report_to=[], save_strategy="no",
                             logging_steps=1, disable_tqdm=True, seed=0)
    trainer = Trainer(model=model, args=args, train_dataset=rows)
    trainer.add_callback(NewEmbeddingsFirst(model, extension.first_new_row, steps=3))
    trainer.add_callback(Snapshot())
    trainer.train()

    first = extension.first_new_row
    matrices = {"model.embed_tokens.weight"} | (set() if tied else {"lm_head.weight"})
    for name, value in snapshots[3].items():
        if name in matrices:
            assert torch.equal(value[:first], start[name][:first]), name
            moved = (value[first:] != start[name][first:]).any(dim=1)
            # every new output row gets a gradient (the softmax); an input row only where its token was read
            assert moved.all() if tied or name == "lm_head.weight" else moved.any(), name
        else:
            assert torch.equal(value, start[name]), name
    for name, value in snapshots[5].items():
        moved = value != snapshots[3][name]
        assert moved.any(), name
        if name in matrices:
            assert moved[:first].any(dim=1).float().mean() > 0.5, name  # old rows train too (most in 2 steps)
    assert trainer.optimizer.param_groups[0]["weight_decay"] == 0.1  # put back after the stage


def test_continued_pretraining_defaults(tmp_path):
    from rankzero.runtime import Runtime
    from rankzero.train.defaults import Facts, learning_defaults, resolve
    from rankzero.train.training_args import TrainingArguments

    def resolved(given: frozenset, parameters: int, **flags):
        args = TrainingArguments(output_dir=str(tmp_path), **flags)
        facts = Facts(given, Runtime.from_env(), parameters=parameters, from_scratch=False)
        return resolve(args, facts, (learning_defaults,))[:2]

    args, reasons = resolved(frozenset(), int(8e9))
    assert args.learning_rate == 2.2e-05 and "continued pretraining, 8,000M parameters" in reasons["learning_rate"]
    assert args.lr_scheduler_type.value == "cosine_with_min_lr" and args.lr_scheduler_kwargs == {"min_lr_rate": 0.1}
    assert (args.warmup_steps, args.adam_beta1, args.adam_beta2, args.weight_decay) == (0.02, 0.9, 0.95, 0.1)
    assert resolved(frozenset(), int(1.3e9))[0].learning_rate == 4e-05
    # A flag given (on the command line or by a recipe) is kept; a schedule given keeps its own arguments.
    args, reasons = resolved(frozenset({"learning_rate", "lr_scheduler_type"}), int(8e9), learning_rate=1e-4,
                             lr_scheduler_type="linear")
    assert args.learning_rate == 1e-4 and args.lr_scheduler_type.value == "linear" and not args.lr_scheduler_kwargs
    assert {"learning_rate", "lr_scheduler_type", "lr_scheduler_kwargs"}.isdisjoint(reasons)
    assert args.adam_beta2 == 0.95


def test_continuing_with_an_extended_tokenizer_end_to_end(tmp_path, tokenizer_dir, extended_dir, train_corpus):
    """train.py --pretrained_model with a tokenizer of 300 more tokens and no lr: the rows are made, the first stage
    trains, the continued-pretraining schedule is used, and the printed configuration shows the optimizer whole."""
    import json
    import sys

    from helpers import REPO, flag_argv, log_history, run

    checkpoint = save_checkpoint(tmp_path / "ckpt", tokenizer_dir)
    out = tmp_path / "run"
    flags = {"dataset": train_corpus, "tokenizer_path": extended_dir, "pretrained_model": checkpoint,
             "cache_dir": tmp_path / "cache", "output_dir": out, "max_seq_length": 64,
             "per_device_train_batch_size": 4, "max_steps": 4, "train_new_embeddings_steps": 2, "logging_steps": 1,
             "save_strategy": "no", "report_to": "none", "dataloader_num_workers": 0}
    result = run([sys.executable, REPO / "train.py", *flag_argv(flags)], timeout=600)
    printed = result.stdout
    assert "vocabulary = 300 new token(s) beyond --pretrained_model" in printed
    assert "training.learning_rate = 0.0002  (default: 0.0002 (continued pretraining" in printed
    assert "training.lr_scheduler_type = 'cosine_with_min_lr'  (default:" in printed
    assert "training.adam_beta1 = 0.9  (Hugging Face's default)" in printed
    assert "training.adam_beta2 = 0.95  (default:" in printed and "training.weight_decay = 0.1  (default:" in printed
    assert "new embedding rows trained alone for 2 step(s)" in result.stderr
    config = json.loads((out / "run_config.json").read_text())
    assert config["training"]["lr_scheduler_kwargs"] == {"min_lr_rate": 0.1}
    rates = [entry["learning_rate"] for entry in log_history(out) if "learning_rate" in entry]
    assert len(rates) == 4 and max(rates) <= 2e-4 and min(rates[1:]) >= 2e-5  # warm-up, then never below the floor


def test_the_first_stage_under_fsdp_moves_only_new_rows(tmp_path, tokenizer_dir, extended_dir, train_corpus):
    """--fsdp full_shard, 2 gloo processes: each rank holds half of the embedding's rows, so the old rows' gradient
    is zeroed in each rank's own shard. The stage's last checkpoint (DCP shards, exported) holds every old row and
    every other parameter bit-identical to the checkpoint's; the finished run moved them."""
    import sys

    from helpers import REPO, flag_argv, free_port, run

    checkpoint = save_checkpoint(tmp_path / "ckpt", tokenizer_dir)
    out = tmp_path / "run"
    flags = {"dataset": train_corpus, "tokenizer_path": extended_dir, "pretrained_model": checkpoint,
             "cache_dir": tmp_path / "cache", "output_dir": out, "max_seq_length": 64, "fsdp": "full_shard",
             "per_device_train_batch_size": 4, "max_steps": 4, "train_new_embeddings_steps": 2, "learning_rate": 1e-2,
             "logging_steps": 1, "save_strategy": "steps", "save_steps": 2, "report_to": "none",
             "dataloader_num_workers": 0}
    result = run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", 2, "--master_port", free_port(),
                  REPO / "train.py", *flag_argv(flags)], timeout=600)
    assert "FSDP2 full_shard over 2 process(es)" in result.stdout
    run([sys.executable, REPO / "scripts" / "export_checkpoint.py", out / "checkpoint-2", tmp_path / "stage"])
    from transformers import AutoTokenizer

    from rankzero.config import ModelConfig
    from rankzero.train.model import build_model

    initial, extension = build_model(ModelConfig(pretrained_model=str(checkpoint)),
                                     AutoTokenizer.from_pretrained(extended_dir), None, "sdpa")
    start, stage, finished = load(checkpoint), load(tmp_path / "stage"), load(out)
    first = extension.first_new_row
    assert first == BASE_SIZE
    before, after = dict(start.named_parameters()), dict(stage.named_parameters())
    for name, value in after.items():
        if name == "model.embed_tokens.weight":
            assert torch.equal(value[:first], before[name][:first])
            # tied: every new row is an output row too, and the softmax moves every output row
            assert (value[first:] != initial.get_input_embeddings().weight[first:]).any(dim=1).all()
        else:
            assert torch.equal(value, before[name]), name
    moved = dict(finished.named_parameters())
    assert all((moved[name] != after[name]).any() for name in after)  # then everything trains
    assert (moved["model.embed_tokens.weight"][:first] != before["model.embed_tokens.weight"][:first]).any(dim=1).any()


def test_a_new_tokens_pieces_are_the_old_split_of_its_text_not_of_its_byte_alphabet_spelling(tmp_path):
    """On a tokenizer that never saw Korean, the new token " 한국어로" must start from the old ids of the text
    " 한국어로" (13 byte tokens), not from the old split of how the byte-level vocabulary spells it
    ("ĠíķľêµŃìĸ´ë¡ľ", which the old tokenizer reads as Latin-1 letters, each two UTF-8 bytes)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from conftest import CODE_SNIPPETS, ENGLISH_PARAGRAPHS
    from rankzero.tokenizer_trainer import train_tokenizer
    from rankzero.train.model import load_config
    from rankzero.train.vocabulary import extend_embeddings

    old = train_tokenizer((ENGLISH_PARAGRAPHS + CODE_SNIPPETS) * 3, 400, tmp_path / "old")
    train_tokenizer(["한국에서 한국어로 말한다. " * 30] * 10, 440, tmp_path / "new", base_tokenizer=tmp_path / "old")
    new = AutoTokenizer.from_pretrained(tmp_path / "new")
    (token,) = new.encode(" 한국어로", add_special_tokens=False)
    text_ids = old.encode(" 한국어로", add_special_tokens=False)
    spelling_ids = old.encode(new.convert_ids_to_tokens(token), add_special_tokens=False)
    assert token >= len(old) and len(text_ids) == 13 and sorted(text_ids) != sorted(spelling_ids)

    config = load_config(TINY)
    config.vocab_size, config.tie_word_embeddings = len(old), False
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    before = model.get_input_embeddings().weight.detach().clone()
    extend_embeddings(model, new, old, 448)
    assert torch.equal(model.get_input_embeddings().weight[token], before[text_ids].double().mean(0).float())


def test_a_checkpoint_inside_the_stage_under_fsdp_resumes_exactly_after_sigterm(tmp_path, tokenizer_dir,
                                                                                  extended_dir, train_corpus):
    """SIGTERM to torchrun (2 gloo ranks, FSDP) inside --train_new_embeddings_steps: the checkpoint holds AdamW's
    state for the new rows only, and `auto` resumes from it (it stopped at "Missing key in checkpoint state_dict:
    optimizer.state.….step") to the uninterrupted run's losses, through the stage's end, where the other
    parameters start their optimizer state."""
    import signal
    import sys

    from helpers import REPO, flag_argv, free_port, losses, run
    from test_train_preemption import finish, read_until, start

    steps, stage = 12, 8
    checkpoint = save_checkpoint(tmp_path / "ckpt", tokenizer_dir)

    def command(out, **more):
        flags = {"dataset": train_corpus, "tokenizer_path": extended_dir, "pretrained_model": checkpoint,
                 "cache_dir": tmp_path / "cache", "output_dir": out, "max_seq_length": 64, "fsdp": "full_shard",
                 "per_device_train_batch_size": 4, "max_steps": steps, "train_new_embeddings_steps": stage,
                 "learning_rate": 1e-2, "lr_scheduler_type": "constant", "logging_steps": 1, "report_to": "none",
                 "dataloader_num_workers": 0, **more}
        return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", 2, "--master_port", free_port(),
                REPO / "train.py", *flag_argv(flags)]

    whole = tmp_path / "whole"
    run(command(whole), timeout=600)
    out = tmp_path / "preempted"
    job = start(command(out))
    read_until(job, f"step 2/{steps}")
    job.send_signal(signal.SIGTERM)
    printed = finish(job, timeout=120)
    [saved] = [p for p in out.iterdir() if p.name.startswith("checkpoint-")]
    stopped = int(saved.name.split("-")[1])
    assert 2 <= stopped < stage, printed[-3000:]  # inside the stage
    result = run(command(out, resume_from_checkpoint="auto"), timeout=600)
    assert f"step {stopped + 1}/{steps}" in result.stdout
    expected, got = losses(whole), losses(out)
    assert set(range(stopped + 1, steps + 1)) <= set(got)
    for step in range(stopped + 1, steps + 1):
        assert got[step] == pytest.approx(expected[step], rel=1e-4), (step, got[step], expected[step])


def test_a_stage_longer_than_a_run_of_epochs_is_refused(tmp_path, tokenizer_dir, extended_dir, train_corpus):
    """--num_train_epochs, no --max_steps: the run's length is known once the data is; a stage as long stops the
    run with the numbers (it trained only the new rows, to the end)."""
    import subprocess
    import sys

    from helpers import REPO, flag_argv, quiet_env

    checkpoint = save_checkpoint(tmp_path / "ckpt", tokenizer_dir)
    flags = {"dataset": train_corpus, "tokenizer_path": extended_dir, "pretrained_model": checkpoint,
             "cache_dir": tmp_path / "cache", "output_dir": tmp_path / "run", "max_seq_length": 64,
             "per_device_train_batch_size": 4, "num_train_epochs": 1, "train_new_embeddings_steps": 500,
             "report_to": "none", "dataloader_num_workers": 0}
    result = subprocess.run([sys.executable, str(REPO / "train.py"), *map(str, flag_argv(flags))], capture_output=True,
                            text=True, timeout=600, env=quiet_env(), cwd=REPO)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert "error: invalid arguments:" in result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.startswith("  - ")]
    assert re.fullmatch(r"  - --train_new_embeddings_steps 500: the run ends after (\d+) optimizer steps "
                        r"\(--num_train_epochs 1 of \1 step\(s\) each\), so the whole model would never train; give "
                        r"fewer new-embeddings steps, more --num_train_epochs, or --max_steps", line), line
    assert not (tmp_path / "run" / "model.safetensors").exists()
