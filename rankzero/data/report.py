"""What a build tells people when it is done: per-source counts, the manifest and the summary.

    stats = [SourceStats.of(source, name) ...]         # per-source counts the engines fill in
    manifest = build_manifest(plan.manifest_settings(), stats, engine, ...,
                              validation=validation_manifest(stats, percentage, ...))

Both build engines report through these, so a prepare looks the same on one machine and on a cluster.
While it runs, progress.py prints how far it is.
"""

from __future__ import annotations

import logging
import platform
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rankzero import malloc
from rankzero.data import native
from rankzero.data.plan import FORMAT_VERSION, ManifestSettings
from rankzero.data.screen.pii import NameMasker
from rankzero.data.split import HOW_CHOSEN
from rankzero.errors import RankzeroError

logger = logging.getLogger(__name__)

UNTRAINABLE_WARN_SHARE = 0.02  # of the SFT samples read: more than noise (a few answerless chats) at this share
EVAL_REMOVED_WARN_SHARE = 0.1  # of the --eval_dataset documents: the evaluation no longer measures the set given


@dataclass
class SourceStats:
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


def total_dropped(stats: list[SourceStats]) -> Counter:
    dropped = Counter()
    for s in stats:
        dropped.update(s.dropped)
    return dropped


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


def validation_manifest(stats: list[SourceStats], percentage: float | None, eval_dataset: list[str], *,
                        sequences: int, shards: int, tail_tokens: int) -> dict:
    """The manifest's "validation": what was held out, how it was chosen (--validation_split_percentage,
    --eval_dataset), its rows in `validation/`."""
    return {"dir": "validation", "documents": sum(s.validation_documents for s in stats),
            "tokens": sum(s.validation_tokens for s in stats) - tail_tokens, "sequences": sequences, "shards": shards,
            "tail_tokens_dropped": tail_tokens, "truncated": sum(s.validation_truncated for s in stats),
            "percentage": percentage, "eval_dataset": list(eval_dataset), "chosen_by": HOW_CHOSEN,
            "eval_dataset_documents": eval_dataset_counts(stats)}


def eval_dataset_counts(stats: list[SourceStats]) -> dict | None:
    """What became of the --eval_dataset documents: read, held out, removed on the way (reason → count). The
    quality filter and dedup apply to them as to training data; unsaid, a filtered eval set looks whole."""
    evaluation = [s for s in stats if s.evaluation]
    if not evaluation:
        return None
    removed = Counter()
    for stat in evaluation:
        removed.update({reason: count for reason, count in stat.dropped.items() if count and "(kept)" not in reason})
    return {"read": sum(s.docs_in for s in evaluation), "held_out": sum(s.validation_documents for s in evaluation),
            "removed": dict(removed.most_common())}


def _reasons(removed: dict, limit: int = 4) -> str:
    shown = [f"{reason}: {count:,}" for reason, count in list(removed.items())[:limit]]
    return ", ".join(shown + ([f"{len(removed) - limit} more reasons"] if len(removed) > limit else []))


# What removes documents for each reason not the quality filter's (screen/screening.py's names: importing it
# loads the scanners)
REMOVED_BY = {"bad_record": "bad records", "empty": "empty documents", "exact_duplicate": "duplicates",
              "near_duplicate": "duplicates", "in_eval_dataset": "copies of --eval_dataset documents",
              "no_trainable_tokens": "SFT samples without an answer", "eval_overlap": "overlap with the eval set",
              "benchmark_contamination": "benchmark decontamination (--decontaminate)", "pii_dump": "the PII screen"}


def _removal_cause(removed: dict) -> str:
    causes = sorted({REMOVED_BY.get(reason, "the quality filter") for reason in removed if removed[reason]})
    return " and ".join(causes)


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
                            f"({_reasons(evaluation['removed'])}) by {_removal_cause(evaluation['removed'])}; nothing is "
                            f"left to evaluate on: give an eval set that passes ({flag} applies to it too), or leave "
                            "--eval_dataset out and hold out a share of --dataset with --validation_split_percentage")
    if held == 0:
        raise RankzeroError(f"validation: no document was held out ({validation_flags}, {training:,} documents kept); "
                            "raise --validation_split_percentage or give --eval_dataset")
    if training == 0:
        raise RankzeroError(f"validation: all {held:,} kept documents were held out ({validation_flags}) and none is "
                            "left to train on; lower --validation_split_percentage, or check that --dataset is not "
                            "the same data as --eval_dataset")


def build_manifest(settings: ManifestSettings, stats: list[SourceStats], engine, *, sequences: int, shards: int,
                   tail_tokens: int, timings: dict, worker_seconds: Counter, extra: dict | None = None,
                   validation: dict | None = None) -> dict:
    """The manifest of a finished build (the handoff adds who built it and writes it last)."""
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


