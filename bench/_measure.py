"""Run a command and measure it the way the benchmarks report it: whole-process wall time and the
peak PSS of the whole process tree.

    from bench._measure import run_measured
    result = run_measured([sys.executable, "bench/baselines/tokenizer_only.py", "corpus.jsonl", "tok"])
    result["wall_s"], result["peak_pss_mb"], result["returncode"], result["stdout"], result["stderr"]

TreeCPU reads the CPU time of a process tree that getrusage cannot see (a Ray cluster's workers) over a window.

PSS (proportional set size) charges each shared page to the processes sharing it in equal parts, so
summing it over a forked tree counts copy-on-write memory once instead of once per worker (RSS would
count a 500 MB model shared by 8 workers as 4 GB). A sampler thread reads /proc/<pid>/smaps_rollup of
the child and every descendant every ~50 ms, sums the tree, and keeps the largest sum.
"""

from __future__ import annotations

import os
import resource
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import psutil

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
