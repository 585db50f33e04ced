"""Prepare once, share with every rank: fingerprint, builder election, atomic publish, waiting.

    path = prepare_or_wait(data_args, runtime, seed)     # every rank calls it; all get the same path

Files in the cache dir, for fingerprint FP (a hash of every input that changes the output):

    FP/                       the published dataset; complete by construction (manifest written
                              last, then one atomic rename of the whole directory)
    FP.tmp-HOST-PID-RANDOM/   a build in progress (mode 0700 until published); only the holder of
                              FP.lock writes it
    FP.lock                   flock'ed by the builder for the whole build
    FP.heartbeat.JOB          the builder's pulse (a counter and its progress), ~1 s
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
import stat
import sys
import tempfile
import threading
import time
import traceback
import uuid
from contextlib import contextmanager
from pathlib import Path

from rankzero.data.pipeline import build_dataset
from rankzero.data.plan import Plan, make_plan
from rankzero.data.sources import content_hash
from rankzero.errors import BuilderFailed, RankzeroError
from rankzero.runtime import Runtime

logger = logging.getLogger(__name__)

POLL_S = 1.0
REPORT_EVERY_S = 30.0
HEARTBEAT_EVERY_S = 1.0
HEARTBEAT_STALE_S = 5.0
STARTUP_GRACE_S = 60.0
CLOCK_SLACK_S = 5.0
ALWAYS_HASHED_BYTES = 1 << 20  # files this small (state.json, dataset_info.json) are checksummed on every use
# Free space a build needs, from its input size: a prepared token takes 4 bytes (int32 id; 4.05 with the
# document boundaries, measured) and Korean JSONL gives a token per 2.7-3.4 bytes with 1k-16k vocabularies
# (bench/handoff_bench.py --space; larger vocabularies make fewer tokens).
BYTES_PER_TOKEN = 3
OUTPUT_BYTES_PER_TOKEN = 4


class ForeignDataset(RankzeroError):
    """The cache holds something at FP that rankzero did not build for these inputs: never used, never removed."""


# ---------------------------------------------------------------------------------------------
# Fingerprint


# ---------------------------------------------------------------------------------------------
# Small file helpers


def _write_json_atomic(path: Path, payload: dict, mode: int | None = None) -> None:
    """Write beside `path` under an unguessable name (mkstemp: O_CREAT|O_EXCL|O_NOFOLLOW) and rename it into
    place: a symlink someone planted at `path`, or at any name we could guess, is replaced, never followed."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            json.dump(payload, handle, indent=2, default=str)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _open_no_follow(path: Path, flags: int = os.O_RDONLY) -> int:
    """An fd for the regular file at `path`, never through a symlink (ELOOP) and never blocking on a FIFO."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return fd


def _read_json(path: Path) -> dict | None:
    try:
        with os.fdopen(_open_no_follow(path), encoding="utf-8") as handle:
            value = json.load(handle)
        return value if isinstance(value, dict) else None
    except (json.JSONDecodeError, UnicodeDecodeError, OSError):
        return None


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _umask() -> int:
    # The only way to read the umask sets it; no other thread creates a file in this instant that matters
    # (the heartbeat's temp files are created 0600 whatever the umask).
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


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
# Published datasets: what the manifest promises, and checking it before use

MISSING = "not built yet"


def file_table(directory: Path) -> dict[str, dict]:
    """Every file of a finished build with its size and xxh3-128 checksum: the manifest's "files"."""
    table = {}
    for entry in sorted(os.scandir(directory), key=lambda entry: entry.name):
        info = entry.stat(follow_symlinks=False)
        assert stat.S_ISREG(info.st_mode), f"a build dir holds only files: {entry.path}"
        if entry.name != "manifest.json":
            with os.fdopen(_open_no_follow(Path(entry.path)), "rb") as handle:
                table[entry.name] = {"size": info.st_size, "xxh3_128": content_hash(handle, info.st_size)}
    return table