def mixing_lines(sources: list[dict]) -> list[str]:
    """One line per weighted source that the mix subsamples or repeats: what a weight costs in data."""
    lines = []
    for source in sources:
        if source["evaluation"] or abs(source["ratio"] - 1) < 1e-6:
            continue
        available = source["docs_kept"] - source["validation_documents"]
        used = source["documents_out"]
        if source["ratio"] < 1:
            lines.append(f"{source['spec']}: {used:,} of its {available:,} documents used, {available - used:,} left "
                         f"out (ratio {source['ratio']:.2f})")
        else:
            lines.append(f"{source['spec']}: its {available:,} documents repeated {source['ratio']:.2f}x "
                         f"({used:,} in the output)")
    return lines


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version(), "malloc": malloc.active()}
    for package in ("rankzero", "datasets", "tokenizers", "fastokens", "pyarrow", "numpy", "kiwipiepy", "ftfy"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
    return found


def print_summary(manifest: dict, final: Path) -> None:
    """The published dataset in a few lines on stderr: what went in, what came out, where the time went."""
    timings = manifest["timings"]
    lines = [f"[prepare] published {final}",
             f"  documents  in {manifest['docs_in']:>12,}   kept {manifest['docs_kept']:>12,}",
             f"  tokens        {manifest['tokens']:>12,}   sequences {manifest['sequences']:>9,} x {manifest['max_seq_length']}"
             f"   (final partial block left out: {manifest['tail_tokens_dropped']:,} tokens)"]
    validation = manifest.get("validation")
    if validation:
        lines.append(f"  validation    {validation['tokens']:>12,}   sequences {validation['sequences']:>9,}   "
                     f"({validation['documents']:,} documents held out, in {final / validation['dir']})")
    evaluation = (validation or {}).get("eval_dataset_documents")
    if evaluation and evaluation["removed"]:
        specs = " ".join(validation["eval_dataset"])
        lines.append(f"  eval set   {specs}: {evaluation['read']:,} documents read, {evaluation['held_out']:,} held out, "
                     f"{sum(evaluation['removed'].values()):,} removed ({_reasons(evaluation['removed'])})")
    if manifest.get("chat_rendering"):
        lines.append(f"  chats      rendered with {manifest['chat_rendering']}")
    if manifest.get("truncated"):
        lines.append(f"  truncated  {manifest['truncated']:>12,}   samples longer than a row, cut at their end")
    for reason, count in manifest["dropped"].items():
        lines.append(f"  dropped {reason:<28} {count:>10,}")
    lines += [f"  mixing     {line}" for line in mixing_lines(manifest["sources"])]
    lines.append("  seconds    " + "  ".join(f"{k[:-2]} {v:.2f}" for k, v in timings.items() if k.endswith("_s")))
    lines.append(f"  throughput {manifest['throughput']['mb_per_s']} MB/s, {manifest['throughput']['tokens_per_s']:,} tokens/s")
    print("\n".join(lines), file=sys.stderr, flush=True)
    for warning in (untrainable_warning(manifest), eval_removed_warning(manifest), passes_warning()):
        if warning:
            logger.warning(warning)


def passes_warning() -> str | None:
    """A warning when the compiled passes are not installed: said once, here, for the whole prepare (its workers run
    the numpy references without a word)."""
    reason = native.missing()
    if reason is None:
        return None
    return (f"{reason}. Near dedup, --decontaminate and --pii mask ran their numpy versions: the same output, more "
            "CPU time (bench/RESULTS.md, 'The passes built at install').")


def eval_removed_warning(manifest: dict) -> str | None:
    """A warning when the prepare took a large share out of --eval_dataset: the evaluation then measures
    another set than the one given."""
    validation = manifest.get("validation") or {}
    evaluation = validation.get("eval_dataset_documents")
    removed = sum(evaluation["removed"].values()) if evaluation else 0
    if not removed or removed / evaluation["read"] < EVAL_REMOVED_WARN_SHARE:
        return None
    return (f"--eval_dataset {' '.join(validation['eval_dataset'])}: the prepare removed {removed:,} of its "
            f"{evaluation['read']:,} documents ({removed / evaluation['read']:.0%}: {_reasons(evaluation['removed'])}), "
            f"by {_removal_cause(evaluation['removed'])}; the evaluation runs on the other {evaluation['held_out']:,}")


def untrainable_warning(manifest: dict) -> str | None:
    """A warning when many SFT samples had nothing to train on: a --max_seq_length too short for the prompts,
    or chats without answers, usually a mistake rather than noise."""
    count, docs_in = manifest["dropped"].get("no_trainable_tokens", 0), manifest["docs_in"]
    if not docs_in or count / docs_in < UNTRAINABLE_WARN_SHARE:
        return None
    return (f"{count:,} of {docs_in:,} SFT samples ({count / docs_in:.1%}) had no token to train on and were dropped "
            f"(no_trainable_tokens): a prompt that fills --max_seq_length {manifest['max_seq_length']} and cuts the "
            "answer off, or a chat with no (or an empty) assistant turn; raise --max_seq_length or check the data")
