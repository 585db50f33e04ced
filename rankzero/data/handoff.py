"""Prepare once, share with every rank: fingerprint, builder election, atomic publish, waiting.

    path = prepare_or_wait(data_args, runtime, seed)     # every rank calls it; all get the same path

Files in the cache dir, for fingerprint FP (a hash of every input that changes the output):

    FP/                       the published dataset; complete by construction (manifest written
                              last, then one atomic rename of the whole directory)
    FP.tmp-HOST-PID/          a build in progress; only the holder of FP.lock writes it
    FP.lock                   flock'ed by the builder for the whole build
    FP.heartbeat.JOB          the builder's pulse (a counter and its progress), ~1 s
    FP.failed                 written by a builder that raised: rank, host, error, traceback

No collective is used while waiting (a process group does not exist yet): waiters poll the
directory about once a second, print the builder's progress every ~30 s, and fail within seconds
when the builder wrote FP.failed or its heartbeat stopped (killed). The next run removes dead tmp
dirs under the lock and builds again.

Builder election: global rank 0 when the cache dir is shared by all nodes, local rank 0 of each
node when it is not. Rank 0 drops a probe file for its job; a process on another node that sees it
within RANKZERO_PROBE_S seconds (default 10) shares rank 0's filesystem. `--prep_scope` overrides.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
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

from rankzero.data.pipeline import FORMAT_VERSION, build_dataset, quality_config
from rankzero.data.sources import resolve_source
from rankzero.data.tokenize import load_tokenizer
from rankzero.errors import BuilderFailed, RankzeroError
from rankzero.runtime import Runtime

logger = logging.getLogger(__name__)

POLL_S = 1.0
REPORT_EVERY_S = 30.0
HEARTBEAT_EVERY_S = 1.0
HEARTBEAT_STALE_S = 5.0
STARTUP_GRACE_S = 60.0
CLOCK_SLACK_S = 5.0


# ---------------------------------------------------------------------------------------------
# Fingerprint


def fingerprint_inputs(data_args, seed: int, sources, tokenizer) -> dict:
    """Everything that changes the prepared output — and nothing that doesn't (workers, batch sizes)."""
    quality = quality_config(data_args)
    return {
        "format_version": FORMAT_VERSION,
        "sources": [{"identity": s.identity(), "weight": s.weight} for s in sources],
        "tokenizer_sha256": tokenizer.content_hash,
        "max_seq_length": data_args.max_seq_length,
        "packing": data_args.packing,
        "mode": data_args.mode,
        "text_column": data_args.text_column,
        "txt_sample_by": data_args.txt_sample_by,
        "quality_filter": data_args.quality_filter,
        "quality_settings": quality.to_dict() if quality else None,
        "skip_bad_records": data_args.skip_bad_records,
        "on_decode_error": data_args.on_decode_error,
        "seed": seed,
    }


def compute_fingerprint(inputs: dict) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:20]


# ---------------------------------------------------------------------------------------------
# Small file helpers


def _write_json_atomic(path: Path, payload: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=str), encoding="utf-8")
    os.replace(tmp, path)


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError, OSError):
        return None


def _is_published(final: Path) -> bool:
    return (final / "manifest.json").is_file()


def _check_writable(cache_dir: Path) -> None:
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=cache_dir, prefix=".write-test-"):
            pass
    except OSError as error:
        raise RankzeroError(f"--cache_dir {cache_dir}: not writable ({error.strerror}); choose another with --cache_dir "
                            "or RANKZERO_CACHE") from None


