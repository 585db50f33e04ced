"""Korean quality filter: stage 3 of the data pipeline (records→text → **quality** → tokens).

    from rankzero.data.quality import QualityConfig, QualityFilter
    quality = QualityFilter(QualityConfig.from_yaml("configs/quality_ko.yaml"))  # once, in the parent
    reasons, texts = quality.judge_and_repair(texts)   # None = keep, else why (a name in REASONS)

One module per rule family, in the order they run:
  mojibake.py     UTF-8 read as Latin-1/cp1252: repaired with ftfy, or dropped
  words.py        machine text in any language: encoded blobs, minified dumps, character runs
  characters.py   symbol, punctuation and digit shares; link lines
  repetition.py   placeholders, boilerplate, repeated lines, paragraphs and n-grams
  solicitation.py gambling ads: a messenger @handle beside gambling terms
  korean.py       Korean documents: the Hangul gate, then one Kiwi pass over prose sentences and word order
  structure.py    which lines are list items, clauses, headings, turns, table rows (for korean.py)
config.py holds every threshold; filter.py runs the families. docs/quality.md gives the evidence.
"""

from rankzero.data.quality.config import QualityConfig
from rankzero.data.quality.filter import REASONS, UNJUDGED, QualityFilter

__all__ = ["REASONS", "UNJUDGED", "QualityConfig", "QualityFilter"]
