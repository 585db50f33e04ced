"""A build's tally of the whole corpus, kept the same way by both engines: each source's counts, the progress
line, the split and exact dedup, near dedup, the screen's totals, the quality filter's samples, the checks made over
them and the manifest made from them.

    tally = Tally(plan.corpus(), near_dir, total_bytes, on_progress)
    tally.holdout(...), tally.stats[i].add(...), tally.ledger.add(...)    # per piece, in source order
    removed = tally.decide_near(where, out_dir / "dedup_samples.jsonl")   # --dedup near, once every document is in
    tally.check()                                    # something left, a real split, the mix
    manifest = tally.manifest(engine, out_dir, training, validation, ...)   # each split's rows, as written

An engine cuts the corpus its own way (chunks in one process, tasks on a cluster) and owns its files; what it
counts and decides over the corpus, in source order, and what the manifest says of that, is kept here once, so a
prepare reports the same on one machine and on a cluster. report.py prints the summary of the manifest.
"""

from __future__ import annotations

import platform
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from rankzero import malloc
from rankzero.data.engines.near_ledger import NearLedger, write_samples
from rankzero.data.engines.progress import Progress
from rankzero.data.mixing import mixing_ratios
from rankzero.data.plan import FORMAT_VERSION, Corpus, ManifestSettings
from rankzero.data.screen.pii import NameMasker, mask_name
from rankzero.data.screen.screening import ScreenTotals
from rankzero.data.split import HOW_CHOSEN, Holdout
from rankzero.errors import RankzeroError


@dataclass
class SourceStats:
    """One source's counts, filled in by the engines piece by piece and read by the checks and the manifest."""

    spec: str
    weight: float | None
    evaluation: bool = False  # an --eval_dataset source
    docs_in: int = 0
    docs_kept: int = 0  # after the filter and dedup, in either split
    bytes_in: int = 0
    tokens: int = 0  # of the kept training documents (before mixing)
    ratio: float = 1.0
    tokens_out: int = 0
    documents_out: int = 0
    validation_documents: int = 0  # held out
    validation_tokens: int = 0
    truncated: int = 0  # SFT samples longer than a row, cut at their end (training documents)
    validation_truncated: int = 0
    dropped: Counter = field(default_factory=Counter)
    # Per file of a glob or directory: documents and bytes in, and what the stage dropped (records, empty,
    # the quality rules). Dedup decides over the whole corpus, and is counted per source.
    files: dict = field(default_factory=dict)

    def packed(self, documents: int, tokens: int) -> None:
        """Training documents that went into rows (repeats and subsamples of mixing included)."""
        self.documents_out += documents
        self.tokens_out += tokens

    def __post_init__(self):
        self._file_names = NameMasker()  # no field: the manifest lists the files' counts under their masked names

    @classmethod
    def of(cls, source, name: str) -> SourceStats:
        """`name`: the source's spec as written (pii.NameMasker)."""
        return cls(name, source.weight, source.evaluation)

    # The counts change only through these methods, in this order: `add` a piece, `drop` what a decision over
    # more than the piece takes back, `hold_out` what goes to the validation split, `packed` what went out.

    def add(self, docs_in: int, kept: int, bytes_in: int, tokens: int, dropped: dict, replaced_lines: int,
            truncated: int = 0) -> None:
        """Count a piece of this source (a chunk, or a Ray task), of which `kept` documents and `tokens`
        tokens go on (`truncated` of them SFT samples cut to a row): every engine counts through here."""
        self.docs_in += docs_in
        self.docs_kept += kept
        self.bytes_in += bytes_in
        self.tokens += tokens
        self.truncated += truncated
        self.dropped.update(dropped)
        if replaced_lines:
            self.dropped["lines_with_replaced_bytes (kept)"] += replaced_lines

    def add_file(self, path: str, docs_in: int, bytes_in: int, dropped: dict) -> None:
        counts = self.files.setdefault(self._file_names(path), {"docs_in": 0, "bytes_in": 0, "dropped": Counter()})
        counts["docs_in"] += docs_in
        counts["bytes_in"] += bytes_in
        # A file's own verdicts: exact dedup is decided over the corpus (the stage drops some repeats early).
        counts["dropped"].update({reason: count for reason, count in dropped.items()
                                  if count and reason != "exact_duplicate"})

    def drop(self, dropped: dict, tokens: int, truncated: int = 0, held: tuple[int, int, int] = (0, 0, 0)) -> None:
        """Take back documents counted as kept (reason → count; duplicates found after counting): `tokens` and
        `truncated` of the training documents among them, and `held` (documents, tokens, truncated) of the
        held-out ones."""
        self.docs_kept -= sum(dropped.values())
        self.tokens -= tokens
        self.truncated -= truncated
        self.validation_documents -= held[0]
        self.validation_tokens -= held[1]
        self.validation_truncated -= held[2]
        self.dropped.update(dropped)

    def hold_out(self, documents: int, tokens: int, truncated: int = 0) -> None:
        """Move kept documents (`truncated` of them cut) from the training count to the validation split."""
        self.tokens -= tokens
        self.truncated -= truncated
        self.validation_documents += documents
        self.validation_tokens += tokens
        self.validation_truncated += truncated


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
        left, or a split that holds nothing or everything, is one line to the user (check_counts); then the
        training sources' mixing ratios (mixing.py)."""
        check_counts(self.stats, self.corpus.validation_flags)
        mixing_ratios([stat for stat in self.stats if not stat.evaluation])

    def manifest(self, engine, out_dir: Path, training: dict, validation: dict | None, *, timings: dict,
                 worker_seconds, extra: dict) -> dict:
        """The build's manifest (build_manifest); `training`, `validation`: each split's `sequences`, `shards` and
        `tail_tokens` left out (validation None without a split); `extra`: the engine's own entries. Near dedup's
        entry and the screen's are added here, and the quality filter's and the screen's sample files written into
        `out_dir`."""
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
        return build_manifest(settings, self.stats, engine, training, timings=timings, worker_seconds=worker_seconds,
                              extra=extra, validation=validation)