def verify_published(final: Path, inputs: dict | None = None, deep: bool = False) -> str | None:
    """None when `final` is a complete dataset built from `inputs`; otherwise what is wrong with it (MISSING
    when there is nothing). Raises ForeignDataset for what rankzero must neither use nor remove.

    Cheap: a stat per file, and a checksum of the small ones; `deep` (--verify_data) checksums every byte."""
    info = _lstat(final)
    if info is None:
        return MISSING
    if not stat.S_ISDIR(info.st_mode):
        kind = "a symlink" if stat.S_ISLNK(info.st_mode) else "not a directory"
        raise ForeignDataset(f"{final} is {kind}: rankzero publishes only directories it built and follows no link in "
                             "the cache dir; remove it, or use another --cache_dir")
    manifest = _read_json(final / "manifest.json")
    if manifest is None:
        return "no readable manifest.json: deleted, or an interrupted copy"
    if manifest.get("fingerprint") != final.name:
        raise ForeignDataset(f"{final}: its manifest.json is for fingerprint {manifest.get('fingerprint')!r}: the dir "
                             "was copied or planted there, and rankzero never trains on it; remove it, or use another "
                             "--cache_dir")
    if inputs is not None:
        differ = _differences(json.loads(json.dumps(inputs, sort_keys=True, default=str)),
                              manifest.get("fingerprint_inputs"))
        if differ:
            raise ForeignDataset(f"{final}: its manifest.json says it was built from other inputs ({', '.join(differ)} "
                                 "differ from this run's): not the data its name promises, and rankzero never trains "
                                 "on it; remove it, or use another --cache_dir")
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        return "its manifest.json lists no files (written by an older rankzero)"
    for name, expected in files.items():
        well_formed = isinstance(expected, dict) and isinstance(expected.get("size"), int)
        if os.sep in name or name in (".", "..") or not well_formed:
            raise ForeignDataset(f"{final}: its manifest.json lists {name!r} in a way rankzero never writes; remove it")
        found = _lstat(final / name)
        if found is None:
            return f"{name} is missing"
        if not stat.S_ISREG(found.st_mode):
            return f"{name} is not a regular file"
        if found.st_size != expected.get("size"):
            return f"{name} is {found.st_size:,} bytes, its manifest says {expected['size']:,} (cut short or rewritten)"
    for name, expected in files.items():
        if deep or expected["size"] <= ALWAYS_HASHED_BYTES:
            try:
                with os.fdopen(_open_no_follow(final / name), "rb") as handle:
                    digest = content_hash(handle, expected["size"])
            except OSError as error:
                return f"{name} cannot be read ({error.strerror})"
            if digest != expected.get("xxh3_128"):
                return f"{name} does not match its checksum in manifest.json (changed on disk)"
    return None


def _differences(expected: dict, found) -> list[str]:
    if not isinstance(found, dict):
        return ["all"]
    return sorted(key for key in expected.keys() | found.keys() if expected.get(key) != found.get(key))


def _build_id(final: Path) -> str | None:
    """Which build FP/ holds: None when there is none, "" when it has no (readable) manifest."""
    if _lstat(final) is None:
        return None
    return str((_read_json(final / "manifest.json") or {}).get("build_id", ""))


def _usable(final: Path, inputs: dict | None, rejected: str | None) -> bool:
    """A published FP/ that is not the one this rank found unusable, and passes the cheap checks."""
    current = _build_id(final)
    return current is not None and current != rejected and verify_published(final, inputs) is None


def check_loaded_rows(prepared_dir: str | os.PathLike, rows: int) -> None:
    """After loading: as many rows as the manifest promises (a shard cut at a record-batch boundary still loads)."""
    manifest = _read_json(Path(prepared_dir) / "manifest.json") or {}
    promised = manifest.get("sequences")
    if promised is not None and promised != rows:
        raise RankzeroError(f"{prepared_dir}: {rows:,} rows loaded, its manifest.json promises {promised:,}: the prepared "
                            "data is damaged; remove the directory and run again to rebuild it")


# ---------------------------------------------------------------------------------------------
# Builder election


def elect_scope(data_args, runtime: Runtime, cache_dir: Path) -> str:
    """'global' (one builder for the job) or 'node' (one per node)."""
    if data_args.prep_scope != "auto":
        return data_args.prep_scope
    if runtime.local_world_size >= runtime.world_size:
        return "global"
    probe = cache_dir / f".probe-{job_key(runtime, 'global')}"
    if runtime.rank == 0:
        cache_dir.mkdir(parents=True, exist_ok=True)
        _write_json_atomic(probe, {"host": runtime.hostname, "time": time.time()})
        return "global"
    if runtime.node_rank == 0:  # rank 0's own node
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


