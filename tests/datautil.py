"""Helpers for the data tests: write small corpora, build DataArguments, run the prepare command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def data_args(tokenizer_dir, cache_dir, datasets: list, **overrides):
    from rankzero.args import DataArguments

    args = DataArguments(dataset=[str(d) for d in datasets], tokenizer_path=str(tokenizer_dir), cache_dir=str(cache_dir),
                         max_seq_length=overrides.pop("max_seq_length", 32), **overrides)
    args.resolve_env()
    return args


def prepare_cli(*args, env: dict | None = None, timeout: float = 300, check: bool = True, runner=None):
    """Run `train.py --tokenize_only ARGS` in a subprocess; return the CompletedProcess."""
    command = (runner or [sys.executable]) + [str(REPO / "train.py"), "--tokenize_only", *map(str, args)]
    merged = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=merged, cwd=REPO)
    if check and result.returncode != 0:
        raise AssertionError(f"prepare failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def prepare_then(args: list, epilogue: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `train.py --tokenize_only ARGS` in a fresh interpreter, then the Python `epilogue` in the same
    process (to look at what the prepare left behind in it: imported modules, peak memory)."""
    argv = ["train.py", "--tokenize_only", *map(str, args)]
    code = (f"import runpy, sys\nsys.argv = {argv!r}\n"
            "try:\n    runpy.run_path('train.py', run_name='__main__')\n"
            "except SystemExit as exit:\n    assert not exit.code\n" + epilogue)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=timeout)
    assert result.returncode == 0, result.stderr
    return result


def prepared_dir(stdout: str) -> Path:
    last = stdout.strip().splitlines()[-1]
    assert last.startswith("prepared: "), last
    return Path(last[len("prepared: "):])


def korean_documents(count: int, seed: int = 0) -> list[str]:
    """Deterministic Korean-ish documents of varied length, all distinct."""
    import random

    from conftest import KOREAN_PARAGRAPHS

    rng = random.Random(seed)
    return [" ".join(rng.choice(KOREAN_PARAGRAPHS) for _ in range(rng.randint(1, 4))) + f" (문서 {i})"
            for i in range(count)]