# ---------------------------------------------------------------------------------------------
# What is wrong with the counts: one line to the user, before anything is packed


def check_counts(stats: list[SourceStats], validation_flags: str | None) -> None:
    """After counting, before packing: nothing left to train on, or a validation split (asked for by
    `validation_flags`, None: none) that holds nothing, or that holds everything, is one line to the user."""
    if sum(s.docs_kept for s in stats) == 0:
        raise RankzeroError(nothing_left_message(stats))
    if validation_flags is None:
        return
    held = sum(s.validation_documents for s in stats)
    training = sum(s.docs_kept for s in stats) - held
    evaluation = eval_dataset_counts(stats)
    if held == 0 and evaluation and evaluation["read"]:
        eval_flag = next(flag for flag in validation_flags.split(", ") if flag.startswith("--eval_dataset "))
        flag = "--decontaminate" if evaluation["removed"].get("benchmark_contamination") else "--quality_filter"
        raise RankzeroError(f"validation: all {evaluation['read']:,} documents of {eval_flag} were removed "
                            f"({reasons_text(evaluation['removed'])}) by {removal_cause(evaluation['removed'])}; "
                            f"nothing is left to evaluate on: give an eval set that passes ({flag} applies to it too), "
                            "or leave --eval_dataset out and hold out a share of --dataset with "
                            "--validation_split_percentage")
    if held == 0:
        raise RankzeroError(f"validation: no document was held out ({validation_flags}, {training:,} documents kept); "
                            "raise --validation_split_percentage or give --eval_dataset")
    if training == 0:
        raise RankzeroError(f"validation: all {held:,} kept documents were held out ({validation_flags}) and none is "
                            "left to train on; lower --validation_split_percentage, or check that --dataset is not "
                            "the same data as --eval_dataset")


def nothing_left_message(stats: list[SourceStats]) -> str:
    docs_in = sum(s.docs_in for s in stats)
    if docs_in == 0:
        return f"sources: the sources {[s.spec for s in stats]} yielded no documents (empty files?)"
    dropped = total_dropped(stats)
    screened = {"benchmark_contamination", "pii_dump", "eval_overlap"} & set(dropped)
    stage = ("quality filter" if any(reason not in REMOVED_BY for reason in dropped)
             else "screen (--decontaminate, --pii)" if screened else "records→text")
    top = ", ".join(f"{reason}: {count:,}" for reason, count in dropped.most_common(5))
    return f"{stage}: all {docs_in:,} documents were removed ({top}); nothing is left to prepare"


def total_dropped(stats: list[SourceStats]) -> Counter:
    return sum((s.dropped for s in stats), Counter())


def eval_dataset_counts(stats: list[SourceStats]) -> dict | None:
    """What became of the --eval_dataset documents: read, held out, removed on the way (reason → count). The
    quality filter and dedup apply to them as to training data; unsaid, a filtered eval set looks whole."""
    evaluation = [s for s in stats if s.evaluation]
    if not evaluation:
        return None
    removed = {reason: count for reason, count in total_dropped(evaluation).most_common() if "(kept)" not in reason}
    return {"read": sum(s.docs_in for s in evaluation), "held_out": sum(s.validation_documents for s in evaluation),
            "removed": removed}


def reasons_text(removed: dict, limit: int = 4) -> str:
    """The first reasons (reason → count) and how many more, in one line."""
    shown = [f"{reason}: {count:,}" for reason, count in list(removed.items())[:limit]]
    return ", ".join(shown + ([f"{len(removed) - limit} more reasons"] if len(removed) > limit else []))


