"""Logging set-up: rank 0 speaks at INFO, other ranks only warn, every line says which rank; a Python
warning is one such line."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings

from rankzero.runtime import Runtime


def setup_logging(runtime: Runtime) -> None:
    prefix = f"[rank{runtime.rank}] " if runtime.is_distributed else ""
    logging.basicConfig(
        level=logging.INFO if runtime.is_main else logging.WARNING,
        format=f"%(asctime)s {prefix}%(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
        force=True,
    )
    # huggingface_hub logs through a handler of its own and to the root logger's: every line twice.
    logging.getLogger("huggingface_hub").propagate = False
    warnings.showwarning = _log_warning


def _log_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as one log line like the others (what was ignored or chosen, and why), instead of Python's
    `file:line: UserWarning: …` with the source line under it. Another category keeps its name."""
    prefix = "" if category is UserWarning else f"{category.__name__}: "
    logging.getLogger("py.warnings").warning("%s%s", prefix, message)


@contextlib.contextmanager
def stdout_to_stderr():
    """Send fd 1 to stderr for a while: libraries (Rust progress bars, Kiwi) print on stdout, which a
    command keeps for its results (`saved: DIR`, `--json`)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
