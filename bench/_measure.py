"""Run a command and measure it the way the benchmarks report it: whole-process wall time and the
peak PSS of the whole process tree.

    from bench._measure import run_measured
    result = run_measured([sys.executable, "bench/baselines/tokenizer_only.py", "corpus.jsonl", "tok"])
    result["wall_s"], result["peak_pss_mb"], result["returncode"], result["stdout"], result["stderr"]

TreeCPU reads the CPU time of a process tree that getrusage cannot see (a Ray cluster's workers) over a window.

What a training process holds (bench/train_bench.py --accumulation_memory, --activation_memory): each rank's peak
RSS over training with and without gradient accumulation under FSDP2, and the bytes a forward keeps for the backward
per layer, token and hidden unit by activation checkpointing mode, and per token and vocabulary entry for the loss.

PSS (proportional set size) charges each shared page to the processes sharing it in equal parts, so
summing it over a forked tree counts copy-on-write memory once instead of once per worker (RSS would
count a 500 MB model shared by 8 workers as 4 GB). A sampler thread reads /proc/<pid>/smaps_rollup of
the child and every descendant every ~50 ms, sums the tree, and keeps the largest sum.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]

SAMPLE_INTERVAL_S = 0.05


def tool_env() -> dict:
    """The environment the measured tools run in: offline (nothing comes from a hub). `run_measured` also runs them
    from cached bytecode, whatever the environment given."""
    return dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1")


def compile_bytecode(*checkouts: Path) -> None:
    """Write the bytecode of each checkout's `rankzero` package before the first round, so that round is like the
    others (an installed package has its bytecode from pip)."""
    import compileall

    for checkout in checkouts:
        compileall.compile_dir(str(Path(checkout) / "rankzero"), quiet=1)


def _pss_kb(pid: int) -> int:
    """PSS of one process in kB; 0 when it is gone or unreadable (it may exit between listing and reading)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
            for line in handle:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return 0
    except OSError:
        pass
    try:  # kernels without smaps_rollup (< 4.14): psutil walks smaps, slower but the same figure
        return psutil.Process(pid).memory_full_info().pss // 1024
    except (psutil.Error, AttributeError):
        return 0


def tree_pss_mb(root_pid: int) -> float:
    """Sum of PSS over a process and all its descendants, in MiB."""
    try:
        root = psutil.Process(root_pid)
        pids = [root_pid] + [child.pid for child in root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    return sum(_pss_kb(pid) for pid in pids) / 1024


def run_measured(cmd: list[str], env: dict | None = None, cwd: str | None = None,
                 timeout_s: float | None = None) -> dict:
    """Run `cmd` to completion; return wall_s, cpu_s, peak_pss_mb, returncode, stdout, stderr (text).

    cpu_s is the user + system time of the child and every descendant reaped under it (getrusage of this
    process's children, before and after: run one command at a time), the figure a loaded machine distorts less.
    Processes nobody waits for escape it: a multiprocessing fork server's workers (datatrove's default pool).

    Output goes to temporary files rather than pipes: a chatty child cannot block on a full pipe
    while we are busy sampling, and the sampler never waits on the child's output.
    """
    # From cached bytecode, as an installed package runs (pip compiles it at install): a shell's
    # PYTHONDONTWRITEBYTECODE (this VM's exports it) made an editable rankzero compile ~44 modules in every run.
    env = dict(os.environ if env is None else env)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryFile() as out_file, tempfile.TemporaryFile() as err_file:
        start = time.perf_counter()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        process = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out_file, stderr=err_file)
        peak_mb = 0.0
        stop = threading.Event()

        def sample() -> None:
            nonlocal peak_mb
            while not stop.is_set():
                peak_mb = max(peak_mb, tree_pss_mb(process.pid))
                stop.wait(SAMPLE_INTERVAL_S)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            returncode = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_tree(process.pid)
            returncode = process.wait()
        except BaseException:  # Ctrl-C in the harness: leave no orphaned workers behind
            _kill_tree(process.pid)
            process.wait()
            stop.set()
            raise
        wall_s = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu_s = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        stop.set()
        sampler.join()
        out_file.seek(0)
        err_file.seek(0)
        stdout = out_file.read().decode("utf-8", errors="replace")
        stderr = err_file.read().decode("utf-8", errors="replace")
    return {"wall_s": wall_s, "cpu_s": cpu_s, "peak_pss_mb": peak_mb, "returncode": returncode,
            "stdout": stdout, "stderr": stderr}


