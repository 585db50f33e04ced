"""A build's tally of the whole corpus, kept the same way by both engines: each source's counts, the progress
line, the split and exact dedup, near dedup, the screen's totals, the quality filter's samples, and the
manifest made from them.

    tally = Tally(plan.corpus(), near_dir, total_bytes, on_progress)
    tally.holdout(...), tally.ledger.add(...), tally.screened.add(...)    # per piece, in source order
    removed = tally.decide_near(where, out_dir / "dedup_samples.jsonl")   # --dedup near, once every document is in
    tally.check()                                    # something left, a real split, the mix
    manifest = tally.manifest(engine, out_dir, ...)  # with the validation, near dedup and screen entries

An engine cuts the corpus its own way (chunks in one process, tasks on a cluster) and owns its files; what it
counts and decides over the corpus, in source order, and what the manifest says of that, is kept here once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from rankzero.data.engines.near_ledger import NearLedger, write_samples
from rankzero.data.engines.progress import Progress
from rankzero.data.mixing import mixing_ratios
from rankzero.data.plan import Corpus
from rankzero.data.report import SourceStats, build_manifest, check_counts, validation_manifest
from rankzero.data.screen.pii import NameMasker, mask_name
from rankzero.data.screen.screening import ScreenTotals
from rankzero.data.split import Holdout


class Tally:
    """One build's counts and corpus-wide decisions (built once, by the engine that builds)."""

    def __init__(self, corpus: Corpus, near_dir: Path, total_bytes: int | None,
                 on_progress: Callable[[dict], None] | None):
        """`corpus`: the plan's settings of what is decided over the whole corpus (Plan.corpus); `near_dir`: where
        near dedup keeps its signatures (--dedup near only); `total_bytes`: the input's size for the progress line's
        ETA (None: not known)."""
        self.corpus = corpus
        names = NameMasker()
        self.names = [names(source.spec) for source in corpus.sources]  # what every written file calls the sources
        self.stats = [SourceStats.of(source, name) for source, name in zip(corpus.sources, self.names)]
        self.progress = Progress(total_bytes, on_progress)
        # Exact duplicates (first one wins) and the validation split, decided in source order.
        self.holdout = Holdout([source.evaluation for source in corpus.sources],
                               corpus.validation_split_percentage, corpus.exact_dedup)
        self.ledger = (NearLedger(corpus.near_threshold, near_dir, corpus.dedup_memory_bytes)
                       if corpus.near_threshold is not None else None)
        self.screened = ScreenTotals(self.names, corpus.mask_pii, corpus.benchmarks,
                                     corpus.validation_flags is not None)
        self.quality_samples: list[list[dict]] = []  # the quality filter's, per piece in source order

    def decide_near(self, where: Callable[[int], tuple[Path, int]], samples: Path) -> np.ndarray:
        """--dedup near once every document is in the ledger: the decision (each source's counts lose its
        near-copies), its samples (`where(number)` → (staged file, position): the engine's layout) and the
        progress line. Returns the removed mask, in ledger order."""
        assert self.ledger is not None, "decide_near needs --dedup near"
        self.progress.phase = "near-dedup"
        removed = self.ledger.decide(self.stats)
        write_samples(samples, self.ledger, self.names, self.corpus.tokenizer, where)
        self.progress.remove(int(removed.sum()))
        return removed

    def check(self) -> None:
        """After counting (before packing where the engine can; Ray's one-pass tasks pack as they go): nothing
        left, or a split that holds nothing or everything, is one line to the user (report.check_counts); then the
        training sources' mixing ratios (mixing.py)."""
        check_counts(self.stats, self.corpus.validation_flags)
        mixing_ratios([stat for stat in self.stats if not stat.evaluation])

    def manifest(self, engine, out_dir: Path, *, sequences: int, shards: int, tail_tokens: int, timings: dict,
                 worker_seconds, validation: dict | None, extra: dict) -> dict:
        """The build's manifest (report.build_manifest); `validation`: the validation rows' `sequences`, `shards`
        and `tail_tokens` (None without a split); `extra`: the engine's own entries. Near dedup's entry and the
        screen's are added here, and the quality filter's and the screen's sample files written into `out_dir`."""
        settings = self.corpus.manifest
        if settings.quality_settings is not None:
            from rankzero.data.quality.samples import write_quality_samples

            write_quality_samples(out_dir / "quality_samples.jsonl", [[{**sample, "path": mask_name(sample["path"])}
                                                                       for sample in samples]
                                                                      for samples in self.quality_samples])
        if validation is not None:
            validation = validation_manifest(self.stats, self.corpus.validation_split_percentage,
                                             [stat.spec for stat in self.stats if stat.evaluation], **validation)
        extra = {**extra, **self.screened.finish(self.stats, out_dir),
                 **({"near_dedup": self.ledger.describe()} if self.ledger is not None else {})}
        return build_manifest(settings, self.stats, engine, sequences=sequences, shards=shards,
                              tail_tokens=tail_tokens, timings=timings, worker_seconds=worker_seconds, extra=extra,
                              validation=validation)
