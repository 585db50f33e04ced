"""What the masker found in one source's documents, summed for the manifest (pii.py masks; screen/screening.py sums).

    counts = PiiCounts(); counts.add(result, dropped)       # a pii.MaskResult, and whether the dump rule dropped it
    counts.merge(other); counts.describe()                  # the manifest's entry; counts.samples: pii_samples.jsonl
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from rankzero.data.screen.pii import PUBLIC, MaskResult


@dataclass
class PiiCounts:
    """What one source's documents gave: per detector spans masked (or counted, for public numbers),
    documents touched, candidates rejected by reason; documents dropped as dumps; a few blanked samples."""

    masked: Counter = field(default_factory=Counter)
    public: Counter = field(default_factory=Counter)
    documents: Counter = field(default_factory=Counter)  # detector -> documents with at least one span
    rejected: Counter = field(default_factory=Counter)  # "detector:reason" -> candidates
    dropped_documents: int = 0
    dropped_spans: Counter = field(default_factory=Counter)  # detector -> spans in the dropped dumps
    samples: list = field(default_factory=list)

    SAMPLES_PER_DETECTOR = 3

    def add(self, result: MaskResult, dropped: bool) -> None:
        for (name, reason), count in result.rejected.items():
            self.rejected[f"{name}:{reason}"] += count
        if dropped:
            self.dropped_documents += 1
            self.dropped_spans.update(result.masked)
            return
        self.masked.update(result.masked)
        self.public.update(result.public)
        self.documents.update(result.masked.keys() | result.public.keys())
        for name, context in result.samples:
            if sum(1 for sample in self.samples if sample["detector"] == name) < self.SAMPLES_PER_DETECTOR:
                self.samples.append({"detector": name, "context": context})

    def merge(self, other: "PiiCounts") -> None:
        for name in ("masked", "public", "documents", "rejected", "dropped_spans"):
            getattr(self, name).update(getattr(other, name))
        self.dropped_documents += other.dropped_documents
        for sample in other.samples:
            if sum(1 for s in self.samples if s["detector"] == sample["detector"]) < self.SAMPLES_PER_DETECTOR:
                self.samples.append(sample)

    def to_dict(self) -> dict:
        """A JSON-safe copy (a Ray task's counts travel in its meta file)."""
        return {"masked": dict(self.masked), "public": dict(self.public), "documents": dict(self.documents),
                "rejected": dict(self.rejected), "dropped_documents": self.dropped_documents,
                "dropped_spans": dict(self.dropped_spans), "samples": list(self.samples)}

    @classmethod
    def from_dict(cls, data: dict) -> "PiiCounts":
        counters = {name: Counter(data[name]) for name in ("masked", "public", "documents", "rejected", "dropped_spans")}
        return cls(**counters, dropped_documents=data["dropped_documents"], samples=list(data["samples"]))

    def describe(self) -> dict:
        """The manifest's entry (samples go to pii_samples.jsonl)."""
        detectors = sorted(self.masked.keys() | self.public.keys() | self.dropped_spans.keys())
        return {"spans_masked": {name: self.masked[name] for name in detectors if name not in PUBLIC},
                "spans_public_kept": {name: self.public[name] for name in PUBLIC if self.public[name]},
                "documents_touched": {name: self.documents[name] for name in detectors if self.documents[name]},
                "documents_dropped_as_dumps": self.dropped_documents,
                "spans_in_dropped_documents": dict(sorted(self.dropped_spans.items())),
                "candidates_rejected": dict(sorted(self.rejected.items()))}
