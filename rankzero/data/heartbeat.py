"""The builder's heartbeat, and what a waiting rank may conclude from it.

    with Heartbeat(path, runtime, run_id) as heartbeat:   # the builder, for the whole build
        heartbeat.progress(snapshot)                       # the latest progress, for the waiters to print
    alive = running_here(beat)                             # a waiter: True, False, or None (cannot tell here)

The heartbeat file (FP.heartbeat.JOB) is rewritten about once a second, with a counter and the builder's
latest progress, by a small child process of the builder. Not by a thread: a thread writes only when it
gets the GIL, and a C call that keeps the GIL (Kiwi's first analysis held a Python thread for 4.0 s at load
4.5) stalled it long enough for waiters to declare a live builder dead.
The child has an interpreter of its own. It takes the progress from the builder through a pipe (dropped,
never waited for, when the pipe is full), stops when told to, when the pipe closes, and when its parent is
no longer the builder (a builder killed with SIGKILL: its forked workers may still hold the pipe open).
`python -m rankzero.data.heartbeat PATH BUILDER_PID` is that child; nothing else runs it. Where this user cannot
start the interpreter again (setpriv or su into a Python under a directory only its owner enters), a thread beats.

The file also names the builder's process: machine (boot id), pid namespace, pid and start time. A waiter on
the same machine and in the same pid namespace asks the kernel whether that process still runs
(`running_here`), which needs no heartbeat at all; anywhere else (another node, another container's pid
namespace, no /proc) only the file's changes tell, judged with handoff.HEARTBEAT_STALE_S.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from rankzero.files import write_json_atomic
from rankzero.runtime import Runtime

HEARTBEAT_EVERY_S = 1.0
STOP = {"stop": True}
logger = logging.getLogger(__name__)


def process_identity(pid: int | str = "self") -> dict | None:
    """What names a process on this machine across pid reuse: boot id, pid namespace, start time (clock ticks
    after boot). None without a /proc (not Linux) or when the process has ended."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink("/proc/self/ns/pid")  # the reader's: a pid means something only inside its namespace
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # After the command name (in parentheses; it may hold spaces or ')'): field 3, the state, and 22, the start time.
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] in ("Z", "X"):  # a zombie has ended; only its parent has not reaped it yet
        return None
    return {"boot_id": boot, "pid_namespace": namespace, "started": int(fields[19])}


def running_here(beat: dict | None) -> bool | None:
    """Whether the builder that wrote `beat` still runs: True or False when it runs on this machine, in this pid
    namespace (the kernel's word, no heartbeat needed); None when this process cannot tell."""
    pid, identity = (beat or {}).get("pid"), (beat or {}).get("process")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or not isinstance(identity, dict):
        return None
    here = process_identity()
    if here is None or {key: identity.get(key) for key in ("boot_id", "pid_namespace")} != \
            {key: here[key] for key in ("boot_id", "pid_namespace")}:
        return None
    now = process_identity(pid)
    return now is not None and now["started"] == identity.get("started")


