"""Published datasets: planted and damaged dirs, rows checked against the manifest, full disks,
content in the fingerprint."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import (REPO, data_args, korean_documents, plan_of, prepare, prepare_cli, prepared_dir, warning_lines,
                     write_jsonl)
from rankzero.data.published import ALWAYS_HASHED_BYTES
from rankzero.errors import RankzeroError


def _rows(directory: Path) -> list:
    """Every row's ids, read without memory-mapping (a test rewrites shards in place: a live map would SIGBUS)."""
    import pyarrow as pa

    rows = []
    for entry in json.loads((directory / "state.json").read_text())["_data_files"]:
        with pa.OSFile(str(directory / entry["filename"])) as handle:
            rows += pa.ipc.open_stream(handle).read_all().column("input_ids").to_pylist()
    return rows


def _fingerprint(args) -> str:
    return plan_of(args, 0).fingerprint


def test_a_dataset_planted_under_the_expected_fingerprint_is_never_used(tmp_path, tokenizer_dir, corpus):
    other = write_jsonl(tmp_path / "other.jsonl", [{"text": t} for t in korean_documents(300, seed=5)])
    cache = tmp_path / "cache"
    foreign = prepare(data_args(tokenizer_dir, cache, [other]), seed=0)
    expected = _fingerprint(data_args(tokenizer_dir, cache, [corpus]))
    planted = cache / expected
    shutil.copytree(foreign, planted)  # a copy of real data, under the name this run looks for
    args = data_args(tokenizer_dir, cache, [corpus])
    with pytest.raises(RankzeroError, match=rf"{planted}: its manifest.json is for fingerprint '{foreign.name}'"):
        prepare(args, seed=0)
    # A forger who also fixes the fingerprint is caught by the inputs the manifest records.
    manifest = json.loads((planted / "manifest.json").read_text())
    manifest["fingerprint"] = expected
    (planted / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RankzeroError, match=r"built from other inputs \(sources differ"):
        prepare(args, seed=0)
    assert json.loads((planted / "manifest.json").read_text()) == manifest, "not rankzero's to remove either"


