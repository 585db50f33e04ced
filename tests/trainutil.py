"""Helpers for the training tests: a small corpus, train.py under python or torchrun, log_history."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "configs" / "model_config_tiny.json"


def write_corpus(path: Path, copies: int = 6) -> Path:
    from conftest import SAMPLE_TEXTS

    path.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in SAMPLE_TEXTS * copies),
                    encoding="utf-8")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def quiet_env(**extra) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": str(REPO)}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run(command: list, timeout: float = 240, env: dict | None = None, cwd=REPO) -> subprocess.CompletedProcess:
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=timeout,
                            env=env or quiet_env(), cwd=cwd)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    return result


def train_flags(corpus: Path, tokenizer_dir, cache_dir, output_dir, **flags) -> list[str]:
    base = {
        "dataset": corpus, "tokenizer_path": tokenizer_dir, "cache_dir": cache_dir, "output_dir": output_dir,
        "model_config": TINY, "max_seq_length": 64, "per_device_train_batch_size": 4, "learning_rate": 3e-3,
        "logging_steps": 5, "save_strategy": "no", "disable_tqdm": "true", "report_to": "none",
        "dataloader_num_workers": 0,
    }
    base.update(flags)
    argv = []
    for key, value in base.items():
        argv += [f"--{key}", str(value)]
    return argv


def losses(output_dir) -> dict[int, float]:
    state = json.loads((Path(output_dir) / "trainer_state.json").read_text())
    return {entry["step"]: entry["loss"] for entry in state["log_history"] if "loss" in entry}


def log_history(output_dir) -> list[dict]:
    return json.loads((Path(output_dir) / "trainer_state.json").read_text())["log_history"]
