"""Examples of what each quality rule dropped, with the values it measured against its thresholds.

    taker = SampleTaker(quality_filter)                        # one per stage: SAMPLES_PER_RULE per rule and chunk
    samples = taker.take(chunk, numbers, texts, verdicts)      # [{rule, path, line, text, measures}]
    write_quality_samples(out_dir / "quality_samples.jsonl", [samples, ...])   # the first ones per rule, in order

The counts per rule in the manifest say how much a rule dropped; these lines say what it dropped and why,
so a threshold can be judged on the data: the source file and line (record number for record formats),
the first TEXT_CHARS characters, and every statistic the rule reads beside the threshold that dropped it.
The statistics are measured again for the sampled documents only, and only the family of the rule that
dropped them (Kiwi only for Kiwi's rules), in the first SAMPLED_LINES lines of each file (its cost on
a corpus where most documents are dropped, and on real text: bench/RESULTS.md, "First-hour fixes").
Kiwi's values come from its first sample of the document (kiwi_max_chars); a document dropped on its
longer re-read (kiwi_recheck_max_chars) may show values on the kept side of a threshold.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from rankzero.data.quality import characters, korean, mojibake, repetition, solicitation, words
from rankzero.data.quality.repetition import DUP_NGRAMS, TOP_NGRAMS

SAMPLES_PER_RULE = 5
TEXT_CHARS = 200
# Only a file's first lines (or a Ray task's) are sampled: enough for the first few of each rule, and a
# large file costs no more than its start (re-measuring every chunk's drops costs a few percent of a stage).
SAMPLED_LINES = 10_000

# rule → [(statistic, how the rule drops, the QualityConfig threshold)], as the rule modules test them.
MEASURES: dict[str, list[tuple[str, str, str]]] = {
    "mojibake": [("mojibake", "== 1 (broken after any repair; repair_mojibake:", "repair_mojibake")],
    "too_short": [("chars", "<", "min_chars")],
    "too_long": [("chars", ">", "max_chars")],
    "not_korean": [("hangul_letter_share", "<", "korean_min_hangul_letter_share")],
    "encoded_data": [("encoded_char_share", ">", "max_encoded_char_share")],
    "long_words": [("mean_word_chars", ">", "max_mean_word_chars"),
                   ("long_word_char_share", ">", "max_long_word_char_share")],
    "high_symbol_ratio": [("symbol_ratio", ">", "max_symbol_ratio")],
    "high_punctuation_ratio": [("punctuation_ratio", ">", "max_punctuation_ratio")],
    "high_digit_ratio": [("digit_ratio", ">", "max_digit_ratio")],
    "link_lines": [("link_line_fraction", ">", "max_link_line_fraction")],
    "placeholder_text": [("placeholder", "contains one of", "placeholder_phrases")],
    "boilerplate": [("boilerplate_line_fraction", ">", "max_boilerplate_line_fraction")],
    "dup_lines": [("dup_line_fraction", ">", "max_dup_line_fraction")],
    "dup_paragraphs": [("dup_paragraph_fraction", ">", "max_dup_paragraph_fraction")],
    "top_ngram_repetition": [(f"top_{n}gram_char_share", ">", f"max_top_{n}gram_char_share") for n in TOP_NGRAMS],
    "dup_ngram_repetition": [(f"dup_{n}gram_char_share", ">", f"max_dup_{n}gram_char_share") for n in DUP_NGRAMS],
    "gambling_ad": [("messenger_contact", "and", "gambling_terms"), ("gambling_terms", ">=", "min_gambling_terms")],
    "low_hangul_ratio": [("hangul_ratio", "<", "min_hangul_ratio")],
    "kiwi_few_stop_morphemes": [("stop_morphemes", "<", "min_stop_morphemes")],
    "kiwi_mostly_structure": [("prose_share", "<", "min_prose_share")],
    "kiwi_mean_morpheme_length": [("mean_morpheme_chars", "<", "min_mean_morpheme_chars"),
                                  ("mean_morpheme_chars", ">", "max_mean_morpheme_chars")],
    "kiwi_no_final_endings": [("final_ending_sentence_ratio", "<", "min_final_ending_sentence_ratio")],
    "kiwi_low_particle_ending_ratio": [("particle_ending_ratio", "<", "min_particle_ending_ratio")],
    "kiwi_word_order": [("word_order_pairs", ">=", "min_word_order_pairs"),
                        ("word_order_broken_ratio", ">", "max_word_order_broken_ratio")],
}
# The rule module whose statistics(text, config) measures each rule that is not about length, Hangul or Kiwi.
_FAMILY = {**dict.fromkeys(("encoded_data", "long_words"), words),
           **dict.fromkeys(("high_symbol_ratio", "high_punctuation_ratio", "high_digit_ratio", "link_lines"), characters),
           **dict.fromkeys(("placeholder_text", "boilerplate", "dup_lines", "dup_paragraphs", "top_ngram_repetition",
                            "dup_ngram_repetition"), repetition),
           "gambling_ad": solicitation}
_NGRAM_RULES = ("top_ngram_repetition", "dup_ngram_repetition")
_LISTS = ("placeholder_phrases", "gambling_terms")  # thresholds that are word lists: named, not printed
_SWITCHES = ("repair_mojibake",)


def measures(rule: str, statistics: dict, config) -> list[dict]:
    """What the rule read of one document: [{statistic, value, drops_if}], e.g. value 0.41 with drops_if
    "> max_dup_line_fraction 0.374" (n-gram limits as applied: x statute_ngram_factor for a statute)."""
    factor = config.statute_ngram_factor if rule in _NGRAM_RULES and statistics.get("statute_shaped") else 1.0
    found = []
    for statistic, comparison, name in MEASURES[rule]:
        threshold = getattr(config, name)
        if name in _SWITCHES:
            shown = f"{threshold})"
        elif name in _LISTS:
            shown = name
        else:
            shown = f"{name} {_number(threshold * factor if factor != 1.0 else threshold)}"
        if factor != 1.0:
            shown += f" (x statute_ngram_factor {_number(factor)})"
        found.append({"statistic": statistic, "value": _number(statistics.get(statistic)),
                      "drops_if": f"{comparison} {shown}"})
    return found


def _number(value):
    if isinstance(value, bool) or not isinstance(value, float):
        return value
    return round(value, 4)


class SampleTaker:
    """Samples the first SAMPLES_PER_RULE documents each rule drops in a chunk. Per chunk, not per worker:
    workers finish chunks out of order, and the engine keeps the first samples in source order, so the
    file is the same for every engine and worker count."""

    def __init__(self, quality_filter):
        self.quality_filter = quality_filter

    def take(self, chunk, numbers: list[int], texts: list[str], verdicts: list[str | None]) -> list[dict]:
        samples, taken = [], Counter()
        if chunk.first_line > SAMPLED_LINES:
            return samples
        for number, text, rule in zip(numbers, texts, verdicts):
            if rule is None or taken[rule] >= SAMPLES_PER_RULE:
                continue
            taken[rule] += 1
            statistics = self._statistics(rule, text)
            samples.append({"rule": rule, "path": chunk.path, "line": number, "text": text.strip()[:TEXT_CHARS],
                            "measures": measures(rule, statistics, self.quality_filter.config)})
        return samples


    def _statistics(self, rule: str, text: str) -> dict:
        """What the rule read, measured as the filter measures it: after mojibake repair, stripped."""
        if rule.startswith("kiwi_"):
            return self.quality_filter.statistics(text)
        config = self.quality_filter.config
        text, broken = mojibake.repair(text, config.repair_mojibake)
        text = text.strip()
        if rule in _FAMILY:
            return _FAMILY[rule].statistics(text, config)
        if rule in ("not_korean", "low_hangul_ratio"):
            return korean.hangul_statistics(text)
        return {"chars": len(text), "mojibake": float(broken == "mojibake")}


def write_quality_samples(path: Path, sample_lists) -> int:
    """The first SAMPLES_PER_RULE samples of each rule, in the order given (source order): one JSON line each."""
    taken: Counter = Counter()
    lines = []
    for samples in sample_lists:
        for sample in samples:
            if taken[sample["rule"]] < SAMPLES_PER_RULE:
                taken[sample["rule"]] += 1
                lines.append(json.dumps(sample, ensure_ascii=False))
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return len(lines)
