"""SFT's chat rendering, end to end: said on screen and in the manifest, saved as the model's chat template,
and what `scripts/generate.py --chat` makes of the model (and of an answer that ends at once)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from helpers import REPO, run, train_flags

CONVERSATIONS = [
    [{"role": "system", "content": "짧게 답하세요."}, {"role": "user", "content": "서울은 어디에 있나요?"},
     {"role": "assistant", "content": "한국의 북서쪽에 있습니다."}, {"role": "user", "content": "인구는요?"},
     {"role": "assistant", "content": "약 천만 명입니다."}],
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}],
]


@pytest.mark.parametrize("messages", CONVERSATIONS)
def test_the_plain_chat_template_renders_as_the_plain_format(messages):
    from transformers.utils.chat_template_utils import render_jinja_template

    from rankzero.data.inputs.records import PLAIN_CHAT_TEMPLATE, ChatRenderer

    def jinja(conversation, generation_prompt):
        return render_jinja_template(conversations=[conversation], chat_template=PLAIN_CHAT_TEMPLATE,
                                     add_generation_prompt=generation_prompt)[0][0]

    plain = ChatRenderer(None).render(messages, with_masks=True)
    assert jinja(messages, False) == "".join(text for text, _ in plain)
    # What the model is prompted with for an answer is exactly the context it learned to answer after.
    first_answer = next(i for i, (_, trained) in enumerate(plain) if trained)
    prompt = "".join(text for text, _ in plain[:first_answer])
    assert jinja(messages[:messages.index(next(m for m in messages if m["role"] == "assistant"))], True) == prompt


@pytest.fixture
def plain_tokenizer(tmp_path, tokenizer_dir):
    """The test tokenizer without its chat template."""
    directory = tmp_path / "plain_tokenizer"
    shutil.copytree(tokenizer_dir, directory)
    config = json.loads((directory / "tokenizer_config.json").read_text())
    config.pop("chat_template")
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    (directory / "chat_template.jinja").unlink(missing_ok=True)
    return directory


def test_sft_without_a_chat_template_says_so_and_saves_the_rendering_it_used(tmp_path, plain_tokenizer):
    from transformers import AutoTokenizer

    from rankzero.data.inputs.records import PLAIN_CHAT_TEMPLATE

    out = tmp_path / "sft"
    result = run([sys.executable, REPO / "train.py",
                  *train_flags(REPO / "data/sample/chat.jsonl", plain_tokenizer, tmp_path / "cache", out, max_steps=2,
                               logging_steps=1, mode="sft", max_seq_length=128)])
    assert "chat rendering: plain '### User:/### Assistant:' (the tokenizer has no chat template)" in result.stdout
    assert "  chats      rendered with plain '### User:/### Assistant:'" in result.stderr
    prepared = next(line[len("prepared: "):] for line in result.stdout.splitlines() if line.startswith("prepared: "))
    manifest = json.loads((Path(prepared) / "manifest.json").read_text())
    assert manifest["chat_rendering"].startswith("plain '### User:/### Assistant:'")
    assert AutoTokenizer.from_pretrained(out).chat_template == PLAIN_CHAT_TEMPLATE
    assert AutoTokenizer.from_pretrained(plain_tokenizer).chat_template is None  # the input is left as it was

    sample = run([sys.executable, REPO / "scripts/generate.py", out, "--chat", "--prompt", "안녕", "--max_new_tokens", 5])
    assert sample.stdout.startswith("sample: "), sample.stdout

    # A model that can only end its answer: the sample is empty, and says why.
    config = json.loads((out / "generation_config.json").read_text())
    eos = AutoTokenizer.from_pretrained(out).eos_token_id
    config["suppress_tokens"] = [i for i in range(json.loads((out / "config.json").read_text())["vocab_size"])
                                 if i != eos]
    (out / "generation_config.json").write_text(json.dumps(config))
    ended = run([sys.executable, REPO / "scripts/generate.py", out, "--chat", "--greedy", "--max_new_tokens", 5])
    assert ended.stdout.splitlines() == ["sample: ", "(stopped at end-of-text after 0 of at most 5 new tokens)"]


def test_sft_with_a_chat_template_says_so_and_keeps_it(tmp_path, tokenizer_dir):
    from transformers import AutoTokenizer

    out = tmp_path / "sft"
    result = run([sys.executable, REPO / "train.py",
                  *train_flags(REPO / "data/sample/chat.jsonl", tokenizer_dir, tmp_path / "cache", out, max_steps=1,
                               mode="sft", max_seq_length=128)])
    assert "chat rendering: the tokenizer's chat template" in result.stdout
    assert AutoTokenizer.from_pretrained(out).chat_template == AutoTokenizer.from_pretrained(tokenizer_dir).chat_template


def test_the_pretrained_models_tokenizer_is_the_default(tmp_path, tokenizer_dir):
    from rankzero.args import parse_args
    from rankzero.errors import ConfigError

    model = tmp_path / "model"
    shutil.copytree(tokenizer_dir, model)
    (model / "config.json").write_text("{}")
    args = parse_args(["--dataset", "x.jsonl", "--pretrained_model", str(model), "--output_dir", str(tmp_path / "o")])
    assert args.stage.tokenizer_path == str(model)
    assert "tokenizer_path" not in args.given and "--pretrained_model" in args.defaults["tokenizer_path"]
    given = parse_args(["--dataset", "x.jsonl", "--pretrained_model", str(model), "--tokenizer_path", str(tokenizer_dir),
                        "--output_dir", str(tmp_path / "o")])
    assert given.stage.tokenizer_path == str(tokenizer_dir)
    (model / "tokenizer_config.json").unlink()  # a model dir without a tokenizer: the flag is needed
    with pytest.raises(ConfigError, match="--tokenizer_path: give the directory"):
        parse_args(["--dataset", "x.jsonl", "--pretrained_model", str(model), "--output_dir", str(tmp_path / "o")])
