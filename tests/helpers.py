"""What the tests share: corpora, the arguments of a prepare, and running train.py as a user would.

    args = data_args(tokenizer_dir, cache, [corpus], max_seq_length=32)   # flags as keywords → Args
    out = prepare(args, seed=0)                                            # in this process, one rank
    result = run([sys.executable, REPO / "train.py", ...])                 # a subprocess that must succeed
    process = spawn(argv, rank=1, world=2, port=port)                      # a scheduler-style rank

Fixtures (the tokenizer, the corpora) are in conftest.py.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rankzero.data import native

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "configs" / "model_config_tiny.json"
# Tests of the compiled passes (rankzero/data/native/) need the extension `pip install` builds (in a checkout:
# `python setup.py build_ext --inplace`). Where no C compiler is on PATH it was not built: they skip, visibly. Where
# one is, a missing build makes them fail (native.passes() says why), not skip.
HAS_COMPILER = shutil.which(shlex.split(os.environ.get("CC") or "cc")[0]) is not None
NO_EXTENSION = "no C compiler ($CC or cc): the compiled passes are not built here"
needs_extension = pytest.mark.skipif(not HAS_COMPILER and native.missing() is not None, reason=NO_EXTENSION)
# torch.compile on CPU (and flex attention's kernel): inductor builds C++ with the compiler torch's own search finds.
# Asked once, when a test so marked runs (conftest.py): the search imports inductor, seconds no other test pays.
needs_cxx = pytest.mark.needs_cxx
NO_CXX = "no C++ compiler ($CXX, else g++): inductor cannot build torch.compile's CPU kernels here"
# The prepare's one line where the install built no extension (no C compiler): the numpy passes ran. A machine's
# fact, said once per run; tests of a quiet run look for every other warning.
NATIVE_NOTICE = "the extension rankzero.data.native._passes is not built"


def warning_lines(output: str) -> list[str]:
    """The lines of `output` that warn, less the extension's notice (NATIVE_NOTICE)."""
    return [line for line in output.splitlines() if "warn" in line.lower() and NATIVE_NOTICE not in line]


# ---------------------------------------------------------------------------------------------
# Corpora


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def write_corpus(path: Path, copies: int = 6) -> Path:
    """The conftest sample texts, `copies` times over: a small training corpus."""
    from conftest import SAMPLE_TEXTS

    return write_jsonl(path, [{"text": t} for t in SAMPLE_TEXTS * copies])


_SUBJECTS = ["학생", "선생님", "할머니", "기자", "의사", "친구", "동생", "사장님", "손님", "이웃", "연구원", "작가", "가수",
             "농부", "경찰", "요리사", "아이들", "시민", "회사원", "감독"]
_PLACES = ["시장", "학교", "공원", "도서관", "병원", "역", "바닷가", "산", "회사", "식당", "극장", "마을", "강가", "카페",
           "운동장", "박물관", "공항", "호텔", "교회", "서점"]
_OBJECTS = ["책", "사과", "편지", "사진", "노래", "지도", "신문", "우산", "과자", "꽃", "그림", "모자", "가방", "음식",
            "선물", "기록", "계획", "소식", "약", "표"]
_VERBS = ["샀다", "읽었다", "보냈다", "찾았다", "만들었다", "기다렸다", "골랐다", "들었다", "받았다", "나눴다", "정리했다",
          "준비했다", "확인했다", "설명했다", "기억했다"]


def _particle(noun: str, after_vowel: str, after_consonant: str) -> str:
    final = (ord(noun[-1]) - 0xAC00) % 28 if "가" <= noun[-1] <= "힣" else 0
    return noun + (after_consonant if final else after_vowel)


def korean_documents(count: int, seed: int = 0, sentences: int = 20) -> list[str]:
    """Deterministic Korean-ish documents of varied length, all distinct and none a near-copy of another (for
    --dedup near, the default): a few of the conftest paragraphs, then twenty sentences drawn for the document
    (with five, two documents sharing a paragraph were near-copies at the default threshold of 0.55)."""
    import random

    from conftest import KOREAN_PARAGRAPHS

    rng = random.Random(seed)

    def sentence() -> str:
        return (f"{_particle(rng.choice(_SUBJECTS), '는', '은')} {rng.choice(_PLACES)}에서 "
                f"{_particle(rng.choice(_OBJECTS), '를', '을')} {rng.choice(_VERBS)}.")

    return [" ".join(rng.choice(KOREAN_PARAGRAPHS) for _ in range(rng.randint(1, 4)))
            + " " + " ".join(sentence() for _ in range(sentences)) + f" (문서 {i})" for i in range(count)]


# ---------------------------------------------------------------------------------------------
# A prepare in this process


def flag_argv(flags: dict) -> list[str]:
    argv = []
    for key, value in flags.items():
        argv += [f"--{key}", *map(str, value)] if isinstance(value, (list, tuple)) else [f"--{key}", str(value)]
    return argv


def data_args(tokenizer_dir, cache_dir, datasets: list, **flags):
    """The Args of `train.py --tokenize_only` with these flags (max_seq_length 32 unless given)."""
    from rankzero.args import parse_args

    flags = {"dataset": [str(d) for d in datasets], "tokenizer_path": tokenizer_dir, "cache_dir": cache_dir,
             "max_seq_length": 32, **flags}
    return parse_args(["--tokenize_only", *flag_argv(flags)])


