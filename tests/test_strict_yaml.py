"""Recipes and quality configs read as plain YAML (rankzero/strict_yaml.py): an alias bomb and a key given twice are
one line naming the file and line, before anything is expanded or silently overridden."""

from __future__ import annotations

import sys

import pytest

from helpers import REPO, run
from rankzero.args import parse_args
from rankzero.data.quality.config import QualityConfig
from rankzero.errors import ConfigError


def billion_laughs(levels: int) -> str:
    """Each level a list of nine aliases of the one before: 9**levels strings from a few hundred bytes."""
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels):
        previous, name = chr(ord("a") + level - 1), chr(ord("a") + level)
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_at_its_first_alias_in_a_process(tmp_path):
    """Nine levels: 387 M strings once expanded (one level less took 50 s and 3.5 GB before the unknown-key error)."""
    recipe = tmp_path / "bomb.yaml"
    recipe.write_text(billion_laughs(9))
    result = run([sys.executable, REPO / "train.py", recipe], check=False)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: invalid arguments:",
        f"  - recipe {recipe}:2: an alias (*a) repeats another value: aliases are not allowed here, write the value out"]


def test_an_anchor_without_an_alias_is_plain_yaml(tmp_path, tokenizer_dir):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("dataset: &data a.jsonl\ntokenize_only: true\n")
    assert parse_args([str(recipe), "--tokenizer_path", str(tokenizer_dir)]).sources.dataset == ("a.jsonl",)


@pytest.mark.parametrize("text, problem", [
    ("dataset: a.jsonl\nlearning_rate: 1.0e-4\nmax_steps: 3\nlearning_rate: 3.0e-4\n",
     "r.yaml:4: the key 'learning_rate' is given twice (first on line 2); keep one"),
    ("dataset: a.jsonl\nfsdp_config:\n  version: 2\n  version: 1\n",
     "r.yaml:4: the key 'version' is given twice (first on line 3); keep one"),
])
def test_a_key_given_twice_names_both_lines(tmp_path, text, problem):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(text)
    with pytest.raises(ConfigError) as error:
        parse_args([str(recipe), "--tokenize_only"])
    assert error.value.problems == [f"recipe {tmp_path}/{problem}"]


def test_keys_that_differ_in_type_are_two_keys(tmp_path, tokenizer_dir):
    recipe = tmp_path / "r.yaml"
    recipe.write_text('fsdp_config:\n  1: a\n  "1": b\ndataset: a.jsonl\ntokenize_only: true\n')
    assert parse_args([str(recipe), "--tokenizer_path", str(tokenizer_dir)]).sources.dataset == ("a.jsonl",)


def test_a_quality_config_gets_the_same_reading(tmp_path):
    config = tmp_path / "quality.yaml"
    config.write_text("min_chars: 5\nmax_chars: 100\nmin_chars: 50\n")
    with pytest.raises(ValueError, match=r"^--quality_config .*quality.yaml:3: the key 'min_chars' is given twice "
                                         r"\(first on line 1\); keep one$"):
        QualityConfig.from_yaml(config)
    config.write_text(billion_laughs(9))
    with pytest.raises(ValueError, match=r"quality.yaml:2: an alias \(\*a\) repeats another value"):
        QualityConfig.from_yaml(config)


def test_keys_that_read_as_one_value_are_one_key(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("fsdp_config:\n  1: a\n  0x1: b\n")
    with pytest.raises(ConfigError) as error:
        parse_args([str(recipe), "--tokenize_only"])
    assert error.value.problems == [f"recipe {recipe}:3: the key '0x1' is given twice (first on line 2); keep one"]