class Heartbeat:
    """The child process that keeps FP.heartbeat.JOB changing while the builder lives (module docstring)."""

    def __init__(self, path: Path, runtime: Runtime, run_id: str):
        self.path = path
        self.run_id = run_id
        # "started_at" is for people reading the file; waiters never compare it with their own clock.
        self.state = {"run_id": run_id, "rank": runtime.rank, "host": runtime.hostname, "pid": os.getpid(),
                      "process": process_identity(), "started_at": time.time(), "beat": 1,
                      "progress": {"phase": "starting"}, "time": time.time()}
        self._child: subprocess.Popen | None = None

    def __enter__(self) -> "Heartbeat":
        _write(self.path, self.state)  # the first beat before this returns: a waiter may look at once
        package_root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
        try:
            self._child = subprocess.Popen([sys.executable, "-m", "rankzero.data.heartbeat", str(self.path),
                                            str(os.getpid())], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        except OSError as error:
            # This user cannot start this interpreter again (one under a directory only its owner may enter, the
            # process itself started by setpriv or su): beat from a thread, which a C call holding the GIL can
            # stall. Waiters on this machine ask the kernel anyway (running_here); only other nodes' judge beats.
            logger.info("heartbeat from a thread: cannot start %s (%s)", sys.executable, error)
            self._stopped = threading.Event()
            self._thread = threading.Thread(target=self._beat_in_thread, daemon=True, name="rankzero-heartbeat")
            self._thread.start()
            return self
        os.set_blocking(self._child.stdin.fileno(), False)
        self._send(self.state)
        return self

    def __exit__(self, *exc) -> None:
        if self._child is None:
            self._stopped.set()
            self._thread.join()
            self.path.unlink(missing_ok=True)
            return
        os.set_blocking(self._child.stdin.fileno(), True)  # the stop is never dropped: the child reads it at once
        self._send(STOP)
        try:
            self._child.stdin.close()
        except OSError:
            pass
        # A child that has said it is beating may be writing the file: wait until it has read the stop (at once).
        # One that has not yet started (a build shorter than its interpreter's start, ~0.05 s; ~1 s at load 16)
        # reads the stop before it ever writes, so the builder does not wait for it to start only to end.
        if select.select([self._child.stdout], [], [], 0)[0]:
            try:
                self._child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._child.kill()
                self._child.wait()
        self._child.stdout.close()
        self.path.unlink(missing_ok=True)

    def _beat_in_thread(self) -> None:
        while not self._stopped.wait(HEARTBEAT_EVERY_S):
            self.state["beat"] += 1
            self.state["time"] = time.time()
            _write(self.path, self.state)

    def progress(self, snapshot: dict) -> None:
        if self._child is None:
            self.state["progress"] = snapshot  # one key's value replaced: the thread's dump sees the old or the new
        else:
            self._send({"progress": snapshot})

    def _send(self, message: dict) -> None:
        line = json.dumps(message, default=str).encode() + b"\n"
        try:
            # Non-blocking: a write of up to PIPE_BUF bytes goes in whole or not at all. A progress snapshot is
            # far smaller; when the child is behind, this one is dropped and the next one brings the news.
            os.write(self._child.stdin.fileno(), line)
        except (BlockingIOError, BrokenPipeError):
            pass


def _write(path: Path, state: dict) -> None:
    try:
        write_json_atomic(path, state)
    except OSError:  # a full or flaky disk must not kill the build; waiters notice the silence instead
        pass


def _beat_while_the_builder_lives(path: Path, builder: int) -> None:
    """The child: beat every HEARTBEAT_EVERY_S with the latest state the builder sent, until it says stop, its
    pipe closes, or this process is re-parented (the builder died, maybe before this process got here)."""
    # A stop signal sent to the whole process group (Ctrl-C, a scheduler) is the builder's to handle: it cleans
    # up and then stops this child, whose beats meanwhile say it is still alive.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):
        signal.signal(signum, signal.SIG_IGN)
    state, pending, next_beat = {}, b"", time.monotonic() + HEARTBEAT_EVERY_S
    try:
        os.write(1, b"beating\n")  # for the builder's exit: from now on this process may be writing the file
    except BrokenPipeError:  # the builder has already ended its build (a fast failure) and stopped listening
        return
    while True:
        readable, _, _ = select.select([0], [], [], max(0.0, min(next_beat - time.monotonic(), HEARTBEAT_EVERY_S)))
        if readable:
            chunk = os.read(0, 1 << 16)
            if not chunk:
                return
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                message = json.loads(line)
                if message == STOP:
                    return
                state.update(message)
        if os.getppid() != builder:
            return
        if state and time.monotonic() >= next_beat:
            state["beat"] += 1
            state["time"] = time.time()
            _write(path, state)
            next_beat = time.monotonic() + HEARTBEAT_EVERY_S


if __name__ == "__main__":
    _beat_while_the_builder_lives(Path(sys.argv[1]), int(sys.argv[2]))
    os._exit(0)  # nothing to flush or finalize: the builder waits for this exit