def _cut_first_shard_at_a_batch_boundary(directory: Path) -> int:
    """Rewrite the first shard as a valid Arrow stream holding its first half of record batches."""
    import pyarrow as pa

    shard = sorted(directory.glob("data-*.arrow"))[0]
    with pa.OSFile(str(shard)) as handle:
        reader = pa.ipc.open_stream(handle)
        schema, batches = reader.schema, list(reader)
    assert len(batches) >= 4, "use a smaller --dataset_writer_batch_size"
    kept = batches[: len(batches) // 2]
    with pa.OSFile(str(shard), "wb") as handle, pa.ipc.new_stream(handle, schema) as writer:
        for batch in kept:
            writer.write_batch(batch)
    return sum(len(b) for b in kept) - sum(len(b) for b in batches)


@pytest.mark.parametrize("damage", ["cut at a batch boundary", "shard deleted", "manifest deleted", "byte flipped"])
def test_a_damaged_dataset_is_rebuilt_never_served(tmp_path, tokenizer_dir, corpus, damage):
    if damage == "byte flipped":  # a shard above ALWAYS_HASHED_BYTES (smaller files are always checksummed)
        corpus = write_jsonl(tmp_path / "big.jsonl", [{"text": t} for t in korean_documents(4000)])
    common = ["--dataset", corpus, "--tokenizer_path", tokenizer_dir, "--max_seq_length", 32, "--cache_dir",
              tmp_path / "cache", "--dataset_writer_batch_size", 10]
    out = prepared_dir(prepare_cli(*common).stdout)
    rows = _rows(out)
    if damage == "cut at a batch boundary":
        assert _cut_first_shard_at_a_batch_boundary(out) < 0
        expected = r"data-00000-of-00001.arrow is [\d,]+ bytes, its manifest says [\d,]+ \(cut short"
    elif damage == "shard deleted":
        next(out.glob("data-*.arrow")).unlink()
        expected = "data-00000-of-00001.arrow is missing"
    elif damage == "manifest deleted":
        (out / "manifest.json").unlink()
        expected = r"no manifest\.json: deleted, or an interrupted copy"
    else:  # same size, same mtime: only --verify_data's checksums see it
        shard = next(out.glob("data-*.arrow"))
        stat = shard.stat()
        with open(shard, "r+b") as handle:
            handle.seek(stat.st_size // 2)
            byte = handle.read(1)
            handle.seek(stat.st_size // 2)
            handle.write(bytes([byte[0] ^ 0xFF]))
        os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        assert stat.st_size > ALWAYS_HASHED_BYTES
        cheap = prepare_cli(*common)  # the cheap checks cannot see it ...
        assert prepared_dir(cheap.stdout) == out and "damaged" not in cheap.stderr
        common.append("--verify_data")  # ... the checksums do
        expected = "data-00000-of-00001.arrow does not match its checksum"
    for attempt in range(2):  # rebuilt once, then served from the cache (not "forever", as before)
        result = prepare_cli(*common)
        assert prepared_dir(result.stdout) == out
        if attempt == 0:
            assert "is damaged (" in result.stderr and "removed, building it again" in result.stderr, result.stderr
            import re

            assert re.search(expected, result.stderr), result.stderr
            assert result.stderr.count("[prepare] published") == 1
        else:
            assert "damaged" not in result.stderr and "[prepare] published" not in result.stderr
    assert _rows(out) == rows
    assert not list((tmp_path / "cache").glob("*.damaged-*")) and not list((tmp_path / "cache").glob("*.tmp-*"))


def test_training_refuses_fewer_rows_than_the_manifest_promises(tmp_path, tokenizer_dir, corpus):
    from rankzero.train.run import load_prepared

    out = prepare(data_args(tokenizer_dir, tmp_path / "cache", [corpus]), seed=0)
    assert len(load_prepared(out, "pretrain")) == json.loads((out / "manifest.json").read_text())["sequences"]
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["sequences"] += 7
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RankzeroError, match=rf"{out}: {manifest['sequences'] - 7:,} rows loaded, its manifest.json "
                                            rf"promises {manifest['sequences']:,}"):
        load_prepared(out, "pretrain")


def _in_small_tmpfs(size: str, mount_point: Path, command: list) -> list:
    """`command` in a private mount namespace with a tmpfs of `size` at mount_point (nothing to clean up)."""
    script = 'mount -t tmpfs -o size="$1" tmpfs "$2" && shift 2 && exec "$@"'
    return ["unshare", "-rm", "sh", "-c", script, "sh", size, str(mount_point), *map(str, command)]


def _can_mount_tmpfs(tmp_path: Path) -> bool:
    target = tmp_path / "probe-mount"
    target.mkdir()
    try:
        return subprocess.run(_in_small_tmpfs("1m", target, ["true"]), capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.parametrize("when", ["before the build", "mid-build"])
def test_a_full_disk_is_one_line_naming_the_cache_free_space_and_need(tmp_path, tokenizer_dir, when):
    if shutil.which("unshare") is None or not _can_mount_tmpfs(tmp_path):
        pytest.skip("needs a private mount namespace (unshare -rm) for a tiny tmpfs")
    # Estimated need: ~4/3 of the input. Below half of it the build is refused; above it may start.
    documents = 6000 if when == "before the build" else 4000
    # Five sentences a document: the tmpfs sizes below are set for documents of that length.
    corpus = write_jsonl(tmp_path / "ko.jsonl", [{"text": t} for t in korean_documents(documents, sentences=5)])
    cache = tmp_path / "cache"
    cache.mkdir()
    size = "1m" if when == "before the build" else "2m"
    command = [sys.executable, REPO / "train.py", "--tokenize_only", "--dataset", corpus, "--tokenizer_path",
               tokenizer_dir, "--max_seq_length", 64, "--cache_dir", cache]
    result = subprocess.run(_in_small_tmpfs(size, cache, command), capture_output=True, text=True, timeout=300,
                            cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 1 and "Traceback" not in result.stderr and len(errors) == 1, result.stderr
    if when == "before the build":
        assert f"error: --cache_dir {cache}: 1.0 MB free, and this build needs about " in errors[0], errors[0]
        assert "[prepare] encode" not in result.stderr  # refused before any work
    else:
        assert f"error: --cache_dir {cache}: no space left on the device while preparing (2.1 MB were free when " \
               "the build started; this build needs about " in errors[0], errors[0]
        assert "the partial build was removed" in errors[0]


def test_the_space_check_and_enospc_detection_without_a_tmpfs(tmp_path, monkeypatch, caplog):
    # The processes above need `unshare`; this checks the same decisions everywhere, on faked disk usage.
    import collections
    import errno

    from rankzero import files
    from rankzero.data import space
    from rankzero.errors import RankzeroError

    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(space.shutil, "disk_usage", lambda path: usage(10**9, 0, 3 * 10**6))

    def check(needed: int | None) -> space.Space:
        monkeypatch.setattr(space, "space_needed", lambda *estimate_inputs: needed)
        return space.check_free_space(tmp_path, sources=[], with_labels=False)

    with pytest.raises(RankzeroError, match=rf"--cache_dir {tmp_path}: 3.0 MB free, and this build needs about "):
        check(10 * 10**6)  # below a third of the need: refused
    with caplog.at_level("WARNING"):
        assert check(6 * 10**6) == space.Space(3 * 10**6, 6 * 10**6)  # might fit: a warning, no error
    assert "it may not fit" in caplog.text
    assert check(None).free == 3 * 10**6  # a hub source: size unknown, no verdict

    assert files.out_of_space(OSError(errno.ENOSPC, "No space left on device"))
    assert files.out_of_space(OSError("IOError: No space left on device"))  # pyarrow: no errno, by message
    try:
        try:
            raise OSError(errno.EDQUOT, "Disk quota exceeded")
        except OSError as quota:
            raise RuntimeError("writing a shard failed") from quota
    except RuntimeError as chained:
        assert files.out_of_space(chained)
    assert not files.out_of_space(OSError(errno.EACCES, "Permission denied")) and not files.out_of_space(None)


def test_content_sampling_notices_an_edit_that_keeps_size_and_mtime(tmp_path, tokenizer_dir):
    big = write_jsonl(tmp_path / "big.jsonl", [{"text": t} for t in korean_documents(6000)])
    assert big.stat().st_size > 3 << 20  # larger than the two sampled MiB
    fingerprints = {mode: _fingerprint(data_args(tokenizer_dir, tmp_path, [big], fingerprint_content=mode))
                    for mode in ("stat", "sample", "full")}
    assert len(set(fingerprints.values())) == 3  # the mode is part of the identity

    def edit(offset: int) -> None:
        stat = big.stat()
        with open(big, "r+b") as handle:
            handle.seek(offset)
            digit = handle.read(1)
            assert digit.isdigit()
            handle.seek(offset)
            handle.write(b"7" if digit != b"7" else b"8")
        os.utime(big, ns=(stat.st_atime_ns, stat.st_mtime_ns))

    raw, mark = big.read_bytes(), "(문서 ".encode()  # each document ends with "(문서 N)"
    head, middle = raw.index(mark) + len(mark), raw.index(mark, len(raw) // 2) + len(mark)
    edit(head)  # inside the first MiB
    after = {mode: _fingerprint(data_args(tokenizer_dir, tmp_path, [big], fingerprint_content=mode))
             for mode in ("stat", "sample", "full")}
    assert after["stat"] == fingerprints["stat"], "size and mtime kept: the stat identity cannot see it"
    assert after["sample"] != fingerprints["sample"] and after["full"] != fingerprints["full"]
    edit(middle)  # between the sampled ends: only the full hash sees it
    again = {mode: _fingerprint(data_args(tokenizer_dir, tmp_path, [big], fingerprint_content=mode))
             for mode in ("sample", "full")}
    assert again["sample"] == after["sample"] and again["full"] != after["full"]


# ---------------------------------------------------------------------------------------------
# A cache dir shared by a team: a member's umask must not lock the others out


NOBODY = 65534


def _as_nobody() -> list[str]:
    """The command prefix that runs a process as a second user (nobody), or a visible skip."""
    command = ["setpriv", "--reuid", str(NOBODY), "--regid", str(NOBODY), "--clear-groups"]
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run a second user")
    if subprocess.run([*command, sys.executable, "-c", "import rankzero"], capture_output=True, cwd=REPO).returncode:
        pytest.skip("the second user cannot run this Python and repo")
    return command


def _run(prefix: list, args: list, umask: int = 0o022) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, str(REPO / "train.py"), "--tokenize_only", *map(str, args)],
                          cwd=REPO, capture_output=True, text=True, timeout=300, preexec_fn=lambda: os.umask(umask),
                          env={**os.environ, "HOME": "/tmp", "PYTHONUNBUFFERED": "1"})


def _readable_inputs(tokenizer_dir, prefix: str) -> Path:
    """A fresh dir every user can read, holding a copy of the tokenizer and a corpus whose shards pass
    ALWAYS_HASHED_BYTES (only stat'ed by the checks, read first by the loader)."""
    import tempfile

    base = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(base, 0o755)
    shutil.copytree(tokenizer_dir, base / "tokenizer")
    write_jsonl(base / "corpus.jsonl", [{"text": t} for t in korean_documents(4000)])
    for path in base.rglob("*"):
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return base


def test_a_team_cache_published_under_umask_077_is_usable_by_another_member(tokenizer_dir):
    nobody = _as_nobody()
    base = _readable_inputs(tokenizer_dir, "rankzero-team-")
    try:
        cache = base / "cache"
        cache.mkdir()
        os.chown(cache, 0, NOBODY)  # the team's group: nobody's
        os.chmod(cache, 0o2775)
        args = ["--dataset", base / "corpus.jsonl", "--tokenizer_path", base / "tokenizer", "--max_seq_length", 64,
                "--cache_dir", cache]
        built = _run([], args, umask=0o077)
        assert built.returncode == 0, built.stderr
        final = prepared_dir(built.stdout)
        for path in [final, *final.rglob("*")]:
            info = path.stat()
            assert info.st_gid == NOBODY and info.st_mode & 0o060 == 0o060, (path, oct(info.st_mode))
        reused = _run(nobody, args)
        assert reused.returncode == 0, reused.stderr
        assert prepared_dir(reused.stdout) == final and "[prepare] published" not in reused.stderr

        # Published by an older rankzero (or into a private dir): an error naming the owner, nothing removed.
        os.chmod(final, 0o700)
        refused = _run(nobody, args)
        assert refused.returncode != 0 and "Traceback" not in refused.stderr, refused.stderr
        assert f"{final} cannot be read by nobody (uid {NOBODY}): it belongs to root (uid 0), mode 0700" in refused.stderr
        assert final.is_dir() and not list(cache.glob("*.damaged-*"))
        os.chmod(final, 0o2775)  # the dir readable, one shard not (any file the loader would open)
        shard = next(final.glob("data-*.arrow"))
        assert shard.stat().st_size > ALWAYS_HASHED_BYTES
        os.chmod(shard, 0o600)
        refused = _run(nobody, args)
        assert refused.returncode != 0 and "Traceback" not in refused.stderr, refused.stderr
        assert f"{shard} cannot be read by nobody (uid {NOBODY}): it belongs to root (uid 0), mode 0600" in refused.stderr
        assert shard.exists() and not list(cache.glob("*.damaged-*"))

        # Another member's lock file that this user cannot open: named, with its owner.
        shutil.rmtree(final)
        lock = next(cache.glob("*.lock"))
        os.chmod(lock, 0o600)
        locked_out = _run(nobody, args)
        assert locked_out.returncode != 0 and "Traceback" not in locked_out.stderr, locked_out.stderr
        assert f"{lock} cannot be opened by nobody (uid {NOBODY}): it belongs to root (uid 0), mode 0600" in locked_out.stderr

        # A build of another member that died (0700, as every build dir is while written): named, then built around.
        os.chmod(lock, 0o644)
        dead = cache / f"{final.name}.tmp-deadhost-1-x"
        dead.mkdir(mode=0o700)  # 2700 in the setgid cache dir
        (dead / "data-00000-of-00001.arrow").write_bytes(b"partial")
        rebuilt = _run(nobody, args)
        assert rebuilt.returncode == 0 and prepared_dir(rebuilt.stdout) == final, rebuilt.stderr
        assert f"could not remove {dead}: it belongs to root (uid 0), mode 2700; ask its owner" in rebuilt.stderr
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_sticky_world_writable_cache_published_under_umask_077_is_usable_by_another_user(tokenizer_dir):
    """`chmod 1777` (like /tmp, docs/design.md): the builder (uid 12345, its own private group, umask 077) shares no
    group with the next user (nobody): what it publishes there is readable by all."""
    nobody = _as_nobody()
    builder = ["setpriv", "--reuid", "12345", "--regid", "12345", "--clear-groups"]
    base = _readable_inputs(tokenizer_dir, "rankzero-sticky-")
    try:
        cache = base / "cache"
        cache.mkdir()
        os.chmod(cache, 0o1777)
        args = ["--dataset", base / "corpus.jsonl", "--tokenizer_path", base / "tokenizer", "--max_seq_length", 64,
                "--cache_dir", cache]
        built = _run(builder, args, umask=0o077)
        # No logged warning (about what it wrote or could not write), less the extension's notice.
        assert built.returncode == 0 and not [w for w in warning_lines(built.stderr) if "WARNING" in w], built.stderr
        final = prepared_dir(built.stdout)
        for path in [final, *final.rglob("*")]:
            info = path.stat()
            assert info.st_uid == 12345 and info.st_mode & 0o444 == 0o444, (path, oct(info.st_mode))
        reused = _run(nobody, args)
        assert reused.returncode == 0, reused.stderr
        assert prepared_dir(reused.stdout) == final and "[prepare] published" not in reused.stderr
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("craft", ["nested", "nul in a file name", "sequences not a number"])
def test_a_crafted_manifest_is_an_error_or_a_rebuild_never_a_traceback(tmp_path, tokenizer_dir, corpus, craft):
    args = ["--dataset", corpus, "--tokenizer_path", tokenizer_dir, "--max_seq_length", 64, "--cache_dir", tmp_path]
    final = prepared_dir(prepare_cli(*args).stdout)
    manifest_path = final / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    sequences = manifest["sequences"]
    if craft == "nested":
        manifest_path.write_text(manifest_path.read_text()[:-1] + ', "deep": ' + "[" * 100_000 + "]" * 100_000 + "}")
    elif craft == "nul in a file name":
        manifest["files"]["data\0.arrow"] = {"size": 1, "xxh3_128": "0"}
        manifest_path.write_text(json.dumps(manifest))
    else:
        manifest["sequences"] = "abc"
        manifest_path.write_text(json.dumps(manifest))
    again = prepare_cli(*args, check=False)
    assert "Traceback" not in again.stderr and "RecursionError" not in again.stderr, again.stderr
    if craft == "nul in a file name":  # a name rankzero never writes: planted, so neither used nor removed
        assert again.returncode != 0, again.stderr
        assert f"{final}: its manifest.json lists 'data\\x00.arrow' in a way rankzero never writes" in again.stderr
        assert final.is_dir()
    else:  # damage: moved aside and rebuilt, the same data as before, with what was wrong
        told = ("its manifest.json is nested deeper than the JSON parser allows" if craft == "nested" else
                "its manifest.json says sequences is 'abc', not a count")
        assert again.returncode == 0 and f"{final} is damaged ({told}): removed, building it again" in again.stderr, \
            again.stderr
        assert json.loads(manifest_path.read_text())["sequences"] == sequences


def test_what_is_wrong_with_a_json_file_is_said_never_raised(tmp_path):
    from rankzero.files import read_json_or_problem

    cases = {"cut.json": (b'{"fingerprint": "ab', "not valid JSON (Unterminated string starting at: line 1 column 17"),
             "latin1.json": ('{"a": "\xe9"}'.encode("latin-1"), "not UTF-8 text"),
             "list.json": (b"[1, 2]", "a JSON list, not an object"),
             "deep.json": (b"[" * 100_000 + b"]" * 100_000, "nested deeper than the JSON parser allows"),
             "digits.json": (b'{"sequences": ' + b"9" * 5000 + b"}", "not valid JSON (Exceeds the limit")}
    for name, (content, problem) in cases.items():
        (tmp_path / name).write_bytes(content)
        value, found = read_json_or_problem(tmp_path / name)
        assert value is None and found.startswith(problem), (name, found)
    assert read_json_or_problem(tmp_path / "absent.json") == (None, "missing")
    (tmp_path / "good.json").write_text('{"a": 1}')
    assert read_json_or_problem(tmp_path / "good.json") == ({"a": 1}, None)
