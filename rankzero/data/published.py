"""A published dataset: what its manifest promises, and the checks before and as it is used.

    problem = verify_published(FP, inputs, deep=False)   # None, MISSING, or what is wrong (ForeignDataset raised)
    files = file_table(tmp)                              # the manifest's "files": size and xxh3 of each
    validation = validation_dir(FP)                      # FP/validation (a save_to_disk Dataset), or None
    move_aside(FP, problem)                              # a damaged FP/ out of sight in one rename, then deleted

handoff.py runs the protocol (who builds, who waits, when to publish) on top of these and of
rankzero/files.py (the file primitives that never follow a planted link).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

from rankzero.data.screen.pii import masked_paths
from rankzero.errors import RankzeroError
from rankzero.files import (content_hash, current_umask, lstat, open_no_follow, owner_text, read_json,
                            read_json_or_problem, this_user)

logger = logging.getLogger(__name__)

MISSING = "not built yet"
VALIDATION = "validation"  # the one subdirectory of a published dataset: the validation split's own Dataset
ALWAYS_HASHED_BYTES = 1 << 20  # files this small (state.json, dataset_info.json) are checksummed on every use
class ForeignDataset(RankzeroError):
    """The cache holds something at FP that rankzero did not build for these inputs: never used, never removed."""


class UnreadableDataset(RankzeroError):
    """A published dataset of another user that this user cannot read: never judged damaged, never removed."""


def _check_readable(final: Path, *files: Path) -> None:
    unreadable = [path for path in (final, final / "manifest.json", final / VALIDATION, *files)
                  if os.path.lexists(path) and not os.access(path, os.R_OK | (os.X_OK if path.is_dir() else 0))]
    if unreadable:
        world = os.stat(final.parent).st_mode & stat.S_IWOTH
        raise UnreadableDataset(
            f"{unreadable[0]} cannot be read by {this_user()}: it belongs to {owner_text(unreadable[0])} (published "
            f"by a rankzero that did not give a shared cache access, or into a cache dir that is not group-writable); "
            f"ask its owner to run `chmod -R {'a+rX' if world else 'g+rwX'} {final}`, or use your own --cache_dir")


def publish_modes(cache_dir: Path) -> tuple[int, int]:
    """The modes of a published dataset's dirs and files: the umask's, plus group read and write when the cache
    dir is a team's (group-writable, docs/design.md), so that one member's umask 077 cannot lock the others out
    of the data or stop them from rebuilding a damaged copy. Dirs get the setgid bit there (the team's group).
    In a world-writable cache (1777, like /tmp) every user is a writer and no group is shared: read for all
    instead (write would not help: the sticky bit lets only the owner replace a dataset)."""
    mask = current_umask()
    dirs, files = 0o777 & ~mask, 0o666 & ~mask
    mode = os.stat(cache_dir).st_mode
    if mode & stat.S_IWOTH:
        dirs, files = dirs | 0o755, files | 0o644
    elif mode & stat.S_IWGRP:
        dirs, files = dirs | 0o070 | stat.S_ISGID, files | 0o060
    return dirs, files


def set_publish_modes(build_dir: Path, cache_dir: Path) -> int:
    """Give a finished build (still 0700: nobody else can have planted anything in it) its published modes, and
    the cache dir's group where that is a team's; returns the file mode for what is written after."""
    dirs, files = publish_modes(cache_dir)
    group = os.stat(cache_dir).st_gid if dirs & stat.S_ISGID else None
    for root, _, names in os.walk(build_dir):  # os.walk enters no symlinked dir
        for path in [root, *(os.path.join(root, name) for name in names)]:
            if group is not None and os.lstat(path).st_gid != group:
                try:
                    os.chown(path, -1, group, follow_symlinks=False)
                except PermissionError:  # not a member of the cache dir's group: the modes still apply
                    group = None
                    logger.warning("%s: cannot give the build the cache dir's group (not a member?); other "
                                   "members may not read it", build_dir)
            os.chmod(path, dirs if path == root else files)
    return files


def check_writable(cache_dir: Path) -> None:
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=cache_dir, prefix=".write-test-"):
            pass
    except OSError as error:
        raise RankzeroError(f"--cache_dir {cache_dir}: not writable ({error.strerror}); choose another with --cache_dir "
                            "or RANKZERO_CACHE") from None


# ---------------------------------------------------------------------------------------------
# Published datasets: what the manifest promises, and checking it before use


def file_table(directory: Path, prefix: str = "") -> dict[str, dict]:
    """Every file of a finished build with its size and xxh3-128 checksum: the manifest's "files". The
    validation split's files are named relative to the build dir ("validation/data-00000-of-00001.arrow")."""
    table = {}
    for entry in sorted(os.scandir(directory), key=lambda entry: entry.name):
        info = entry.stat(follow_symlinks=False)
        if not prefix and entry.name == VALIDATION and stat.S_ISDIR(info.st_mode):
            table.update(file_table(Path(entry.path), f"{VALIDATION}/"))
            continue
        assert stat.S_ISREG(info.st_mode), f"a build dir holds only files and {VALIDATION}/: {entry.path}"
        if entry.name != "manifest.json" or prefix:
            with os.fdopen(open_no_follow(Path(entry.path)), "rb") as handle:
                table[prefix + entry.name] = {"size": info.st_size, "xxh3_128": content_hash(handle, info.st_size)}
    return table


def _listed_name(name) -> bool:
    """A name rankzero writes in a manifest's file table: a plain file name, or one inside validation/."""
    if not isinstance(name, str):
        return False
    parts = name.split("/")
    if len(parts) == 2 and parts[0] == VALIDATION:
        parts = parts[1:]
    return len(parts) == 1 and parts[0] not in ("", ".", "..") and os.sep not in parts[0] and "\0" not in parts[0]


def verify_published(final: Path, inputs: dict | None = None, deep: bool = False) -> str | None:
    """None when `final` is a complete dataset built from `inputs`; otherwise what is wrong with it (MISSING
    when there is nothing). Raises ForeignDataset for what rankzero must neither use nor remove.

    Cheap: a stat per file, and a checksum of the small ones; `deep` (--verify_data) checksums every byte."""
    info = lstat(final)
    if info is None:
        return MISSING
    if not stat.S_ISDIR(info.st_mode):
        kind = "a symlink" if stat.S_ISLNK(info.st_mode) else "not a directory"
        raise ForeignDataset(f"{final} is {kind}: rankzero publishes only directories it built and follows no link in "
                             "the cache dir; remove it, or use another --cache_dir")
    _check_readable(final)
    manifest, problem = read_json_or_problem(final / "manifest.json")
    if manifest is None:
        if problem == "missing":
            return "no manifest.json: deleted, or an interrupted copy"
        return f"its manifest.json is {problem}"
    if manifest.get("fingerprint") != final.name:
        raise ForeignDataset(f"{final}: its manifest.json is for fingerprint {manifest.get('fingerprint')!r}: the dir "
                             "was copied or planted there, and rankzero never trains on it; remove it, or use another "
                             "--cache_dir")
    if inputs is not None:
        differ = _differences(json.loads(json.dumps(masked_paths(inputs), sort_keys=True, default=str)),
                              manifest.get("fingerprint_inputs"))
        if differ:
            raise ForeignDataset(f"{final}: its manifest.json says it was built from other inputs ({', '.join(differ)} "
                                 "differ from this run's): not the data its name promises, and rankzero never trains "
                                 "on it; remove it, or use another --cache_dir")
    malformed = _malformed_counts(manifest)
    if malformed:
        return f"its manifest.json says {malformed}, not a count"
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        return "its manifest.json lists no files (written by an older rankzero)"
    for name, expected in files.items():
        well_formed = isinstance(expected, dict) and isinstance(expected.get("size"), int)
        if not _listed_name(name) or not well_formed:
            raise ForeignDataset(f"{final}: its manifest.json lists {name!r} in a way rankzero never writes; remove it")
    if any(name.startswith(f"{VALIDATION}/") for name in files):
        # Its files are reached through it: a link there would lead the checks (and the loader) elsewhere.
        found = lstat(final / VALIDATION)
        if found is None or not stat.S_ISDIR(found.st_mode):
            return f"{VALIDATION}/ is missing or not a directory"
    for name, expected in files.items():
        found = lstat(final / name)
        if found is None:
            return f"{name} is missing"
        if not stat.S_ISREG(found.st_mode):
            return f"{name} is not a regular file"
        if found.st_size != expected.get("size"):
            return f"{name} is {found.st_size:,} bytes, its manifest says {expected['size']:,} (cut short or rewritten)"
    _check_readable(final, *(final / name for name in files))  # the loader reads them all; say whose they are first
    for name, expected in files.items():
        if deep or expected["size"] <= ALWAYS_HASHED_BYTES:
            try:
                with os.fdopen(open_no_follow(final / name), "rb") as handle:
                    digest = content_hash(handle, expected["size"])
            except OSError as error:
                return f"{name} cannot be read ({error.strerror})"
            if digest != expected.get("xxh3_128"):
                return f"{name} does not match its checksum in manifest.json (changed on disk)"
    return None


def _malformed_counts(manifest: dict) -> str | None:
    """The first count a loader reads from the manifest that is not a non-negative integer, as "key is value"."""
    validation = manifest.get("validation")
    counts = {key: manifest.get(key) for key in ("sequences", "tokens")}
    if validation is not None:
        if not isinstance(validation, dict):
            return f"validation is {validation!r:.40}"
        counts.update({f"validation.{key}": validation.get(key) for key in ("sequences", "tokens")})
    for key, value in counts.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return f"{key} is {value!r:.40}"
    return None


def _differences(expected: dict, found) -> list[str]:
    if not isinstance(found, dict):
        return ["all"]
    return sorted(key for key in expected.keys() | found.keys() if expected.get(key) != found.get(key))


def build_id(final: Path) -> str | None:
    """Which build FP/ holds: None when there is none, "" when it has no (readable) manifest."""
    if lstat(final) is None:
        return None
    return str((read_json(final / "manifest.json") or {}).get("build_id", ""))


def usable(final: Path, inputs: dict | None, rejected: str | None) -> bool:
    """A published FP/ that is not the one this rank found unusable, and passes the cheap checks."""
    current = build_id(final)
    return current is not None and current != rejected and verify_published(final, inputs) is None


def validation_dir(prepared_dir: str | os.PathLike) -> Path | None:
    """The validation split of a published dataset (load it with `datasets.load_from_disk`), or None when it was
    prepared without one (no --validation_split_percentage, no --eval_dataset)."""
    manifest = read_json(Path(prepared_dir) / "manifest.json") or {}
    if not manifest.get("validation"):
        return None
    path = Path(prepared_dir) / VALIDATION
    info = lstat(path)
    if info is None or not stat.S_ISDIR(info.st_mode):
        raise RankzeroError(f"{prepared_dir}: its manifest.json promises a validation split, but {path} is missing or "
                            "not a directory; remove the dataset dir and run again to rebuild it")
    return path


def damaged_message(prepared_dir: str | os.PathLike, what: str) -> str:
    return (f"{prepared_dir}: the prepared data is damaged ({what}): changed on disk after it was built. Run again with "
            "--verify_data, which checks every byte against manifest.json and rebuilds a damaged dataset (or remove "
            "the directory and run again)")


def load_published(directory: str | os.PathLike, prepared_dir: str | os.PathLike):
    """`datasets.load_from_disk` of a published dataset (or of its validation/ split), its rows' structure checked:
    Arrow's full validation (every offset in bounds) and, in every row, as many labels as ids and document lengths
    that add up to the row. That reads offsets and document lengths, O(rows + documents), never the tokens: a byte
    changed among the tokens is for --verify_data's checksums, or for the collator's id check when it makes an id
    outside the vocabulary."""
    import datasets
    import pyarrow as pa

    try:
        dataset = datasets.load_from_disk(str(directory))
        table = dataset.data.table if isinstance(dataset, datasets.Dataset) else None
        if table is not None:
            table.validate(full=True)
    except (pa.ArrowException, OSError, ValueError, IndexError) as error:  # what a byte changed in a shard raises
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise RankzeroError(damaged_message(prepared_dir, reason)) from None
    if table is not None and "input_ids" in table.column_names:
        problem = _row_problem(table)
        if problem:
            raise RankzeroError(damaged_message(prepared_dir, problem))
    return dataset


def _row_problem(table) -> str | None:
    import numpy as np
    import pyarrow.compute as pc

    lengths = pc.list_value_length(table.column("input_ids")).to_numpy()
    if "labels" in table.column_names:
        bad = np.flatnonzero(pc.list_value_length(table.column("labels")).to_numpy() != lengths)
        if len(bad):
            return f"row {bad[0]:,} has {lengths[bad[0]]:,} ids and a different number of labels"
    if "document_lengths" in table.column_names:
        start = 0
        for chunk in table.column("document_lengths").chunks:
            offsets = chunk.offsets.to_numpy()
            sums = np.concatenate([[0], np.cumsum(chunk.values.to_numpy(), dtype=np.int64)])
            totals = sums[offsets[1:]] - sums[offsets[:-1]]
            rows = lengths[start:start + len(chunk)]
            bad = np.flatnonzero(totals != rows)
            if len(bad):
                row = start + bad[0]
                return f"row {row:,} has {lengths[row]:,} ids and document lengths adding up to {totals[bad[0]]:,}"
            start += len(chunk)
    return None


def check_loaded_rows(prepared_dir: str | os.PathLike, rows: int, validation: bool = False) -> None:
    """After loading: as many rows as the manifest promises (a shard cut at a record-batch boundary still loads),
    for the training split or, with `validation`, the validation split."""
    manifest = read_json(Path(prepared_dir) / "manifest.json") or {}
    promised = (manifest.get("validation") or {}).get("sequences") if validation else manifest.get("sequences")
    if promised is not None and promised != rows:
        what = "validation rows" if validation else "rows"
        raise RankzeroError(f"{prepared_dir}: {rows:,} {what} loaded, its manifest.json promises {promised:,}: the "
                            "prepared data is damaged; remove the directory and run again to rebuild it")


# ---------------------------------------------------------------------------------------------
# The build's lock, leftovers and disk space
def remove_dead_builds(cache_dir: Path, fingerprint: str) -> None:
    """Called with the lock held: any tmp (or damaged) dir of this fingerprint belongs to a builder that died."""
    for dead in [*cache_dir.glob(f"{fingerprint}.tmp-*"), *cache_dir.glob(f"{fingerprint}.damaged-*")]:
        info = lstat(dead)
        if info is None:
            continue
        if not stat.S_ISDIR(info.st_mode):  # a symlink planted there: rmtree would refuse it anyway; say so
            logger.warning("%s is not a directory rankzero made (a symlink?): left alone", dead)
            continue
        logger.warning("removing %s left by a builder that died", dead)
        shutil.rmtree(dead, ignore_errors=True)
        if os.path.lexists(dead):  # another user's build dir is theirs alone (0700 while written): only they can
            logger.warning("could not remove %s: it belongs to %s; ask its owner to remove it (it only takes space)",
                           dead, owner_text(dead))
    for beat in cache_dir.glob(f"{fingerprint}.heartbeat.*"):
        info = lstat(beat)
        if info is not None and time.time() - info.st_mtime > 60:
            beat.unlink(missing_ok=True)  # unlinks a symlink itself, never its target


def move_aside(final: Path, problem: str) -> None:
    """Take a damaged FP/ out of every rank's sight in one rename (onto an empty dir of an unguessable name),
    then delete it: its fingerprint says exactly how to rebuild it."""
    aside = Path(tempfile.mkdtemp(dir=final.parent, prefix=f"{final.name}.damaged-"))
    try:
        os.rename(final, aside)
    except OSError as error:
        aside.rmdir()
        raise RankzeroError(f"{final} is damaged ({problem}) and could not be moved aside ({error.strerror}; it belongs "
                            f"to {owner_text(final)}): ask its owner to remove it, or use another --cache_dir") from None
    logger.warning("%s is damaged (%s): removed, building it again", final, problem)
    shutil.rmtree(aside, ignore_errors=True)
