"""What a build tells people while it runs: items done, rate and ETA on stderr, and the heartbeat's feed.

    progress = Progress(total_bytes, on_progress)      # prints docs, MB, MB/s, kept %, ETA every ~5 s
    progress.update(docs, kept, nbytes, tokens)

Both build engines report through it (tally.py, ray_engine.py), so a prepare looks the same on one machine and
on a cluster; report.py says what the build came to once it is done.
"""

from __future__ import annotations

import sys
import time
from typing import Callable

PROGRESS_EVERY_S = 5.0


class Progress:
    """Prints items done, rate and ETA every few seconds; feeds the heartbeat waiters read."""

    def __init__(self, total_bytes: int | None, on_progress: Callable[[dict], None] | None):
        self.total_bytes = total_bytes
        self.on_progress = on_progress
        self.started = time.monotonic()
        self.last = 0.0
        self.docs = self.kept = self.bytes = self.tokens = 0
        self.removed = 0  # duplicates (exact as chunks arrive; near once decided, at the end of encoding)
        self.phase = "encode"
        self._printed = None  # (phase, docs, bytes) of the last line printed

    def update(self, docs: int, kept: int, nbytes: int, tokens: int, removed: int = 0) -> None:
        self.docs += docs
        self.removed += removed
        self.kept += kept
        self.bytes += nbytes
        self.tokens += tokens
        now = time.monotonic()
        if now - self.last >= PROGRESS_EVERY_S:
            self.last = now
            self.report()

    def remove(self, documents: int) -> None:
        """Documents counted as kept that a decision over the whole corpus removed (near dedup)."""
        self.removed += documents
        self.kept -= documents
        self.report()

    def snapshot(self) -> dict:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        rate = self.bytes / elapsed
        eta = (self.total_bytes - self.bytes) / rate if self.total_bytes and rate > 0 else None
        return {"phase": self.phase, "docs": self.docs, "kept": self.kept, "bytes": self.bytes, "tokens": self.tokens,
                "elapsed_s": round(elapsed, 1), "mb_per_s": round(rate / 1e6, 2),
                "docs_per_s": round(self.docs / elapsed, 1), "duplicates": self.removed,
                "eta_s": round(eta, 1) if eta is not None else None,
                "percent": round(100 * self.bytes / self.total_bytes, 1) if self.total_bytes else None}

    def report(self) -> None:
        snap = self.snapshot()
        if self.on_progress:
            self.on_progress(snap)
        # The first update prints at once, and the end of a phase prints again: with nothing read in
        # between (a small corpus, one chunk) that is the same line twice.
        printed = (self.phase, self.docs, self.bytes, self.removed)
        if printed == self._printed:
            return
        self._printed = printed
        kept = 100 * self.kept / self.docs if self.docs else 100.0
        eta = time.strftime("%H:%M:%S", time.gmtime(snap["eta_s"])) if snap["eta_s"] is not None else "?"
        done = f" ({snap['percent']:.1f}%)" if snap["percent"] is not None else ""
        duplicates = f" (duplicates removed {100 * self.removed / self.docs:.1f}%)" if self.removed and self.docs else ""
        print(f"[prepare] {snap['phase']}: {self.docs:,} docs, {self.bytes / 1e6:,.1f} MB{done}, "
              f"{snap['docs_per_s']:,.0f} docs/s, {snap['mb_per_s']:.1f} MB/s, kept {kept:.1f}%{duplicates}, "
              f"{self.tokens:,} tokens, ETA {eta}", file=sys.stderr, flush=True)
