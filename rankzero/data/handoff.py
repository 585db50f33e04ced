"""Prepare once, share with every rank: fingerprint, builder election, atomic publish, waiting.

    path = prepare_or_wait(plan, args.cache, runtime)    # every rank calls it; all get the same path

Files in the cache dir, for fingerprint FP (a hash of every input that changes the output):

    FP/                       the published dataset; complete by construction (manifest written
                              last, then one atomic rename of the whole directory)
    FP.tmp-HOST-PID-RANDOM/   a build in progress (mode 0700 until published); only the holder of
                              FP.lock writes it
    FP.lock                   flock'ed by the builder for the whole build
    FP.heartbeat.JOB          the builder's pulse (a counter and its progress), ~1 s, written by a child
                              process of the builder (data/heartbeat.py), so a C call that keeps the GIL
                              cannot stop it
    FP.failed                 written by a builder that raised: rank, host, error, traceback

The cache dir may be shared by users who do not trust each other's names: every file is written
under an unguessable temporary name (O_CREAT|O_EXCL|O_NOFOLLOW) and renamed into place, and nothing
is opened or removed through a symlink (the lock, markers, heartbeats, tmp and published dirs).

Before a published FP/ is used its manifest is checked against it (`verify_published`): the
fingerprint and inputs it was built from, and every data file's presence and size (cheap, always;
`--verify_data` adds an xxh3 checksum of every byte). A damaged dir (no manifest, a file missing,
cut or changed) is moved aside and rebuilt with a warning: the inputs are at hand and the fingerprint
says how to rebuild it exactly. A dir whose manifest was built from other inputs, or a symlink, is
not rankzero's to use or remove: an error names it.

No collective is used while waiting (a process group does not exist yet): waiters poll the
directory about once a second, and one waiting rank a node (local rank 0; on the builder's node the
builder prints its own progress) prints the builder's progress every ~30 s. A waiter fails within
seconds when the builder wrote FP.failed or died. Whether it died is the kernel's word where it can be
asked: the heartbeat names the builder's process (boot id, pid namespace, pid, start time), and a waiter
on the same machine in the same pid namespace checks that process itself, at every poll. Anywhere else
(another node, another container) the heartbeat's changes tell: the builder is alive once the waiter has
seen its heartbeat change, dead when it has not changed for HEARTBEAT_STALE_S since, judged by the
waiter's own monotonic clock only; no timestamp written by another process (another machine, another
clock) is compared with this one's, so a rank that starts late or a node whose clock is skewed waits like
any other. The next run removes dead tmp dirs under the lock and builds again.

SIGTERM and SIGUSR1 (Slurm's early warning, `--signal=USR1@90`) stop a prepare cleanly: the builder
removes its build dir, writes FP.failed naming the signal and exits with 128 + the signal's number; any
other rank, or the builder before it builds, says what it was doing and exits the same way.

Builder election: global rank 0 when the cache dir is shared by all nodes, local rank 0 of each
node when it is not. Rank 0 drops a probe file for its job; a process on another node that sees it
within --prep_probe_s seconds (default 10; env RANKZERO_PROBE_S) shares rank 0's filesystem. `--prep_scope` overrides.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
import uuid
from contextlib import contextmanager
from pathlib import Path

from rankzero.config import CacheConfig
from rankzero.data.heartbeat import Heartbeat, running_here
from rankzero.data.pipeline import build_dataset
from rankzero.data.plan import Plan
from rankzero.data.published import (MISSING, build_id, check_writable, file_table, move_aside, remove_dead_builds,
                                     set_publish_modes, usable, verify_published)
from rankzero.data.report import print_summary
from rankzero.data.screen.pii import masked_paths
from rankzero.data.space import check_free_space
from rankzero.errors import BuilderFailed, RankzeroError
from rankzero.files import exclusive_lock, out_of_space, read_json, size_text, write_json_atomic
from rankzero.runtime import Runtime, job_key

logger = logging.getLogger(__name__)

POLL_S = 1.0
REPORT_EVERY_S = 30.0
HEARTBEAT_STALE_S = 10.0  # only where the kernel cannot be asked: another node, another pid namespace
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


# ---------------------------------------------------------------------------------------------
# Builder election


def elect_scope(prep_scope: str, runtime: Runtime, cache_dir: Path, probe_s: float = 10.0) -> str:
    """'global' (one builder for the job) or 'node' (one per node), for --prep_scope. A rank on another node
    looks for rank 0's probe file for `probe_s` seconds (--prep_probe_s)."""
    if prep_scope != "auto":
        return prep_scope
    if runtime.local_world_size >= runtime.world_size:
        return "global"
    probe = cache_dir / f".probe-{job_key(runtime, 'global')}"
    if runtime.rank == 0:
        cache_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(probe, {"host": runtime.hostname, "time": time.time()})
        return "global"
    if runtime.node_rank == 0:  # rank 0's own node
        return "global"
    deadline = time.monotonic() + probe_s
    started = time.time()
    while time.monotonic() < deadline:
        seen = read_json(probe)
        if seen and seen.get("time", 0) >= started - 600:  # a probe from an earlier job is no evidence
            return "global"
        time.sleep(0.2)
    logger.warning("cache dir %s is not shared with rank 0's node: this node prepares its own copy", cache_dir)
    return "node"