def plan_of(args, seed: int | None = None):
    from rankzero.data.plan import make_plan

    return make_plan(args.sources, args.stage, args.packing, args.dedup, args.workers,
                     args.seed if seed is None else seed)


def single_rank():
    from rankzero.runtime import Runtime

    return Runtime(0, 1, 0, 1, 0, "test-host")


def prepare(args, seed: int | None = None, runtime=None) -> Path:
    """Prepare (or reuse) the dataset of `args` as one rank; its published dir."""
    from rankzero.data.handoff import prepare_or_wait

    return prepare_or_wait(plan_of(args, seed), args.cache, runtime or single_rank())


# ---------------------------------------------------------------------------------------------
# Processes


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def quiet_env(**extra) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": str(REPO),
           "PYTHONUNBUFFERED": "1"}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run(command: list, timeout: float = 240, env: dict | None = None, cwd=REPO,
        check: bool = True) -> subprocess.CompletedProcess:
    """Run a command to its end; with `check`, fail the test (with its output) unless it exits 0."""
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=timeout,
                            env=env or quiet_env(), cwd=cwd)
    if check:
        assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    return result


def prepare_cli(*args, env: dict | None = None, timeout: float = 300, check: bool = True, runner=None):
    """`train.py --tokenize_only ARGS` in a subprocess (`runner`: e.g. torchrun's command before the script)."""
    command = [*(runner or [sys.executable]), REPO / "train.py", "--tokenize_only", *args]
    return run(command, timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}, check=check)


def prepare_then(args: list, epilogue: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`train.py --tokenize_only ARGS` in a fresh interpreter, then the Python `epilogue` in the same
    process (to look at what the prepare left behind in it: imported modules, peak memory)."""
    argv = ["train.py", "--tokenize_only", *map(str, args)]
    code = (f"import runpy, sys\nsys.argv = {argv!r}\n"
            "try:\n    runpy.run_path('train.py', run_name='__main__')\n"
            "except SystemExit as exit:\n    assert not exit.code\n" + epilogue)
    return run([sys.executable, "-c", code], timeout=timeout)


def prepared_dir(stdout: str) -> Path:
    last = stdout.strip().splitlines()[-1]
    assert last.startswith("prepared: "), last
    return Path(last[len("prepared: "):])


def default_sigint():
    # As under a terminal. A test run started in the background (`cmd &` in a script, some CI runners)
    # inherits SIGINT ignored, an ignored signal stays ignored across exec, and Python then never raises
    # KeyboardInterrupt: a SIGINT test would send a signal that nothing receives.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def spawn(argv: list, rank: int = 0, world: int = 1, local_rank: int | None = None, local_world: int | None = None,
          node: int = 0, port: int | None = None, env: dict | None = None, stderr=subprocess.PIPE) -> subprocess.Popen:
    """`train.py ARGV` as a scheduler starts a rank (RANK/WORLD_SIZE/LOCAL_RANK/... in its environment)."""
    local_rank = rank if local_rank is None else local_rank
    local_world = world if local_world is None else local_world
    ranks = {"RANK": rank, "WORLD_SIZE": world, "LOCAL_RANK": local_rank, "LOCAL_WORLD_SIZE": local_world,
             "GROUP_RANK": node, "NODE_RANK": node, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port or free_port()}
    environ = {**os.environ, "PYTHONUNBUFFERED": "1", **{k: str(v) for k, v in {**ranks, **(env or {})}.items()}}
    return subprocess.Popen([sys.executable, str(REPO / "train.py"), *map(str, argv)], env=environ, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=stderr, text=True, preexec_fn=default_sigint)


def wait_all(processes, timeout=240):
    """Wait for every process; return [(returncode, stdout, stderr, exit time)]."""
    deadline, ended = time.monotonic() + timeout, {}
    while len(ended) < len(processes):
        for index, process in enumerate(processes):
            if index not in ended and process.poll() is not None:
                ended[index] = time.monotonic()
        if time.monotonic() > deadline:
            for process in processes:
                process.kill()
            raise AssertionError("processes did not finish in time")
        time.sleep(0.05)
    return [(p.returncode, *p.communicate(), ended[i]) for i, p in enumerate(processes)]


# ---------------------------------------------------------------------------------------------
# Training runs


def train_flags(corpus: Path, tokenizer_dir, cache_dir, output_dir, **flags) -> list[str]:
    base = {
        "dataset": corpus, "tokenizer_path": tokenizer_dir, "cache_dir": cache_dir, "output_dir": output_dir,
        "model_config": TINY, "max_seq_length": 64, "per_device_train_batch_size": 4, "learning_rate": 3e-3,
        "logging_steps": 5, "save_strategy": "no", "disable_tqdm": "true", "report_to": "none",
        "dataloader_num_workers": 0,
    }
    return flag_argv({**base, **flags})


def log_history(output_dir) -> list[dict]:
    return json.loads((Path(output_dir) / "trainer_state.json").read_text())["log_history"]


def losses(output_dir) -> dict[int, float]:
    return {entry["step"]: entry["loss"] for entry in log_history(output_dir) if "loss" in entry}
