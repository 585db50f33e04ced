"""The launchers and train.py as a newcomer meets them: outside any virtualenv, and with a mistake in the flags."""

from __future__ import annotations

import socket
import sys

import pytest

from helpers import REPO, TINY, quiet_env, run

needs_venv = pytest.mark.skipif(not (REPO / ".venv" / "bin" / "python").exists(),
                                reason="needs the .venv beside the launchers (./venv.sh sets it up)")


def outside_any_venv(**extra) -> dict:
    """A shell where `python3` has no torch: no virtualenv active, no PYTHON, only the system's PATH."""
    env = quiet_env(PATH="/usr/bin:/bin", **extra)
    for name in ("VIRTUAL_ENV", "PYTHON", "CONDA_PREFIX"):
        env.pop(name, None)
    return env


@needs_venv
@pytest.mark.parametrize("ranks", [1, 2])
def test_a_user_error_under_pretrain_sh_is_one_message_and_exit_2_outside_the_venv(tmp_path, tokenizer_dir, ranks):
    result = run([REPO / "pretrain.sh", "--dataset", tmp_path / "missing.jsonl", "--tokenizer_path", tokenizer_dir,
                  "--output_dir", tmp_path / "run", "--max_steps", "-3"],
                 env=outside_any_venv(NGPU=ranks), cwd=tmp_path, check=False)
    assert result.returncode == 2, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    # the rank's message, once (not once per rank), and nothing of torchrun's after it
    assert lines[0] == "error: invalid arguments:", result.stderr
    assert all(line.startswith("  - ") for line in lines[1:]), result.stderr
    assert any("--max_steps -3" in line for line in lines) and any("--model_config" in line for line in lines)
    assert not (tmp_path / "run").exists()


@needs_venv
def test_another_user_error_names_the_rank_in_one_line_and_keeps_its_code(tmp_path, tokenizer_dir):
    result = run([REPO / "pretrain.sh", "--dataset", tmp_path / "missing.jsonl", "--tokenizer_path", tokenizer_dir,
                  "--model_config", REPO / "configs/model_config_tiny.json", "--output_dir", tmp_path / "run"],
                 env=outside_any_venv(NGPU=1), cwd=tmp_path, check=False)
    assert result.returncode == 1, result.stderr[-3000:]
    assert result.stderr.splitlines() == [
        f"error: --dataset {tmp_path / 'missing.jsonl'}: no such file or directory: {tmp_path / 'missing.jsonl'}",
        f"torchrun: rank 0 (local rank 0 on {socket.gethostname()}) exited with 1; its output above says why"]


@needs_venv
def test_pretrain_cont_sh_runs_outside_the_venv(tmp_path, tokenizer_dir):
    # A dir with a tokenizer but no model: the launch gets as far as train.py's checks of the flags.
    result = run([REPO / "pretrain_cont.sh", tokenizer_dir, "--dataset", tmp_path / "data.jsonl", "--max_steps", "-3"],
                 env=outside_any_venv(OUTPUT_DIR=tmp_path / "cont"), cwd=tmp_path, check=False)
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.startswith("error: invalid arguments:"), result.stderr
    assert "No module named" not in result.stderr and "Traceback" not in result.stderr


def test_a_run_that_fails_before_writing_leaves_no_output_dir(tmp_path, tokenizer_dir):
    output_dir = tmp_path / "runs" / "new"
    result = run([sys.executable, REPO / "train.py", "--dataset", tmp_path / "missing.jsonl", "--tokenizer_path",
                  tokenizer_dir, "--model_config", TINY, "--output_dir", output_dir], check=False)
    assert result.returncode == 1 and "missing.jsonl: no such file" in result.stderr
    assert not (tmp_path / "runs").exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    run([sys.executable, REPO / "train.py", "--dataset", tmp_path / "missing.jsonl", "--tokenizer_path",
         tokenizer_dir, "--model_config", TINY, "--output_dir", kept], check=False)
    assert kept.is_dir() and not any(kept.iterdir())  # a dir the user made stays


def test_training_without_an_output_dir_is_an_argument_error(tmp_path, tokenizer_dir):
    result = run([sys.executable, REPO / "train.py", "--dataset", tmp_path / "missing.jsonl", "--tokenizer_path",
                  tokenizer_dir, "--model_config", TINY], cwd=tmp_path, check=False)
    assert result.returncode == 2
    assert "  - --output_dir DIR: give the directory this run writes" in result.stderr
    assert list(tmp_path.iterdir()) == []  # no ./trainer_output