def _open_lock_file(path: Path) -> int:
    """Open FP.lock read-only (flock needs no write access, so another user's lock file works too), creating
    it when absent; refuse a symlink or any other kind of file someone put there."""
    while True:
        try:
            try:
                return _open_no_follow(path)
            except FileNotFoundError:
                # Create it separately: O_CREAT on an existing file of another user in a sticky dir fails
                # where fs.protected_regular is set, plain opening does not.
                return _open_no_follow(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            continue  # another process created it between the two opens
        except OSError as error:
            if error.errno not in (errno.ELOOP, errno.EINVAL):
                raise
            raise RankzeroError(f"{path} is {'a symlink' if error.errno == errno.ELOOP else 'not a regular file'}: "
                                "rankzero never made it and never follows it (someone else can write this cache "
                                "dir?); remove it, or use another --cache_dir") from None


@contextmanager
def _exclusive_lock(path: Path, blocking: bool):
    fd = _open_lock_file(path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except OSError as error:
            if error.errno in (errno.EAGAIN, errno.EACCES):
                yield False
                return
            raise
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


class _Terminated(BaseException):
    def __init__(self, signum: int):
        self.signal_name = signal.Signals(signum).name
        super().__init__(f"terminated by {self.signal_name}")


def _raise_on_sigterm(signum, frame):
    raise _Terminated(signum)


def build(plan: Plan, runtime: Runtime, cache_dir: Path, job: str, rejected: tuple[str | None, str] = (None, "")) -> Path:
    """Build and publish FP (or reuse what another job publishes first). Writes FP.failed on any error.

    `rejected`: the build id and problem of the FP/ this rank found unusable (None: there was none)."""
    data_args, fingerprint, inputs = plan.data_args, plan.fingerprint, plan.inputs
    final = cache_dir / fingerprint
    failed_marker = cache_dir / f"{fingerprint}.failed"
    heartbeat_path = cache_dir / f"{fingerprint}.heartbeat.{job}"
    previous = signal.signal(signal.SIGTERM, _raise_on_sigterm) if threading.current_thread() is threading.main_thread() else None
    needed, free, tmp = _space_needed(data_args, plan.sources), None, None
    try:
        with Heartbeat(heartbeat_path, runtime) as heartbeat:
            stale = _read_json(failed_marker)
            if stale and stale.get("job") == job:
                failed_marker.unlink(missing_ok=True)
            while True:
                if _usable(final, inputs, rejected[0]):
                    return final
                with _exclusive_lock(cache_dir / f"{fingerprint}.lock", blocking=False) as locked:
                    if locked:
                        same = rejected[0] is not None and _build_id(final) == rejected[0]
                        problem = rejected[1] if same else verify_published(final, inputs, data_args.verify_data)
                        if problem is None:
                            return final
                        _remove_dead_builds(cache_dir, fingerprint)
                        if problem != MISSING:
                            _move_aside(final, problem)
                        free = _check_free_space(cache_dir, needed)
                        prefix = f"{fingerprint}.tmp-{runtime.hostname}-{os.getpid()}-"
                        tmp = Path(tempfile.mkdtemp(dir=cache_dir, prefix=prefix))
                        return _build_and_publish(plan, runtime, tmp, final, heartbeat)
                heartbeat.progress({"stage": "waiting for another job building the same dataset"})
                time.sleep(POLL_S)
    except BaseException as error:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)  # first: it frees the space a full disk needs for the marker
        report = error
        if _out_of_space(error):
            report = RankzeroError(f"--cache_dir {cache_dir}: no space left on the device while preparing "
                                   f"({_size(free)} were free when the build started; {_needed_text(needed)}); the "
                                   "partial build was removed: free space there, or pass another --cache_dir")
        try:
            _write_json_atomic(failed_marker, {
                "job": job, "rank": runtime.rank, "host": runtime.hostname, "pid": os.getpid(),
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
            raise SystemExit(143) from None
        if report is not error:
            raise report from None
        raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _remove_dead_builds(cache_dir: Path, fingerprint: str) -> None:
    """Called with the lock held: any tmp (or damaged) dir of this fingerprint belongs to a builder that died."""
    for dead in [*cache_dir.glob(f"{fingerprint}.tmp-*"), *cache_dir.glob(f"{fingerprint}.damaged-*")]:
        info = _lstat(dead)
        if info is None:
            continue
        if not stat.S_ISDIR(info.st_mode):  # a symlink planted there: rmtree would refuse it anyway; say so
            logger.warning("%s is not a directory rankzero made (a symlink?): left alone", dead)
            continue
        logger.warning("removing %s left by a builder that died", dead)
        shutil.rmtree(dead, ignore_errors=True)
    for beat in cache_dir.glob(f"{fingerprint}.heartbeat.*"):
        info = _lstat(beat)
        if info is not None and time.time() - info.st_mtime > 60:
            beat.unlink(missing_ok=True)  # unlinks a symlink itself, never its target


def _move_aside(final: Path, problem: str) -> None:
    """Take a damaged FP/ out of every rank's sight in one rename (onto an empty dir of an unguessable name),
    then delete it: its fingerprint says exactly how to rebuild it."""
    aside = Path(tempfile.mkdtemp(dir=final.parent, prefix=f"{final.name}.damaged-"))
    try:
        os.rename(final, aside)
    except OSError as error:
        aside.rmdir()
        raise RankzeroError(f"{final} is damaged ({problem}) and could not be moved aside ({error.strerror}): remove it "
                            "by hand, or use another --cache_dir") from None
    logger.warning("%s is damaged (%s): removed, building it again", final, problem)
    shutil.rmtree(aside, ignore_errors=True)


def _space_needed(data_args, sources) -> int | None:
    """Roughly the disk a build takes at its peak, from the input size (None when a hub source hides it)."""
    sizes = [source.total_bytes() for source in sources]
    if any(size is None for size in sizes):
        return None
    per_token = OUTPUT_BYTES_PER_TOKEN * (2 if data_args.mode == "sft" else 1)  # labels double the ids
    staged = 2 if any(source.weight is not None for source in sources) else 1  # mixing stages every token once more
    return int(sum(sizes) / BYTES_PER_TOKEN * per_token * staged)


def _size(value: int | None) -> str:
    return "?" if value is None else f"{value / 1e9:,.1f} GB" if value >= 1e8 else f"{value / 1e6:,.1f} MB"


def _needed_text(needed: int | None) -> str:
    if needed is None:
        return "the input size is not known beforehand (a hub source)"
    return (f"this build needs about {_size(needed)}: a token per ~{BYTES_PER_TOKEN} bytes of input, "
            f"{OUTPUT_BYTES_PER_TOKEN} bytes per prepared token")


def _check_free_space(cache_dir: Path, needed: int | None) -> int:
    """Fail before the build when it cannot fit; warn when it might not. Returns the free bytes."""
    free = shutil.disk_usage(cache_dir).free
    if needed is not None and free < needed:
        # A tokenizer with a large vocabulary (or ASCII-escaped JSON input) makes fewer tokens per byte than
        # the estimate assumes; below a third of it, a build would need 9+ input bytes per token to fit.
        message = f"--cache_dir {cache_dir}: {_size(free)} free, and {_needed_text(needed)}"
        if free < needed / 3:
            raise RankzeroError(f"{message}; free space there, or pass another --cache_dir")
        logger.warning("%s; it may not fit", message)
    return free


def _out_of_space(error: BaseException | None) -> bool:
    """ENOSPC/EDQUOT anywhere in the exception chain (pyarrow raises OSError without an errno, by message)."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and (error.errno in (errno.ENOSPC, errno.EDQUOT) or any(
                text in str(error) for text in ("No space left on device", "Disk quota exceeded"))):
            return True
        error = error.__cause__ or error.__context__
    return False


def _build_and_publish(plan: Plan, runtime, tmp: Path, final: Path, heartbeat: Heartbeat) -> Path:
    started = time.time()
    manifest = build_dataset(plan, tmp, on_progress=heartbeat.progress)
    checksum_started = time.perf_counter()
    files = file_table(tmp)
    manifest.setdefault("timings", {})["checksum_s"] = round(time.perf_counter() - checksum_started, 3)
    manifest.update({"built_by_rank": runtime.rank, "built_by_host": runtime.hostname, "built_at": started,
                     "build_id": heartbeat.state["run_id"], "fingerprint_inputs": plan.inputs, "files": files})
    # The build dir is 0700 while it is written (nobody can plant a link inside); published, it gets the
    # mode the umask gives (a shared cache wants umask 002 and a setgid group dir: docs/design.md).
    umask = _umask()
    os.chmod(tmp, (os.stat(tmp).st_mode & stat.S_ISGID) | (0o777 & ~umask))
    _write_json_atomic(tmp / "manifest.json", manifest, mode=0o666 & ~umask)  # last: a dir with a manifest is complete
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


def wait_for_builder(data_args, runtime: Runtime, cache_dir: Path, fingerprint: str, job: str, builder: str,
                     inputs: dict | None = None, rejected: str | None = None) -> Path:
    """Poll until the builder publishes FP/ (not the one this rank rejected, see `build`), fails or dies."""
    final = cache_dir / fingerprint
    failed_marker = cache_dir / f"{fingerprint}.failed"
    heartbeat_path = cache_dir / f"{fingerprint}.heartbeat.{job}"
    started_wall, started = time.time(), time.monotonic()
    last_beat, last_change, last_report = None, None, started
    while True:
        if _usable(final, inputs, rejected):
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
                if _usable(final, inputs, rejected):
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
    plan = make_plan(data_args, seed)
    fingerprint, inputs = plan.fingerprint, plan.inputs
    final = cache_dir / fingerprint
    problem = verify_published(final, inputs, deep=data_args.verify_data)
    if problem is None:  # the cached path writes nothing
        return final
    rejected = _build_id(final)
    scope = elect_scope(data_args, runtime, cache_dir) if runtime.is_distributed else "global"
    job = job_key(runtime, scope)
    if is_builder(runtime, scope):
        _check_writable(cache_dir)
        return build(plan, runtime, cache_dir, job, (rejected, problem))
    builder = "rank 0" if scope == "global" else f"local rank 0 of node {runtime.node_rank}"
    return wait_for_builder(data_args, runtime, cache_dir, fingerprint, job, builder, inputs, rejected)