def is_builder(runtime: Runtime, scope: str) -> bool:
    return runtime.rank == 0 if scope == "global" else runtime.local_rank == 0


# ---------------------------------------------------------------------------------------------
# The builder side


class _Terminated(BaseException):
    def __init__(self, signum: int):
        self.signum = signum
        self.signal_name = signal.Signals(signum).name
        super().__init__(f"terminated by {self.signal_name}")


def _raise_terminated(signum, frame):
    for other in STOP_SIGNALS:  # one is enough: the clean-up it starts must not be cut short by the next
        signal.signal(other, signal.SIG_IGN)
    raise _Terminated(signum)


@contextmanager
def _stopping_on_signals():
    """SIGTERM and SIGUSR1 raise _Terminated in the main thread while preparing or waiting (a signal handler
    can only be set there; elsewhere, e.g. a test's thread, the defaults stay)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, _raise_terminated) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def build(plan: Plan, runtime: Runtime, cache_dir: Path, job: str, rejected: tuple[str | None, str] = (None, ""),
          verify_data: bool = False) -> Path:
    """Build and publish FP (or reuse what another job publishes first). Writes FP.failed on any error.

    `rejected`: the build id and problem of the FP/ this rank found unusable (None: there was none)."""
    fingerprint, inputs = plan.fingerprint, plan.inputs
    final = cache_dir / fingerprint
    failed_marker = cache_dir / f"{fingerprint}.failed"
    heartbeat_path = cache_dir / f"{fingerprint}.heartbeat.{job}"
    space = tmp = None
    run_id = uuid.uuid4().hex
    try:
        with Heartbeat(heartbeat_path, runtime, run_id) as heartbeat:
            stale = read_json(failed_marker)
            if stale and stale.get("job") == job:
                failed_marker.unlink(missing_ok=True)
            while True:
                if usable(final, inputs, rejected[0]):
                    return final
                with exclusive_lock(cache_dir / f"{fingerprint}.lock", blocking=False) as locked:
                    if locked:
                        same = rejected[0] is not None and build_id(final) == rejected[0]
                        problem = rejected[1] if same else verify_published(final, inputs, verify_data)
                        if problem is None:
                            return final
                        remove_dead_builds(cache_dir, fingerprint)
                        if problem != MISSING:
                            move_aside(final, problem)
                        # Estimated here, where this rank builds: with --dedup near it reads each source's start.
                        space = check_free_space(cache_dir, plan.sources, plan.with_labels, plan.near_threshold,
                                                 plan.dedup_memory_bytes)
                        prefix = f"{fingerprint}.tmp-{runtime.hostname}-{os.getpid()}-"
                        tmp = Path(tempfile.mkdtemp(dir=cache_dir, prefix=prefix))
                        return _build_and_publish(plan, runtime, tmp, final, heartbeat)
                heartbeat.progress({"phase": "waiting for another job building the same dataset"})
                time.sleep(POLL_S)
    except BaseException as error:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)  # first: it frees the space a full disk needs for the marker
        report = error
        if out_of_space(error):
            checked = (f" ({size_text(space.free)} were free when the build started; {space.needed_text()})"
                       if space is not None else "")
            removed = "the partial build was removed" if tmp is not None else "nothing had been written"
            report = RankzeroError(f"--cache_dir {cache_dir}: no space left on the device while preparing{checked}; "
                                   f"{removed}: free space there, or pass another --cache_dir")
        elif tmp is not None and not cache_dir.is_dir():  # a file the build opens next names only itself
            report = RankzeroError(f"--cache_dir {cache_dir} was removed while preparing the data ({type(error).__name__}: "
                                   f"{error}); nothing was published: run again, and keep the cache dir while a job uses it")
        try:
            write_json_atomic(failed_marker, {
                "job": job, "run_id": run_id, "rank": runtime.rank, "host": runtime.hostname, "pid": os.getpid(),
                "error": f"{report}" if isinstance(report, RankzeroError) else f"{type(report).__name__}: {report}",
                "traceback": traceback.format_exc(), "failed_at": time.time()})
            told = f"wrote {failed_marker} so that waiting ranks stop too"
        except OSError as marker_error:
            told = f"could not write {failed_marker} ({marker_error.strerror}): waiting ranks notice the missing heartbeat"
        if isinstance(error, (_Terminated, KeyboardInterrupt)):
            name = error.signal_name if isinstance(error, _Terminated) else "SIGINT"
            removed = f"removed the build dir {tmp}" if tmp is not None else "no build dir had been made"
            print(f"[prepare] {name} received: stopped preparing, {removed}, {told}", file=sys.stderr, flush=True)
        if isinstance(error, _Terminated):
            raise SystemExit(128 + error.signum) from None
        if report is not error:
            raise report from None
        raise


def _build_and_publish(plan: Plan, runtime, tmp: Path, final: Path, heartbeat: Heartbeat) -> Path:
    started = time.time()
    manifest = build_dataset(plan, tmp, on_progress=heartbeat.progress)
    checksum_started = time.perf_counter()
    files = file_table(tmp)
    manifest.setdefault("timings", {})["checksum_s"] = round(time.perf_counter() - checksum_started, 3)
    manifest.update({"built_by_rank": runtime.rank, "built_by_host": runtime.hostname, "built_at": started,
                     "build_id": heartbeat.run_id, "fingerprint_inputs": masked_paths(plan.inputs),
                     "files": files})
    # The build dir is 0700 while it is written (nobody can plant a link inside); published, it gets the
    # umask's modes, with group read/write in a team's cache dir whatever the umask (docs/design.md).
    file_mode = set_publish_modes(tmp, final.parent)
    write_json_atomic(tmp / "manifest.json", manifest, mode=file_mode)  # last: a dir with a manifest is complete
    os.replace(tmp, final)
    try:
        print_summary(manifest, final)
    except Exception:  # the dataset is published; a report problem must not mark it failed
        logger.exception("could not print the preparation summary")
    return final


# ---------------------------------------------------------------------------------------------
# The waiting side


def wait_for_builder(timeout_s: float, runtime: Runtime, cache_dir: Path, fingerprint: str, job: str, builder: str,
                     inputs: dict | None = None, rejected: str | None = None, cache_seen: bool = False,
                     grace_s: float = 60.0) -> Path:
    """Poll until the builder publishes FP/ (not the one this rank rejected, see `build`), fails or dies.

    Everything is judged by what this rank saw change, on its own monotonic clock: a heartbeat or failure
    marker already there when it started may be an earlier run's, and is evidence only once it changes.
    `cache_seen`: this rank already saw the cache dir (its disappearing later is then a removal). `grace_s`
    (--prep_startup_grace_s): how long the builder may take to show its first sign of life — it imports,
    elects itself and checks the cache before it beats; a slow shared filesystem may want more."""
    final = cache_dir / fingerprint
    failed_marker = cache_dir / f"{fingerprint}.failed"
    heartbeat_path = cache_dir / f"{fingerprint}.heartbeat.{job}"
    started = last_report = time.monotonic()
    earlier_failure = read_json(failed_marker)
    pulse = _pulse(read_json(heartbeat_path))
    changed_at, alive_runs, alive_beat, gone_at, told_running = started, set(), None, None, False

    def check_failed() -> dict | None:
        failure = read_json(failed_marker)
        if failure and failure.get("job") == job and (failure != earlier_failure or failure.get("run_id") in alive_runs):
            raise BuilderFailed(f"rank {failure.get('rank')} failed (host {failure.get('host')}, pid {failure.get('pid')}) "
                                f"while preparing the data: {failure.get('error')}")
        return failure

    while True:
        if usable(final, inputs, rejected):
            return final
        now = time.monotonic()
        if cache_dir.is_dir():
            cache_seen = True
        elif cache_seen:  # nothing rankzero does removes it: whatever the builder was doing is lost
            during = f"while {builder} was preparing the data" if alive_runs else f"while this rank waited for {builder}"
            raise BuilderFailed(f"the cache dir {cache_dir} was removed {during}; nothing was published: run again "
                                "(and keep the cache dir while a job uses it)")
        failure = check_failed()
        beat = read_json(heartbeat_path)
        if _pulse(beat) != pulse:
            pulse, changed_at = _pulse(beat), now
            if pulse is not None:
                alive_runs.add(pulse[0])
                alive_beat = beat
        gone_at = (gone_at or now) if alive_runs and pulse is None else None
        running = running_here(alive_beat)  # the kernel's word where it can be asked; then the beats are progress only
        if running is False:
            if usable(final, inputs, rejected):  # it published, or failed, and exited since the checks above
                return final
            check_failed()
            raise BuilderFailed(f"{builder} died while preparing the data: its process (pid {alive_beat['pid']} on this "
                                "machine) has ended without publishing it or writing a failure marker (a signal it cannot "
                                "catch, e.g. SIGKILL or the out-of-memory killer, or a crash): look at its log; the next "
                                "run cleans up and builds again")
        if running and now - changed_at > HEARTBEAT_STALE_S and not told_running:
            told_running = True
            logger.warning("%s's heartbeat has not changed for %.0f s, but its process (pid %s) is running: still "
                           "waiting", builder, now - changed_at, alive_beat["pid"])
        elif running is None and gone_at is not None:  # the builder removed its heartbeat: it has just published or failed
            if now - gone_at > HEARTBEAT_STALE_S:
                raise BuilderFailed(f"{builder} stopped preparing the data without publishing it or writing "
                                    f"{failed_marker.name} (its heartbeat file was removed); look at its log")
        elif running is None and alive_runs and now - changed_at > HEARTBEAT_STALE_S:
            raise BuilderFailed(
                f"{builder} shows no sign of life: its heartbeat (host {alive_beat.get('host')}, pid "
                f"{alive_beat.get('pid')}, rewritten every second by a process of its own) has not changed for "
                f"{now - changed_at:.0f} s, nothing was published and no failure marker written. From this rank that "
                f"means its process or its node is gone, or it can no longer write to {cache_dir}: look at its log; "
                "the next run cleans up and builds again")
        elif not alive_runs and now - started > grace_s:
            raise BuilderFailed(_never_started(builder, grace_s, cache_dir, beat, failure if failure and failure.get("job") == job else None))
        if now - started > timeout_s:
            raise BuilderFailed(f"gave up waiting for {builder} after --prep_timeout_s {timeout_s:.0f}")
        # One rank a node tells how the build goes: local rank 0 (on the builder's node that is the builder, which
        # prints its own progress), not every waiting rank every 30 s.
        if runtime.local_rank == 0 and now - last_report >= REPORT_EVERY_S:
            last_report = now
            print(f"[prepare] waiting for {builder} to prepare {fingerprint}: "
                  f"{_describe((beat or {}).get('progress', {}))}", file=sys.stderr, flush=True)
        time.sleep(POLL_S)


def _pulse(beat: dict | None) -> tuple | None:
    return (beat.get("run_id"), beat.get("beat")) if beat else None


def _never_started(builder: str, grace_s: float, cache_dir: Path, beat: dict | None, failure: dict | None) -> str:
    if not cache_dir.is_dir():
        return (f"{builder} never started preparing the data: the cache dir {cache_dir} does not exist on this rank "
                f"after {grace_s:.0f} s; is it the same path on every rank, and not removed?")
    seen = [f"{cache_dir} has no heartbeat of this job"] if beat is None else [
        f"the heartbeat in {cache_dir} (run {beat.get('run_id')}, host {beat.get('host')}, pid {beat.get('pid')}) did "
        "not change: an earlier run's"]
    if failure:
        seen.append(f"a failure marker says rank {failure.get('rank')} failed: {failure.get('error')} (this run's, "
                    "if this rank started late)")
    return (f"{builder} never started preparing the data ({grace_s:.0f} s without a sign of life; "
            f"{'; '.join(seen)}); is the cache dir the same path on every rank? (--prep_startup_grace_s sets the wait)")


def _describe(progress: dict) -> str:
    if not progress or "docs" not in progress:
        return progress.get("phase", "starting") if progress else "starting"
    eta = f", ETA {progress['eta_s']:.0f} s" if progress.get("eta_s") is not None else ""
    percent = f" ({progress['percent']}%)" if progress.get("percent") is not None else ""
    return (f"{progress['phase']}: {progress['docs']:,} docs, {progress['bytes'] / 1e6:,.1f} MB{percent}, "
            f"{progress['mb_per_s']} MB/s{eta}")


# ---------------------------------------------------------------------------------------------
# Entry


def prepare_or_wait(plan: Plan, cache: CacheConfig, runtime: Runtime) -> Path:
    """Return the published dataset dir of this plan, building it on exactly one rank per scope.

    SIGTERM and SIGUSR1 stop it at any point (a build cleans up first, see `build`); the rank exits with
    128 + the signal's number, as it would have died of it, saying so."""
    cache_dir = Path(cache.cache_dir).expanduser().resolve()
    cache_seen = cache_dir.is_dir()  # before anything else: a waiter names a cache dir removed after this
    doing = ["looking for the prepared data"]
    with _stopping_on_signals():
        try:
            return _prepare_or_wait(plan, cache, runtime, cache_dir, cache_seen, doing)
        except _Terminated as stopped:  # a builder handles its own; this is any other moment
            print(f"[prepare] {stopped.signal_name} received while {doing[-1]}: stopped", file=sys.stderr, flush=True)
            raise SystemExit(128 + stopped.signum) from None


def _prepare_or_wait(plan: Plan, cache: CacheConfig, runtime: Runtime, cache_dir: Path, cache_seen: bool,
                     doing: list[str]) -> Path:
    fingerprint, inputs = plan.fingerprint, plan.inputs
    final = cache_dir / fingerprint
    problem = verify_published(final, inputs, deep=cache.verify_data)
    if problem is None:  # the cached path writes nothing
        return final
    rejected = build_id(final)
    scope = elect_scope(cache.prep_scope, runtime, cache_dir, cache.prep_probe_s) if runtime.is_distributed else "global"
    job = job_key(runtime, scope)
    if is_builder(runtime, scope):
        check_writable(cache_dir)
        return build(plan, runtime, cache_dir, job, (rejected, problem), cache.verify_data)
    builder = "rank 0" if scope == "global" else f"local rank 0 of node {runtime.node_rank}"
    doing.append(f"waiting for {builder}")
    return wait_for_builder(cache.prep_timeout_s, runtime, cache_dir, fingerprint, job, builder, inputs, rejected,
                            cache_seen, cache.prep_startup_grace_s)
