"""The launchers as a newcomer meets them: outside any virtualenv, and with a mistake in the flags."""

from __future__ import annotations

import socket

import pytest

from helpers import REPO, quiet_env, run

pytestmark = pytest.mark.skipif(not (REPO / ".venv" / "bin" / "python").exists(),
                                reason="needs the .venv beside the launchers (./venv.sh sets it up)")


def outside_any_venv(**extra) -> dict:
    """A shell where `python3` has no torch: no virtualenv active, no PYTHON, only the system's PATH."""
    env = quiet_env(PATH="/usr/bin:/bin", **extra)
    for name in ("VIRTUAL_ENV", "PYTHON", "CONDA_PREFIX"):
        env.pop(name, None)
    return env


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


def test_another_user_error_names_the_rank_in_one_line_and_keeps_its_code(tmp_path, tokenizer_dir):
    result = run([REPO / "pretrain.sh", "--dataset", tmp_path / "missing.jsonl", "--tokenizer_path", tokenizer_dir,
                  "--model_config", REPO / "configs/model_config_tiny.json", "--output_dir", tmp_path / "run"],
                 env=outside_any_venv(NGPU=1), cwd=tmp_path, check=False)
    assert result.returncode == 1, result.stderr[-3000:]
    assert result.stderr.splitlines() == [
        f"error: --dataset {tmp_path / 'missing.jsonl'}: no such file or directory: {tmp_path / 'missing.jsonl'}",
        f"torchrun: rank 0 (local rank 0 on {socket.gethostname()}) exited with 1; its output above says why"]


def test_pretrain_cont_sh_runs_outside_the_venv(tmp_path, tokenizer_dir):
    # A dir with a tokenizer but no model: the launch gets as far as train.py's checks of the flags.
    result = run([REPO / "pretrain_cont.sh", tokenizer_dir, "--dataset", tmp_path / "data.jsonl", "--max_steps", "-3"],
                 env=outside_any_venv(OUTPUT_DIR=tmp_path / "cont"), cwd=tmp_path, check=False)
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.startswith("error: invalid arguments:"), result.stderr
    assert "No module named" not in result.stderr and "Traceback" not in result.stderr