def job_key(runtime: Runtime, scope: str) -> str:
    """Names this job (and node, for node-scoped builds) without any communication between ranks."""
    parts = [os.environ.get(name, "") for name in ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "SLURM_STEP_ID",
                                                    "MASTER_ADDR", "MASTER_PORT")]
    parts += [str(runtime.world_size), scope, str(runtime.node_rank) if scope == "node" else "*"]
    if not runtime.is_distributed:
        parts.append(f"{runtime.hostname}:{os.getpid()}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:12]


# ---------------------------------------------------------------------------------------------
# Builder election


def elect_scope(data_args, runtime: Runtime, cache_dir: Path) -> str:
    """'global' (one builder for the job) or 'node' (one per node)."""
    if data_args.prep_scope != "auto":
        return data_args.prep_scope
    if runtime.local_world_size >= runtime.world_size:
        return "global"
    if runtime.node_rank == 0:  # rank 0's own node
        return "global"
    probe = cache_dir / f".probe-{job_key(runtime, 'global')}"
    if runtime.rank == 0:
        cache_dir.mkdir(parents=True, exist_ok=True)
        _write_json_atomic(probe, {"host": runtime.hostname, "time": time.time()})
        return "global"
    deadline = time.monotonic() + float(os.environ.get("RANKZERO_PROBE_S", "10"))
    started = time.time()
    while time.monotonic() < deadline:
        seen = _read_json(probe)
        if seen and seen.get("time", 0) >= started - 600:  # a probe from an earlier job is no evidence
            return "global"
        time.sleep(0.2)
    logger.warning("cache dir %s is not shared with rank 0's node: this node prepares its own copy", cache_dir)
    return "node"


def is_builder(runtime: Runtime, scope: str) -> bool:
    return runtime.rank == 0 if scope == "global" else runtime.local_rank == 0


# ---------------------------------------------------------------------------------------------
# The builder side


class Heartbeat:
    """A thread that rewrites FP.heartbeat.JOB every second with a counter and the latest progress."""

    def __init__(self, path: Path, runtime: Runtime):
        self.path = path
        self.state = {"run_id": uuid.uuid4().hex, "rank": runtime.rank, "host": runtime.hostname, "pid": os.getpid(),
                      "started_at": time.time(), "beat": 0, "progress": {"stage": "starting"}}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rankzero-heartbeat", daemon=True)

    def __enter__(self) -> "Heartbeat":
        self._beat()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.path.unlink(missing_ok=True)

    def progress(self, snapshot: dict) -> None:
        self.state["progress"] = snapshot

    def _beat(self) -> None:
        self.state["beat"] += 1
        self.state["time"] = time.time()
        try:
            _write_json_atomic(self.path, self.state)
        except OSError:  # a full or flaky disk must not kill the build; waiters will time out instead
            pass

    def _run(self) -> None:
        while not self._stop.wait(HEARTBEAT_EVERY_S):
            self._beat()


@contextmanager
def _exclusive_lock(path: Path, blocking: bool):
    handle = open(path, "a+")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except OSError as error:
            if error.errno in (errno.EAGAIN, errno.EACCES):
                yield False
                return
            raise
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        handle.close()


class _Terminated(BaseException):
    pass


def _raise_on_sigterm(signum, frame):
    raise _Terminated(f"terminated by signal {signum}")


def build(data_args, runtime: Runtime, seed: int, cache_dir: Path, fingerprint: str, inputs: dict, sources, tokenizer,
          job: str) -> Path:
    """Build and publish FP (or reuse what another job publishes first). Writes FP.failed on any error."""
    final = cache_dir / fingerprint
    failed_marker = cache_dir / f"{fingerprint}.failed"
    heartbeat_path = cache_dir / f"{fingerprint}.heartbeat.{job}"
    previous = signal.signal(signal.SIGTERM, _raise_on_sigterm) if threading.current_thread() is threading.main_thread() else None
    try:
        with Heartbeat(heartbeat_path, runtime) as heartbeat:
            stale = _read_json(failed_marker)
            if stale and stale.get("job") == job:
                failed_marker.unlink(missing_ok=True)
            while True:
                if _is_published(final):
                    return final
                with _exclusive_lock(cache_dir / f"{fingerprint}.lock", blocking=False) as locked:
                    if locked:
                        if _is_published(final):
                            return final
                        _remove_dead_builds(cache_dir, fingerprint)
                        tmp = cache_dir / f"{fingerprint}.tmp-{runtime.hostname}-{os.getpid()}"
                        try:
                            return _build_and_publish(data_args, runtime, seed, tmp, final, fingerprint, inputs, sources,
                                                      tokenizer, heartbeat)
                        except BaseException:
                            shutil.rmtree(tmp, ignore_errors=True)
                            raise
                heartbeat.progress({"stage": "waiting for another job building the same dataset"})
                time.sleep(POLL_S)
    except BaseException as error:
        _write_json_atomic(failed_marker, {
            "job": job, "rank": runtime.rank, "host": runtime.hostname, "pid": os.getpid(),
            "error": f"{error}" if isinstance(error, RankzeroError) else f"{type(error).__name__}: {error}",
            "traceback": traceback.format_exc(), "failed_at": time.time()})
        if isinstance(error, _Terminated):
            raise SystemExit(143) from None
        raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _remove_dead_builds(cache_dir: Path, fingerprint: str) -> None:
    """Called with the lock held: any tmp dir of this fingerprint belongs to a builder that died."""
    for dead in cache_dir.glob(f"{fingerprint}.tmp-*"):
        logger.warning("removing %s left by a builder that died", dead)
        shutil.rmtree(dead, ignore_errors=True)
    for beat in cache_dir.glob(f"{fingerprint}.heartbeat.*"):
        try:
            if time.time() - beat.stat().st_mtime > 60:
                beat.unlink()
        except FileNotFoundError:
            pass


def _build_and_publish(data_args, runtime, seed, tmp: Path, final: Path, fingerprint, inputs, sources, tokenizer,
                       heartbeat: Heartbeat) -> Path:
    tmp.mkdir(parents=True)
    started = time.time()
    manifest = build_dataset(data_args, seed, tmp, fingerprint, sources=sources, tokenizer=tokenizer,
                             on_progress=heartbeat.progress)
    manifest.update({"built_by_rank": runtime.rank, "built_by_host": runtime.hostname, "built_at": started,
                     "fingerprint_inputs": inputs})
    _write_json_atomic(tmp / "manifest.json", manifest)  # last: a dir with a manifest is complete
    os.replace(tmp, final)
    try:
        _print_summary(manifest, final)
    except Exception:  # the dataset is published; a report problem must not mark it failed
        logger.exception("could not print the preparation summary")
    return final


def _print_summary(manifest: dict, final: Path) -> None:
    timings = manifest["timings"]
    lines = [f"[prepare] published {final}",
             f"  documents  in {manifest['docs_in']:>12,}   kept {manifest['docs_kept']:>12,}",
             f"  tokens        {manifest['tokens']:>12,}   sequences {manifest['sequences']:>9,} x {manifest['max_seq_length']}"
             f"   (final partial block left out: {manifest['tail_tokens_dropped']:,} tokens)"]
    for reason, count in manifest["dropped"].items():
        lines.append(f"  dropped {reason:<28} {count:>10,}")
    lines.append("  seconds    " + "  ".join(f"{k[:-2]} {v:.2f}" for k, v in timings.items() if k.endswith("_s")))
    lines.append(f"  throughput {manifest['throughput']['mb_per_s']} MB/s, {manifest['throughput']['tokens_per_s']:,} tokens/s")
    print("\n".join(lines), file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# The waiting side


def wait_for_builder(data_args, runtime: Runtime, cache_dir: Path, fingerprint: str, job: str, builder: str) -> Path:
    final = cache_dir / fingerprint
    failed_marker = cache_dir / f"{fingerprint}.failed"
    heartbeat_path = cache_dir / f"{fingerprint}.heartbeat.{job}"
    started_wall, started = time.time(), time.monotonic()
    last_beat, last_change, last_report = None, None, started
    while True:
        if _is_published(final):
            return final
        now = time.monotonic()
        failure = _read_json(failed_marker)
        if failure and failure.get("job") == job and failure.get("failed_at", 0) >= started_wall - CLOCK_SLACK_S:
            raise BuilderFailed(f"rank {failure.get('rank')} failed (host {failure.get('host')}, pid {failure.get('pid')}) "
                                f"while preparing the data: {failure.get('error')}")
        beat = _read_json(heartbeat_path)
        if beat and beat.get("started_at", 0) >= started_wall - STARTUP_GRACE_S:
            pulse = (beat.get("run_id"), beat.get("beat"))
            if pulse != last_beat:
                last_beat, last_change = pulse, now
            elif now - last_change > HEARTBEAT_STALE_S:
                if _is_published(final):
                    return final
                raise BuilderFailed(f"{builder} died while preparing the data (no heartbeat for "
                                    f"{now - last_change:.0f} s, nothing published, no failure marker — killed?); "
                                    "the next run cleans up and builds again")
        elif now - started > STARTUP_GRACE_S:
            raise BuilderFailed(f"{builder} never started preparing the data ({STARTUP_GRACE_S:.0f} s without a heartbeat "
                                f"in {cache_dir}); is the cache dir the same path on every rank?")
        if now - started > data_args.prep_timeout_s:
            raise BuilderFailed(f"gave up waiting for {builder} after --prep_timeout_s {data_args.prep_timeout_s:.0f}")
        if now - last_report >= REPORT_EVERY_S:
            last_report = now
            progress = (beat or {}).get("progress", {})
            logger.warning("waiting for %s to prepare %s: %s", builder, fingerprint, _describe(progress))
        time.sleep(POLL_S)


def _describe(progress: dict) -> str:
    if not progress or "docs" not in progress:
        return progress.get("stage", "starting") if progress else "starting"
    eta = f", ETA {progress['eta_s']:.0f} s" if progress.get("eta_s") is not None else ""
    percent = f" ({progress['percent']}%)" if progress.get("percent") is not None else ""
    return (f"{progress['stage']}: {progress['docs']:,} docs, {progress['bytes'] / 1e6:,.1f} MB{percent}, "
            f"{progress['mb_per_s']} MB/s{eta}")


# ---------------------------------------------------------------------------------------------
# Entry


def prepare_or_wait(data_args, runtime: Runtime, seed: int) -> Path:
    """Return the published dataset dir for these arguments, building it on exactly one rank per scope."""
    cache_dir = Path(data_args.cache_dir).expanduser().resolve()
    sources = [resolve_source(spec) for spec in data_args.dataset]
    tokenizer = load_tokenizer(data_args.tokenizer_path)
    inputs = fingerprint_inputs(data_args, seed, sources, tokenizer)
    fingerprint = compute_fingerprint(inputs)
    final = cache_dir / fingerprint
    if _is_published(final):  # the cached path writes nothing
        return final
    scope = elect_scope(data_args, runtime, cache_dir) if runtime.is_distributed else "global"
    job = job_key(runtime, scope)
    if is_builder(runtime, scope):
        _check_writable(cache_dir)
        return build(data_args, runtime, seed, cache_dir, fingerprint, inputs, sources, tokenizer, job)
    builder = "rank 0" if scope == "global" else f"local rank 0 of node {runtime.node_rank}"
    return wait_for_builder(data_args, runtime, cache_dir, fingerprint, job, builder)
