"""QualityFilter: runs the rule families in order, Kiwi last and only on Korean survivors whose surface
leaves the verdict open.

    quality = QualityFilter(config)                      # once, in the parent process (Kiwi ~2-4 s)
    reasons, texts = quality.judge_and_repair(texts)     # None = keep; texts with mojibake repaired
    reasons = quality.judge_batch(texts)

Order (the first failing rule is the reason): mojibake (mojibake.py) → length → word shape (words.py)
→ character shares (characters.py) → repetition (repetition.py) → gambling ads (solicitation.py) →
for Korean documents, the Hangul gate, then the surface statistics (clear prose is kept there) and,
for the rest, one Kiwi pass over prose and word order (korean.py, structure.py). Every document is judged after its
mojibake is repaired; the repaired text is what the pipeline hashes and tokenizes.
"""

from __future__ import annotations

import warnings
from collections import deque

from rankzero.data.quality import characters, korean, mojibake, repetition, solicitation, words
from rankzero.data.quality.config import QualityConfig

# Reasons in the order the rules run.
REASONS: tuple[str, ...] = (
    "mojibake",
    "too_short",
    "too_long",
    "not_korean",
    "encoded_data",
    "long_words",
    "high_symbol_ratio",
    "high_punctuation_ratio",
    "high_digit_ratio",
    "link_lines",
    "placeholder_text",
    "boilerplate",
    "dup_lines",
    "dup_paragraphs",
    "top_ngram_repetition",
    "dup_ngram_repetition",
    "gambling_ad",
    "low_hangul_ratio",
    "kiwi_few_stop_morphemes",
    "kiwi_mostly_structure",
    "kiwi_mean_morpheme_length",
    "kiwi_no_final_endings",
    "kiwi_low_particle_ending_ratio",
    "kiwi_word_order",
)

# Families every document meets, cheapest first: each has statistics(text, config) and reason(stats, config).
_FAMILIES = (words, characters, repetition, solicitation)
_NEEDS_KIWI = "needs Kiwi"  # a sentinel, never returned
UNJUDGED = object()  # in judge_and_repair's `known`: no verdict yet


def length_reason(text: str, config: QualityConfig) -> str | None:
    if len(text) < config.min_chars:
        return "too_short"
    if len(text) > config.max_chars:
        return "too_long"
    return None


def _cascade(config: QualityConfig) -> bool:
    """Whether the surface may keep documents without Kiwi (korean.surface_keeps) under these thresholds."""
    if not config.kiwi_cascade:
        return False
    if not korean.surface_applies(config):
        warnings.warn("quality filter: kiwi_cascade is ignored, Kiwi reads every Korean document: the Kiwi "
                      "thresholds are neither the defaults nor more lenient ones, which the surface bars were "
                      "measured against (docs/quality.md); set kiwi_cascade: false to silence this", stacklevel=3)
        return False
    return True


