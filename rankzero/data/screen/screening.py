"""The screen: in the stage, between the quality filter and the tokenizer, personal information is masked
(`--pii mask`, pii.py) and documents holding a benchmark item are dropped (`--decontaminate`,
decontaminate.py). The same on both build engines.

    screen = Screen.of(stage_config)                   # None with --pii off and no --decontaminate
    kept, documents, report = screen(documents, texts, count_tokens)   # per chunk, in the stage
    totals = ScreenTotals(specs, pii, benchmarks, eval_overlap)   # the builder or Ray driver; benchmarks: the plan's
    totals.add(source_index, report)                   # in document order (chunks, or Ray tasks)
    manifest_extra = totals.finish(stats, out_dir)     # pii_samples.jsonl, contaminated_items.jsonl

Exact and near dedup decide from the text as read (the stage hashes it before the screen masks it), so
`--pii` never changes which copies are kept. The screen's drops count per source as `pii_dump` and
`benchmark_contamination`. Every source is screened alike, --eval_dataset ones included: evaluation text
holding a benchmark item would score the model on that item too.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from pathlib import Path

import numpy as np
import xxhash

from rankzero.data.native.constants import NUMBERS
from rankzero.data.screen.decontaminate import (COMMON_ITEMS, MIN_HANGUL, MIN_SHARE, N, ContaminationIndex,
                                                benchmark_files, read_benchmarks)
from rankzero.data.screen.eval_overlap import EVAL_OVERLAP, EvalOverlap
from rankzero.data.screen.pii import (DUMP_MAX_CHARS_PER_SPAN, DUMP_MIN_SPANS, PLACEHOLDERS, PUBLIC, MaskResult,
                                      PiiMasker, is_dump)
from rankzero.data.screen.pii_counts import PiiCounts
from rankzero.data.screen.scan import marks_of

PII_DUMP, CONTAMINATED = "pii_dump", "benchmark_contamination"


def load_index(paths: tuple[str, ...]) -> ContaminationIndex:
    """The index of the benchmark files, built once per process and version of the files (the plan checks
    the files with it first; the local engine's stage then reuses it)."""
    stamps = tuple((str(path), path.stat().st_size, path.stat().st_mtime_ns) for path in benchmark_files(paths))
    return _index(paths, stamps)


@functools.lru_cache(maxsize=2)
def _index(paths: tuple[str, ...], stamps: tuple) -> ContaminationIndex:
    return ContaminationIndex(read_benchmarks(paths))


def document_id(text: str) -> str:
    """How contaminated_items.jsonl names a document: xxh3-64 of its text as read (no raw text is written)."""
    return xxhash.xxh3_64_hexdigest(text.encode())


class Screen:
    def __init__(self, masker: PiiMasker | None, index: ContaminationIndex | None, overlap: EvalOverlap | None):
        self.masker = masker
        self.index = index
        self.overlap = overlap

    @classmethod
    def of(cls, config, eval_overlap: dict | None = None) -> Screen | None:
        """`eval_overlap`: what eval_overlap.write_evaluation wrote (with a validation split)."""
        masker = PiiMasker() if config.pii == "mask" else None
        index = load_index(tuple(config.decontaminate)) if config.decontaminate else None
        overlap = EvalOverlap(eval_overlap) if eval_overlap else None
        return cls(masker, index, overlap) if masker or index or overlap else None

    def __call__(self, documents: list, texts: list[str], count_tokens,
                 source_index: int = 0) -> tuple[np.ndarray, list, dict]:
        """(kept: a bool per document, the kept documents masked, the chunk's report). `texts` are the
        documents' joined segments as read; `count_tokens(documents)` gives each one's token count (only the
        contaminated ones are counted: the manifest reports the tokens each benchmark removed). The report's
        "counted" (a bool per kept document: the masker counted something in it) is for the stage, which takes it
        out before the report goes on (the rest is JSON-safe)."""
        keep = np.ones(len(documents), dtype=bool)
        marks = runs = None  # what the masker may find per document (native/constants.py), where its number clusters lie
        report = {"pii": None, "contaminated": [], "documents": Counter(), "tokens": Counter(), "dropped": Counter()}
        if self.index is not None:
            found, marks, runs = self.index.find_with_marks(texts)
            dropped = [number for number, items in enumerate(found) if items]
            tokens = count_tokens([documents[number] for number in dropped]) if dropped else []
            report["dropped"][CONTAMINATED] = len(dropped)
            for number, length in zip(dropped, tokens):
                keep[number] = False
                items = [self.index.items[i] for i in found[number]]
                report["contaminated"] += [{"benchmark": item.benchmark, "id": item.id,
                                            "document": document_id(texts[number])} for item in items]
                for benchmark in sorted({item.benchmark for item in items}):
                    report["documents"][benchmark] += 1
                    report["tokens"][benchmark] += int(length)
        if self.overlap is not None:
            candidates = np.flatnonzero(keep)
            overlapping = candidates[self.overlap([texts[i] for i in candidates.tolist()], source_index)]
            keep[overlapping] = False
            report["dropped"][EVAL_OVERLAP] = len(overlapping)
        if self.masker is None:
            kept = [documents[number] for number in np.flatnonzero(keep).tolist()]
            report["counted"] = np.zeros(len(kept), dtype=bool)
            return keep, kept, report
        if marks is None:  # no decontamination pass: the same marks from a pass of their own
            marks, runs = marks_of(texts)
        counts, kept, counted = PiiCounts(), [], []
        for number in np.flatnonzero(keep).tolist():
            if not marks[number]:  # most documents: nothing the masker looks for
                kept.append(documents[number])
                counted.append(False)
                continue
            numbers = (int(runs[number, 0]), int(runs[number, 1])) if marks[number] & NUMBERS else False
            segments, result = self._mask(documents[number], numbers, int(marks[number]))
            if result is None:  # most documents: nothing found, nothing to count
                kept.append(segments)
                counted.append(False)
                continue
            dump = is_dump(result.spans, len(texts[number]))
            counts.add(result, dropped=dump)
            if dump:
                keep[number] = False
            else:
                kept.append(segments)
                counted.append(True)
        report["pii"] = counts.to_dict()
        report["dropped"][PII_DUMP] = counts.dropped_documents
        report["counted"] = np.array(counted, dtype=bool)  # per kept document: the masker counted something in it
        return keep, kept, report

    def _mask(self, segments: list, numbers: bool | tuple[int, int], marks: int) -> tuple[list, MaskResult | None]:
        """Mask each segment (an SFT sample's turns keep their label masks); one result for the document, None
        where nothing was found. `numbers=False`: the document's joined text holds no number cluster, so none of
        its segments does; (start, end): its clusters lie there (offsets in the joined text: each of several
        segments is scanned). `marks`: the joined text's (pii.PiiMasker.find), exact for a document of one
        segment; of several, a segment looks for itself."""
        if len(segments) == 1:
            text, trainable = segments[0]
            spans, rejected = self.masker.find(text, numbers, marks)
            if not (spans or rejected):
                return segments, None
            result = self.masker.apply(text, spans, rejected)
            return [(result.text, trainable)], result
        total, masked = MaskResult(""), []
        for text, trainable in segments:
            result = self.masker.mask(text, bool(numbers))
            masked.append((result.text, trainable))
            total.masked.update(result.masked)
            total.public.update(result.public)
            total.rejected.update(result.rejected)
            total.samples = total.samples or result.samples
        return masked, total if total.masked or total.public or total.rejected else None


def combine(reports: list[dict]) -> dict | None:
    """One report for several chunks' (a Ray task's), JSON-safe, in their order."""
    reports = [report for report in reports if report]
    if not reports:
        return None
    pii = None
    if reports[0]["pii"] is not None:
        pii = PiiCounts()
        for report in reports:
            pii.merge(PiiCounts.from_dict(report["pii"]))
    documents, tokens = Counter(), Counter()
    for report in reports:
        documents.update(report["documents"])
        tokens.update(report["tokens"])
    return {"pii": pii.to_dict() if pii else None, "documents": dict(documents), "tokens": dict(tokens),
            "contaminated": [row for report in reports for row in report["contaminated"]]}


class ScreenTotals:
    """The builder's sums of the chunks' reports, per source, in document order on either engine."""

    def __init__(self, specs: list[str], pii: bool, benchmarks: dict | None, eval_overlap: bool):
        """`specs`: the sources' specs, in order; `pii`: --pii mask; `benchmarks`: what the --decontaminate
        index holds (`ContaminationIndex.describe`, the plan's `benchmarks`), None without it; `eval_overlap`:
        a validation split is made."""
        self.specs = specs
        self.masked = pii
        self.benchmarks = benchmarks
        self.eval_overlap = eval_overlap
        self.pii = [PiiCounts() for _ in specs]
        self.dropped = [Counter() for _ in specs]  # benchmark -> documents
        self.tokens = [Counter() for _ in specs]  # benchmark -> tokens of those documents
        self.rows: list[dict] = []

    def add(self, source_index: int, report: dict | None) -> None:
        if not report:
            return
        if report["pii"] is not None:
            self.pii[source_index].merge(PiiCounts.from_dict(report["pii"]))
        for benchmark, count in report["documents"].items():
            self.dropped[source_index][benchmark] += count
        self.tokens[source_index].update(report["tokens"])
        self.rows += [{**row, "source": self.specs[source_index]} for row in report["contaminated"]]

    def finish(self, stats, out_dir: Path) -> dict:
        """The manifest's `pii` and `decontamination` entries; writes the two sample files beside it."""
        extra = {}
        if self.masked:
            total = PiiCounts()
            for counts in self.pii:
                total.merge(counts)
            _write_jsonl(out_dir / "pii_samples.jsonl",
                         [{**sample, "source": stat.spec} for counts, stat in zip(self.pii, stats)
                          for sample in counts.samples])
            extra["pii"] = {
                "setting": "mask", "placeholders": PLACEHOLDERS, "public_counted_not_masked": list(PUBLIC),
                "dump_rule": f"a document with >= {DUMP_MIN_SPANS} masked spans and < {DUMP_MAX_CHARS_PER_SPAN} "
                             "characters per span is dropped (pii_dump)",
                "total": total.describe(), "samples_file": "pii_samples.jsonl",
                "per_source": {stat.spec: counts.describe() for counts, stat in zip(self.pii, stats)}}
        else:
            extra["pii"] = {"setting": "off"}
        if self.eval_overlap:
            extra["eval_overlap"] = {
                "documents_dropped": sum(stat.dropped.get(EVAL_OVERLAP, 0) for stat in stats),
                "rule": "a training document holding at least half of the word 8-grams of a held-out document "
                        "(a near-copy, or a page containing it), or its whole text spacing-blind, is dropped; "
                        "whatever --dedup says"}
        if self.benchmarks is not None:
            found: dict[str, set] = {}
            for row in self.rows:
                found.setdefault(row["benchmark"], set()).add(row["id"])
            benchmarks = {name: dict(entry) for name, entry in self.benchmarks.items()}
            for name, entry in benchmarks.items():
                entry.update(items_found=len(found.get(name, ())),
                             documents_dropped=sum(counts[name] for counts in self.dropped),
                             tokens_dropped=sum(counts[name] for counts in self.tokens))
            _write_jsonl(out_dir / "contaminated_items.jsonl", self.rows)
            extra["decontamination"] = {
                "benchmarks": benchmarks, "items_file": "contaminated_items.jsonl",
                "rules": {"word_ngram": N, "min_share_of_question_ngrams": MIN_SHARE,
                          "ngram_or_question_common_to_items": COMMON_ITEMS, "whole_question_min_hangul": MIN_HANGUL,
                          "sources": "every source, --eval_dataset ones included"},
                "per_source": {stat.spec: dict(counts) for counts, stat in zip(self.dropped, stats) if counts}}
        return extra


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
