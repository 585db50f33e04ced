"""fastokens' tokenizer, built on a thread while the process still imports and plans.

    with building_ahead(stage.tokenizer_path, stage.tokenizer_engine, may_build=runtime.local_rank == 0):
        prepared = prepare_or_wait(make_plan(...), ...)   # FastokensEngine(info) takes what was built

`fastokens.Tokenizer.from_json_str` takes ~0.23 s for a 32k BPE and releases the GIL. The builder needs it only
after ~0.3 s of imports and planning (the HF tokenizer, the fingerprint, the cache lookup), which it used to
follow; started here, right after the arguments are read, it runs beside them on another core
(bench/RESULTS.md, "The prepare's fixed cost"). The tokenizer is taken only for the very same tokenizer.json
text, in the process that started it; anything else builds its own as before, and a build that fails here is
simply built again where the engine check reports its error. Nothing here may stop a run: it only saves time.
This module imports nothing heavy, so that the thread starts before numpy and pyarrow are imported.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from contextlib import contextmanager
from pathlib import Path


class _Build:
    """One load of `text` on its own thread; `tokenizer` is None until it is done, and after a failure."""

    def __init__(self, text: str):
        self.pid, self.text, self.tokenizer = os.getpid(), text, None
        self.thread = threading.Thread(target=self._run, name="rankzero-fastokens", daemon=True)

    def _run(self) -> None:
        try:
            import fastokens

            self.tokenizer = fastokens.Tokenizer.from_json_str(self.text)
        except BaseException:  # noqa: BLE001 (a Rust panic too: FastokensEngine loads it again and says why)
            pass


_ahead: _Build | None = None


@contextmanager
def building_ahead(tokenizer_path: str, requested: str, may_build: bool = True):
    """Build fastokens' tokenizer for `tokenizer_path`'s tokenizer.json on a thread for the length of the block
    (nothing when `requested` is 'hf', when this process will not build, or without fastokens or the file). On
    leaving, what was not taken (the data was already prepared) is waited for and dropped: never left running at
    the interpreter's exit or into a fork, nor held through training."""
    global _ahead
    build = _start(tokenizer_path) if may_build and requested != "hf" and _ahead is None else None
    if build is not None:
        _ahead = build
    try:
        yield
    finally:
        if build is not None:
            if _ahead is build:  # first: an interrupted join leaves nothing behind for a later block
                _ahead = None
            build.thread.join()


def _start(tokenizer_path: str) -> _Build | None:
    if importlib.util.find_spec("fastokens") is None:
        return None
    try:
        text = (Path(tokenizer_path) / "tokenizer.json").read_text(encoding="utf-8")
    except (OSError, ValueError):  # no file (converted later) or not UTF-8: the plan says why
        return None
    build = _Build(text)
    try:
        build.thread.start()
    except RuntimeError:  # no thread to be had (a process limit): the engine loads it where it always did
        return None
    return build


def take(text: str):
    """The tokenizer built ahead from exactly `text`, waiting for it if need be; None when none was (another text,
    a forked worker process, a build that failed). It is taken once."""
    global _ahead
    build = _ahead
    if build is None or build.pid != os.getpid() or build.text != text:
        return None
    build.thread.join()
    _ahead = None
    return build.tokenizer