# What removes documents for each reason not the quality filter's (screen/screening.py's names: importing it
# loads the scanners); the checks' errors and the summary's warnings (report.py) name them so
REMOVED_BY = {"bad_record": "bad records", "empty": "empty documents", "exact_duplicate": "duplicates",
              "near_duplicate": "duplicates", "in_eval_dataset": "copies of --eval_dataset documents",
              "no_trainable_tokens": "SFT samples without an answer", "eval_overlap": "overlap with the eval set",
              "benchmark_contamination": "benchmark decontamination (--decontaminate)", "pii_dump": "the PII screen"}


def removal_cause(removed: dict) -> str:
    """What removed these documents (reason → count), in words."""
    causes = sorted({REMOVED_BY.get(reason, "the quality filter") for reason in removed if removed[reason]})
    return " and ".join(causes)


# ---------------------------------------------------------------------------------------------
# The manifest


def validation_manifest(stats: list[SourceStats], percentage: float | None, eval_dataset: list[str], *,
                        sequences: int, shards: int, tail_tokens: int) -> dict:
    """The manifest's "validation": what was held out, how it was chosen (--validation_split_percentage,
    --eval_dataset), its rows in `validation/`."""
    return {"dir": "validation", "documents": sum(s.validation_documents for s in stats),
            "tokens": sum(s.validation_tokens for s in stats) - tail_tokens, "sequences": sequences, "shards": shards,
            "tail_tokens_dropped": tail_tokens, "truncated": sum(s.validation_truncated for s in stats),
            "percentage": percentage, "eval_dataset": list(eval_dataset), "chosen_by": HOW_CHOSEN,
            "eval_dataset_documents": eval_dataset_counts(stats)}


def build_manifest(settings: ManifestSettings, stats: list[SourceStats], engine, training: dict, *, timings: dict,
                   worker_seconds: Counter, extra: dict | None = None, validation: dict | None = None) -> dict:
    """The manifest of a finished build (the handoff adds who built it and writes it last); `training`: the training
    rows' `sequences`, `shards` and `tail_tokens` left out."""
    sequences, shards, tail_tokens = training["sequences"], training["shards"], training["tail_tokens"]
    tokens_out = int(sum(s.tokens_out for s in stats)) - tail_tokens
    total_bytes = sum(s.bytes_in for s in stats)
    total_s = max(timings["total_s"], 1e-9)
    timings = {**timings, "encode_stage_seconds_summed_over_workers": {k: round(v, 3) for k, v in worker_seconds.items()}}
    sources = [_source_manifest(s, tokens_out + tail_tokens) for s in stats]
    return {
        "fingerprint": settings.fingerprint,
        "format_version": FORMAT_VERSION,
        "docs_in": sum(s.docs_in for s in stats),
        "docs_kept": sum(s.docs_kept for s in stats),
        "dropped": dict(sorted(total_dropped(stats).items())),
        "tokens": tokens_out,
        "sequences": sequences,
        "shards": shards,
        "max_seq_length": settings.max_seq_length,
        "packing": settings.packing,
        "mode": settings.mode,
        "chat_rendering": settings.chat_rendering,
        "columns": settings.columns,
        "tail_tokens_dropped": tail_tokens,
        "truncated": sum(s.truncated for s in stats),
        "validation": validation,
        "seed": settings.seed,
        "sources": sources,
        "tokenizer": settings.tokenizer,
        "tokenizer_engine": engine.describe(),
        "quality_filter": settings.quality_filter,
        "quality_settings": settings.quality_settings,
        "quality_samples": ("quality_samples.jsonl (the first documents each rule dropped: file, line, text, the values "
                            "the rule read against its thresholds)") if settings.quality_settings is not None else None,
        "dedup": settings.dedup,
        "near_dedup": None,  # the engine's ledger says how near dedup went (in `extra`)
        "settings": settings.settings,
        "timings": {k: (round(v, 3) if isinstance(v, float) else v) for k, v in timings.items()},
        "throughput": {"mb_per_s": round(total_bytes / 1e6 / total_s, 2), "tokens_per_s": round(tokens_out / total_s),
                       "docs_per_s": round(sum(s.docs_in for s in stats) / total_s, 1)},
        "bytes_in": total_bytes,
        "versions": versions(),
        **(extra or {}),
    }


def _source_manifest(stat: SourceStats, total_tokens_out: int) -> dict:
    entry = {k: v for k, v in asdict(stat).items() if k not in ("dropped", "files")}
    entry["dropped"] = dict(stat.dropped)
    if len(stat.files) > 1:
        entry["files"] = {path: {**counts, "dropped": dict(sorted(counts["dropped"].items()))}
                          for path, counts in stat.files.items()}
    entry["ratio"] = round(stat.ratio, 6)
    entry["share_of_output_tokens"] = round(stat.tokens_out / total_tokens_out, 6) if total_tokens_out else None
    return entry


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version(), "malloc": malloc.active()}
    for package in ("rankzero", "datasets", "tokenizers", "fastokens", "pyarrow", "numpy", "kiwipiepy", "ftfy"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
    return found