class QualityFilter:
    """Judges documents; build once in the parent process, then fork (see `__init__`)."""

    def __init__(self, config: QualityConfig | None = None, threads: int = 0):
        """`threads=0`: no Kiwi thread pool, safe to fork (each forked worker analyses one document at a
        time). `threads=N`: Kiwi analyses a batch on N threads of its own — build such a filter in the
        process that uses it, never before a fork (a forked Kiwi thread pool hangs)."""
        from kiwipiepy import Kiwi

        mojibake.require_ftfy()  # now, not on the first broken document hours into a prepare
        self.config = config or QualityConfig()
        self.threads = threads
        self._cascade = _cascade(self.config)
        with warnings.catch_warnings():
            # kiwipiepy >= 0.21 warns that num_workers=0 changed meaning; "no thread pool" is what we want.
            warnings.simplefilter("ignore", DeprecationWarning)
            self._kiwi = Kiwi(num_workers=threads)
        # The first call loads the model lazily (~2 s); do it here, before the pipeline forks, so every
        # worker shares the loaded model copy-on-write instead of loading its own.
        self._kiwi.tokenize("모델을 미리 불러 둡니다.")
        characters.class_counts("표를 미리 만들어 둡니다.")  # the character-class table, shared the same way

    def with_config(self, config: QualityConfig) -> "QualityFilter":
        """Another filter with other thresholds, sharing this one's Kiwi (no second 2-4 s model load)."""
        other = object.__new__(QualityFilter)
        other._kiwi, other.threads, other.config = self._kiwi, self.threads, config
        other._cascade = _cascade(config)
        return other

    def __reduce__(self):
        # Kiwi does not pickle; a spawned worker rebuilds the filter from its config instead.
        return (QualityFilter, (self.config, self.threads))

    def judge_and_repair(self, texts: list[str], known: list | None = None) -> tuple[list[str | None], list[str]]:
        """For each text: None (keep) or the name (from REASONS) of the first rule it failed; and the
        text to keep — the same object unless its mojibake was repaired.

        A verdict is a function of the text alone, so a text is judged once: a copy of an earlier text in `texts`
        takes its verdict and repair, and `known` (per text: a verdict the same text got before, or UNJUDGED) gives a
        text its verdict outright; a kept one is still repaired.

        The cheap rules run first on each document. A Korean survivor whose surface is clear prose
        (korean.surface_keeps) is kept there; Kiwi reads a sample of every other one (korean.kiwi_sample). A sample decides only when it keeps the document with every statistic
        clear of its threshold; otherwise Kiwi reads the whole document (up to
        `kiwi_recheck_max_chars`), and that reading decides.
        """
        config = self.config
        verdicts: list[str | None] = [None] * len(texts)
        kept_texts: list[str] = list(texts)
        first: dict[str, int] = {}  # each text's first index
        copies: list[tuple[int, int]] = []

        def korean_survivors():
            # A generator: Kiwi's pool pulls from it, so the cheap rules of the next documents run on
            # this thread while the pool analyses the previous ones.
            for index, text in enumerate(texts):
                verdict = UNJUDGED if known is None else known[index]
                if verdict is UNJUDGED:
                    earlier = first.setdefault(text, index)
                    if earlier != index:
                        copies.append((index, earlier))
                        continue
                elif verdict is not None:
                    verdicts[index] = verdict
                    continue
                text, reason = mojibake.repair(text, config.repair_mojibake)
                kept_texts[index] = text
                if verdict is None:
                    continue
                stripped = text.strip()
                reason = reason or self._reason_before_kiwi(stripped)
                if reason is not _NEEDS_KIWI:
                    verdicts[index] = reason
                elif not (self._cascade and korean.surface_keeps(korean.surface_statistics(stripped))):
                    yield index, stripped

        recheck = []
        for index, text, stats in self._kiwi_statistics(korean_survivors(), config.kiwi_max_chars):
            verdicts[index] = korean.kiwi_reason(stats, config)
            if len(text) > config.kiwi_max_chars and (verdicts[index] or korean.near_threshold(stats, config)):
                recheck.append((index, text))
        for index, _, stats in self._kiwi_statistics(recheck, config.kiwi_recheck_max_chars):
            verdicts[index] = korean.kiwi_reason(stats, config)
        for index, earlier in copies:
            verdicts[index] = verdicts[earlier]
            if kept_texts[earlier] is not texts[earlier]:  # repaired; else the copy stays its own object (not repaired)
                kept_texts[index] = kept_texts[earlier]
        return verdicts, kept_texts

    def _kiwi_statistics(self, items, max_chars: int):
        """(index, text, statistics) for each (index, text) in `items`, from a sample of at most
        `max_chars`. With `threads`, Kiwi's pool analyses ahead while this thread turns each finished
        analysis into statistics (results come back in order)."""
        pending: deque = deque()

        def samples():
            for index, text in items:
                sample = korean.kiwi_sample(text, max_chars, self.config.kiwi_windows)
                pending.append((index, text, sample))
                yield sample

        if self.threads:
            analyses = self._kiwi.tokenize(samples())
        else:  # no pool (Kiwi's batch API needs one): one document at a time
            analyses = (self._kiwi.tokenize(sample) for sample in samples())
        for tokens in analyses:
            index, text, sample = pending.popleft()
            yield index, text, korean.prose_statistics(sample, tokens, self.config)

    # The pipeline's documents are (text, mask) segments; it asks for them repaired through the filter.
    repaired_segments = staticmethod(mojibake.repaired_segments)

    def judge_batch(self, texts: list[str]) -> list[str | None]:
        return self.judge_and_repair(texts)[0]

    def judge(self, text: str) -> str | None:
        return self.judge_batch([text])[0]

    def _reason_before_kiwi(self, text: str) -> str | None:
        """Every rule but Kiwi's: a reason, None (keep: not Korean), or _NEEDS_KIWI."""
        config = self.config
        reason = length_reason(text, config)
        if reason:
            return reason
        hangul = korean.hangul_statistics(text)
        is_korean = korean.is_korean(hangul, config)
        if config.drop_non_korean and not is_korean:
            return "not_korean"
        for family in _FAMILIES:
            reason = family.reason(family.statistics(text, config), config)
            if reason:
                return reason
        if not is_korean:
            return None
        return korean.gate_reason(hangul, config) or _NEEDS_KIWI

    def statistics(self, text: str) -> dict:
        """Every measured value of one document (after mojibake repair), no early exit: for tuning."""
        config = self.config
        text, reason = mojibake.repair(text, config.repair_mojibake)
        text = text.strip()
        stats = {"chars": len(text), "mojibake": float(reason == "mojibake")}
        hangul = korean.hangul_statistics(text)
        stats.update(hangul)
        for family in _FAMILIES:
            stats.update(family.statistics(text, config))
        stats["korean"] = korean.is_korean(hangul, config)
        if stats["korean"]:
            stats.update(korean.surface_statistics(text))
            sample = korean.kiwi_sample(text, config.kiwi_max_chars, config.kiwi_windows)
            stats.update(korean.prose_statistics(sample, self._kiwi.tokenize(sample), config))
        return stats
