"""The Ray engine's work dir, on a filesystem every node shares: the files a task writes, and what a stage
task reads of the tasks before it.

    work = work_dir(path, fingerprint, tasks)      # on the driver: the work dir, reused after a crash
    task_file(work, 7, "stage.arrow")              # a task's file: task-000007.stage.arrow
    earlier = EarlierTexts(work, 7)                # in stage task 7: the texts it and tasks 0-6 staged

Every file is written under a temporary name and renamed when complete, a task's JSON meta last (its mark of
being done).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from rankzero.data.dedup.exact import ExactDuplicates
from rankzero.errors import RankzeroError
from rankzero.files import read_json, write_atomic, write_json_atomic

POLL_S = 1.0  # how often a stage task looks for earlier tasks that are done
EARLIER_TEXTS = 4 << 20  # their hashes a task reads at most: 32 MB, within the task's declared memory


def work_dir(work: Path, fingerprint: str, tasks: list) -> Path:
    """The work dir for this task list: reused after a crash when it was made for the same one."""
    signature = {"fingerprint": fingerprint, "tasks": task_rows(tasks)}
    if work.is_symlink() or (work.exists() and not work.is_dir()):
        raise RankzeroError(f"{work} is not a directory rankzero made; remove it")
    if work.is_dir():
        if read_json(work / "tasks.json") == signature:
            done = len(list(work.glob("task-*.pack.json"))) + len(list(work.glob("task-*.stage.json")))
            if done:
                print(f"[prepare] ray: reusing {work} from an earlier run that did not finish", file=sys.stderr)
            return work
        print(f"[prepare] ray: {work} was made for another task list (different inputs or task size); starting over",
              file=sys.stderr)
        shutil.rmtree(work)
    work.mkdir(parents=True)
    write_json_atomic(work / "tasks.json", signature)
    return work


def task_file(work: Path, index: int, what: str) -> Path:
    return work / f"task-{index:06d}.{what}"


def task_rows(tasks: list) -> list[dict]:
    return [asdict(task) for task in tasks]


def write_npz_atomic(path: Path, **arrays) -> None:
    write_atomic(path, lambda handle: np.savez(handle, **{k: v for k, v in arrays.items() if v is not None}))


class EarlierTexts:
    """The texts a task has seen: its own so far, and those of each earlier task (lower index) whose stage files
    are done. Such a text's first holder sits earlier in the corpus, so the driver drops it as an exact duplicate
    whatever else happens; the task drops it before signing and tokenizing it, counted as the stage counts its own
    repeats, and the driver's counts and the kept set come out the same. Which earlier tasks are done depends on
    timing (a copy of an unfinished one is staged and dropped by the driver, as before); what is kept does not."""

    def __init__(self, work: Path, index: int):
        self.work, self.index, self.texts, self.read = work, index, ExactDuplicates(), set()
        self.polled = float("-inf")

    def seen(self, hashes: np.ndarray) -> np.ndarray:
        # Reading the work dir costs one listing per poll; EARLIER_TEXTS bounds what a task holds.
        if (len(self.read) < self.index and len(self.texts) < EARLIER_TEXTS
                and time.monotonic() - self.polled >= POLL_S):  # no listing once every earlier task is read
            self.polled = time.monotonic()
            done = {int(name[5:-11]) for name in os.listdir(self.work) if name.endswith(".stage.json")}
            for index in (i for i in done if i < self.index and i not in self.read):
                self.read.add(index)
                with np.load(task_file(self.work, index, "hashes.npz")) as files:
                    self.texts.keep(files["hashes"])
        return self.texts.seen(hashes)

    def keep(self, hashes: np.ndarray) -> None:
        """The task's own texts of a chunk, seen by its later chunks."""
        self.texts.keep(hashes)
