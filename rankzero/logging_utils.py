"""Logging set-up: rank 0 speaks at INFO, other ranks only warn, every line says which rank."""

from __future__ import annotations

import logging
import sys

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