class TreeCPU:
    """User + system CPU seconds of a process and every descendant over a window, read from outside the tree.

        cpu = TreeCPU(child.pid)
        cpu.start(); ...; seconds = cpu.stop()

    getrusage sees only this process and the children it has waited for; a Ray cluster's gcs_server, raylet and
    workers are the driver's grandchildren, reaped (if ever) by the raylet after the window. So a thread here polls
    /proc/<pid>/stat of every process of the tree (psutil) every `interval_s`: a process's share is its last
    reading minus its reading at start(), or all of it when it was born inside the window (keyed by pid and
    start time, so a reused pid is a new process). Polling from the measuring process keeps the poller's own
    CPU out of the figure. What a process spends after its last reading before it exits is lost (at most one
    interval each); `exited` counts those processes, so a report can bound it.
    """

    def __init__(self, root_pid: int, interval_s: float = 0.025):
        self.root_pid = root_pid
        self.interval_s = interval_s
        self._base: dict[tuple[int, float], float] = {}
        self._last: dict[tuple[int, float], float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.exited = 0
        self.processes = 0
        self.names: dict[tuple[int, float], str] = {}

    def _read(self) -> dict[tuple[int, float], float]:
        try:
            root = psutil.Process(self.root_pid)
            processes = [root] + root.children(recursive=True)
        except psutil.Error:
            return {}
        readings = {}
        for process in processes:
            try:
                times = process.cpu_times()
                key = (process.pid, process.create_time())
                readings[key] = times.user + times.system
                self.names[key] = process.name()  # a Ray worker renames itself (ray::IDLE, then its actor)
            except psutil.Error:  # it exited between the listing and the reading
                pass
        return readings

    def _poll(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._last.update(self._read())

    def start(self) -> None:
        self._base = self._read()
        self._last = dict(self._base)
        self._stop.clear()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        final = self._read()
        self._last.update(final)
        self.exited = len(self._last.keys() - final.keys())
        self.processes = len(self._last)
        return sum(self.by_process().values())

    def by_process(self) -> dict[str, float]:
        """The window's CPU seconds per process, named `pid name`: where a tree's time went."""
        return {f"{key[0]} {self.names.get(key, '?')}": seconds - self._base.get(key, 0.0)
                for key, seconds in self._last.items()}


def _kill_tree(pid: int) -> None:
    """Kill a timed-out child and the workers it started (only this tree, by pid)."""
    try:
        root = psutil.Process(pid)
        processes = root.children(recursive=True) + [root]
    except psutil.Error:
        return
    for process in processes:
        try:
            process.kill()
        except psutil.Error:
            pass


def machine_info() -> dict:
    """CPU model, usable cores and RAM, for the header of a results table."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        usable_cores = len(os.sched_getaffinity(0))
    except AttributeError:
        usable_cores = os.cpu_count() or 1
    return {
        "cpu": model,
        "cores": usable_cores,
        "logical_cpus": psutil.cpu_count(logical=True),
        "ram_gb": round(psutil.virtual_memory().total / 2**30, 1),
    }


# ---------------------------------------------------------------------------------------------
# What a training process holds (bench/train_bench.py --accumulation_memory, --activation_memory)

# glibc with a fixed mmap threshold hands every freed tensor back to the kernel at once, so RSS is what a process
# holds. tcmalloc (rankzero's default) and glibc's sliding threshold keep freed blocks: their peaks follow the order
# of frees, not what is live.
LIVE_RSS_ENV = {"RANKZERO_MALLOC": "system", "MALLOC_MMAP_THRESHOLD_": "65536", "OMP_NUM_THREADS": "1"}


def _status_bytes(key: str) -> int:
    with open("/proc/self/status", encoding="ascii") as handle:
        return int(next(line for line in handle if line.startswith(key)).split()[1]) * 1024


def rss() -> int:
    return _status_bytes("VmRSS:")


def peak_rss() -> int:
    """This process's peak RSS since it started or since reset_peak_rss (the kernel's high-water mark)."""
    return _status_bytes("VmHWM:")


def reset_peak_rss() -> None:
    with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
        handle.write("5")


# A rank of train.py that writes its peak RSS over training: the high-water mark is reset as the first step begins
# (the weights loaded and sharded) and read when training ends (before the final model is gathered onto rank 0).
PEAK_RSS_RANK = """
import json, os, sys
sys.path[:0] = [{repo!r}, {bench!r}]
import train
from _measure import peak_rss, reset_peak_rss
from transformers import TrainerCallback
from rankzero.train.trainer import RankzeroTrainer

class PeakRSS(TrainerCallback):
    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == 0:
            reset_peak_rss()

    def on_train_end(self, args, state, control, **kwargs):
        with open(os.path.join(args.output_dir, f"peak-rss-{{os.environ['RANK']}}.json"), "w") as handle:
            json.dump(peak_rss(), handle)

def init(self, *args, init_=RankzeroTrainer.__init__, **kwargs):
    init_(self, *args, **kwargs)
    self.add_callback(PeakRSS())

RankzeroTrainer.__init__ = init
sys.exit(train.main(sys.argv[1:]))
"""


def accumulation_memory(args, work: Path, gradient_bytes: int) -> dict:
    """Each rank's peak RSS over training with 4 micro-batches a step over its peak with 1, as a share of the model's
    fp32 `gradient_bytes`: rankzero's default against the Trainer's no_sync (2 gloo ranks; `args` as train_bench's)."""
    script = work / "peak_rss_rank.py"
    script.write_text(PEAK_RSS_RANK.format(repo=str(REPO), bench=str(REPO / "bench")))
    runs = {"1": (1, "{}"), "4": (4, "{}"), "4 no_sync": (4, '{"gradient_accumulation_kwargs": {"sync_each_batch": false}}')}
    peaks, losses = {}, {}
    for name, (accumulation, accelerator_config) in runs.items():
        out = work / f"accumulate-{name.replace(' ', '-')}"
        shutil.rmtree(out, ignore_errors=True)
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", str(script), "--dataset",
                   *args.dataset, "--tokenizer_path", args.tokenizer_path, "--max_seq_length", str(args.seq),
                   "--cache_dir", str(work / "cache"), "--model_config", args.model_config, "--output_dir", str(out),
                   "--per_device_train_batch_size", str(args.batch), "--gradient_accumulation_steps", str(accumulation),
                   "--max_steps", str(args.steps), "--logging_steps", "1", "--save_strategy", "no", "--report_to", "none",
                   "--disable_tqdm", "true", "--fsdp", "full_shard", "--seed", "3", "--accelerator_config", accelerator_config]
        subprocess.run(command, check=True, capture_output=True, text=True, env={**os.environ, **LIVE_RSS_ENV})
        peaks[name] = [json.loads((out / f"peak-rss-{rank}.json").read_text()) for rank in (0, 1)]
        losses[name] = [h["loss"] for h in json.loads((out / "trainer_state.json").read_text())["log_history"] if "loss" in h]
    growth = {name: max((peaks[name][rank] - peaks["1"][rank]) / gradient_bytes for rank in (0, 1))
              for name in ("4", "4 no_sync")}
    return {"model_config": Path(args.model_config).name, "gradient_mib": round(gradient_bytes / 2**20),
            "peak_rss_mib": {name: [round(b / 2**20) for b in ranks] for name, ranks in peaks.items()},
            "growth_over_gradients": {"rankzero (reduce-scatter every micro-batch)": round(growth["4"], 3),
                                      "no_sync (the Trainer's own)": round(growth["4 no_sync"], 3)},
            "max_loss_difference": max(abs(a - b) for a, b in zip(losses["4"], losses["4 no_sync"])),
            "losses": losses["4"]}


# Llama-3.1-8B's shape at a small width: head_dim 128, 4 query heads per K/V head, intermediate 3.5 x hidden.
SLICE = {"model_type": "llama", "hidden_size": 512, "intermediate_size": 1792, "num_attention_heads": 4,
         "num_key_value_heads": 1, "max_position_embeddings": 8192, "tie_word_embeddings": False}


def activation_child(mode: str, layers: int, vocab: int, seq: int) -> None:
    """In a fresh process (glibc, fixed mmap threshold: RSS is what is live): the bytes a forward of one row leaves
    for the backward and the peak above them during the backward. The weights are bf16, as FSDP2's param_dtype
    computes under --bf16 (autocast over fp32 weights would also keep a bf16 copy of each weight)."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    from rankzero.train.recompute import use_checkpointing

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(LlamaConfig(**SLICE, num_hidden_layers=layers, vocab_size=vocab),
                                             attn_implementation="sdpa").to(torch.bfloat16).train()
    if mode == "full":  # what the Trainer does for --gradient_checkpointing
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        use_checkpointing(mode, None, model)
    ids = torch.randint(0, vocab, (1, seq))
    for _ in range(2):  # the second pass is measured: the first one's one-time allocations are made
        model.zero_grad(set_to_none=False)
        before = rss()
        reset_peak_rss()
        loss = model(input_ids=ids, labels=ids).loss
        kept = rss() - before
        loss.backward()
    print(json.dumps({"kept": kept, "peak": peak_rss() - before}))


def activation_memory(seq: int) -> dict:
    """Bytes a row keeps per layer per token per hidden unit, by mode (from 2 and 6 layers), and the loss's bytes per
    token per vocabulary entry (from two vocabularies): the terms docs/training.md scales to 8B."""
    def child(mode, layers, vocab):
        code = (f"import sys; sys.path[:0] = [{str(REPO)!r}, {str(REPO / 'bench')!r}]; import _measure; "
                f"_measure.activation_child({mode!r}, {layers}, {vocab}, {seq})")
        result = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                                env={**os.environ, **LIVE_RSS_ENV})
        return json.loads(result.stdout.strip().splitlines()[-1])

    per_layer = {}
    for mode in ("none", "full", "selective"):
        small, large = child(mode, 2, 512), child(mode, 6, 512)
        per_layer[mode] = round((large["kept"] - small["kept"]) / (4 * seq * SLICE["hidden_size"]), 2)
    small, large = child("none", 2, 512), child("none", 2, 16384)
    return {"seq": seq, "bytes_per_layer_token_hidden": per_layer,
            "loss_bytes_per_token_vocab": round((large["kept"] - small["kept"]) / (seq * (16384 - 512)), 2),
            "loss_peak_bytes_per_token_vocab": round((large["peak"] - small["peak"]) / (seq * (16384 - 512)), 2)}
