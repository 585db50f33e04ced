"""Korean quality filter: stage 3 of the data pipeline (records→text → **quality** → tokens).

    from rankzero.data.quality import QualityConfig, QualityFilter
    quality = QualityFilter(QualityConfig.from_yaml("configs/quality_ko.yaml"))  # once, in the parent
    reasons = quality.judge_batch(texts)   # None = keep, else why it was dropped (a name in REASONS)

Every document first goes through cheap, language-agnostic checks (length, symbol/punctuation/
digit/URL shares, boilerplate and placeholder text, duplicate lines and paragraphs, n-gram
repetition), tuned so that ordinary English prose and source code pass. A document whose letters
are mostly Hangul is "Korean": it then needs enough Hangul and punctuated lines, and finally gets
ONE Kiwi pass (`split_into_sents(text, return_tokens=True)`) from which every morphological
statistic is computed: distinct stop morphemes, mean morpheme length, alphabetic-token share, the
share of sentences that end in a final ending, and the share of particles and endings among Korean
morphemes. Kiwi costs 30-50x more CPU per byte than the rest, so it only sees Korean survivors.

The pipeline builds one `QualityFilter` in the parent process and forks its workers; the Kiwi
instance is built without a thread pool (`num_workers=0`) because a pooled Kiwi hangs forked
children. Thresholds, their sources and the labelled sample they were tuned on: docs/quality.md.
"""

from __future__ import annotations

import re
import warnings
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import yaml

# FineWeb-2's kor_Hang stop morphemes (Kiwi forms). "했", "한" and "인" never come out of Kiwi as one
# morpheme (하+었, 하+ᆫ, 이+ᆫ); they are kept so the list stays the published one.
STOP_MORPHEMES = ("의", "다", "이", "는", "에", "을", "한", "년", "하", "은", "를", "했", "고", "에서", "가",
                  "있", "으로", "인", "월", "로", "되")

# A line holding one of these is boilerplate (C4-style line markers); lower-cased before matching.
BOILERPLATE_PHRASES = (
    "쿠키를 사용", "쿠키 사용에 동의", "쿠키 정책", "쿠키 설정", "uses cookies", "use cookies", "cookie policy",
    "cookie settings", "accept all cookies", "all rights reserved", "copyright ©",
    "copyright(c)", "copyright (c)", "무단 전재", "무단전재", "재배포 금지", "재배포금지",
    "개인정보처리방침", "개인정보 처리방침", "이용약관", "사업자등록번호", "통신판매업",
    "아이디/비밀번호 찾기", "아이디 찾기", "비밀번호 찾기", "아이디 저장", "자동 로그인", "로그인 회원가입",
    "로그인 | 회원가입",
    "javascript를 활성화", "자바스크립트를 활성화", "enable javascript",
)

# A document containing one of these is template filler, whatever else it holds (C4 drops them).
PLACEHOLDER_PHRASES = ("lorem ipsum", "dolor sit amet", "consectetur adipiscing")


@dataclass
class QualityConfig:
    """Every threshold of the filter. Shares are in [0, 1]; lengths in characters (code points).

    Defaults start from FineWeb-2's kor_Hang filter and were tuned on data/quality_sample.jsonl
    (bench/quality_eval.py); configs/quality_ko.yaml spells out the same values.
    """

    # Language-agnostic checks (every document).
    min_chars: int = 30
    max_chars: int = 1_000_000
    max_symbol_ratio: float = 0.10          # emoji, dingbats, box/arrow/shape symbols per non-space char
    max_punctuation_ratio: float = 0.60     # every non-alphanumeric char, ASCII punctuation included
    max_digit_ratio: float = 0.30
    max_url_ratio: float = 0.25             # characters inside URLs per non-space char
    max_boilerplate_line_fraction: float = 0.5
    boilerplate_phrases: list[str] = field(default_factory=lambda: list(BOILERPLATE_PHRASES))
    placeholder_phrases: list[str] = field(default_factory=lambda: list(PLACEHOLDER_PHRASES))
    max_dup_line_fraction: float = 0.374
    max_dup_paragraph_fraction: float = 0.30
    max_top_2gram_char_share: float = 0.282
    max_top_3gram_char_share: float = 0.228
    max_top_4gram_char_share: float = 0.185
    max_dup_5gram_char_share: float = 0.201
    max_dup_6gram_char_share: float = 0.186
    max_dup_7gram_char_share: float = 0.171
    max_dup_8gram_char_share: float = 0.157
    max_dup_9gram_char_share: float = 0.142
    max_dup_10gram_char_share: float = 0.127
    ngram_max_chars: int = 100_000
    # Which documents are Korean, and what to do with the others.
    korean_min_hangul_letter_share: float = 0.5
    drop_non_korean: bool = False
    # Korean documents only.
    min_hangul_ratio: float = 0.40          # Hangul per non-space char
    min_line_punctuation_ratio: float = 0.0
    kiwi_max_chars: int = 8_000
    min_stop_morphemes: int = 2
    stop_morphemes: list[str] = field(default_factory=lambda: list(STOP_MORPHEMES))
    min_mean_morpheme_chars: float = 1.0
    max_mean_morpheme_chars: float = 3.0
    min_alphabetic_token_share: float = 0.70
    min_final_ending_sentence_ratio: float = 0.40
    min_particle_ending_ratio: float = 0.15

    def __post_init__(self) -> None:
        problems = [f"{spec.name}={getattr(self, spec.name)!r} must be between 0 and 1"
                    for spec in fields(self) if spec.name.endswith(_SHARE_SUFFIXES)
                    and not 0.0 <= getattr(self, spec.name) <= 1.0]
        if self.min_chars > self.max_chars:
            problems.append(f"min_chars={self.min_chars} is above max_chars={self.max_chars}")
        if self.min_mean_morpheme_chars > self.max_mean_morpheme_chars:
            problems.append("min_mean_morpheme_chars is above max_mean_morpheme_chars")
        if self.kiwi_max_chars < 100 or self.ngram_max_chars < 100:
            problems.append("kiwi_max_chars and ngram_max_chars must be at least 100")
        if problems:
            raise ValueError("invalid quality config: " + "; ".join(problems))

    @classmethod
    def from_yaml(cls, path) -> "QualityConfig":
        """Defaults overridden by a YAML mapping; every unknown key or wrong type is reported at once."""
        path = Path(path)
        with open(path, encoding="utf-8") as handle:
            loaded = yaml.safe_load(handle)
        if loaded is None:
            return cls()
        if not isinstance(loaded, dict):
            raise ValueError(f"{path}: expected a mapping of quality thresholds, got {type(loaded).__name__}")
        defaults = {spec.name: getattr(cls(), spec.name) for spec in fields(cls)}
        values, problems = {}, []
        for key, value in loaded.items():
            if key not in defaults:
                problems.append(f"unknown key {key!r} (valid keys: {', '.join(defaults)})")
                continue
            checked = _coerce(value, defaults[key])
            if checked is None:
                problems.append(f"{key}: expected {_type_name(defaults[key])}, got {value!r}")
            else:
                values[key] = checked
        if problems:
            raise ValueError(f"{path}: " + "; ".join(problems))
        try:
            return cls(**values)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from None

    def to_dict(self) -> dict:
        """Plain JSON-serialisable values: they enter the dataset fingerprint and the manifest."""
        return asdict(self)


_SHARE_SUFFIXES = ("_ratio", "_share", "_fraction")


def _coerce(value, default):
    """`value` converted to the default's type, or None when it does not fit (bool is not a number)."""
    if isinstance(default, bool):
        return value if isinstance(value, bool) else None
    if isinstance(default, int):
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(default, float):
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if isinstance(default, list):
        ok = isinstance(value, list) and all(isinstance(item, str) for item in value)
        return list(value) if ok else None
    return None


def _type_name(default) -> str:
    return "a list of strings" if isinstance(default, list) else f"a {type(default).__name__}"


# Reasons in the order the checks run (the first failing one is reported).
REASONS: tuple[str, ...] = (
    "too_short",
    "too_long",
    "not_korean",
    "high_symbol_ratio",
    "high_punctuation_ratio",
    "high_digit_ratio",
    "high_url_ratio",
    "placeholder_text",
    "boilerplate",
    "dup_lines",
    "dup_paragraphs",
    "top_ngram_repetition",
    "dup_ngram_repetition",
    "low_hangul_ratio",
    "low_line_punctuation",
    "kiwi_few_stop_morphemes",
    "kiwi_mean_morpheme_length",
    "kiwi_low_alphabetic_tokens",
    "kiwi_no_final_endings",
    "kiwi_low_particle_ending_ratio",
)

_WHITESPACE = re.compile(r"\s")
_HANGUL = re.compile(r"[\uac00-\ud7a3\u3131-\u318e]")    # syllables and compatibility jamo (ㅋㅋ, ㅠㅠ)
_LETTER = re.compile(r"[^\W\d_]")
_DIGIT = re.compile(r"\d")
_PUNCTUATION = re.compile(r"[^\w\s]")
# Symbols = non-alphanumeric, non-ASCII, and not the punctuation Korean prose uses (· … 「」 ‘’ “” – —).
_SYMBOL = re.compile(r"[^\w\s\x00-\x7f·…‥「」『』〈〉《》【】〔〕、。‘’“”–—―′″°℃％，．：；！？～]")
_URL = re.compile(r"(?:https?://|www\.)\S+", re.IGNORECASE)
_PARAGRAPH_BREAK = re.compile(r"\n[ \t\r\f\v]*\n")
_HAS_WORD = re.compile(r"\w")
_LINE_END_PUNCTUATION = (".", "!", "?", "…", '"', "'", "”", "’", "。", "！", "？", ":", ")", "~")
_TOP_NGRAMS = (2, 3, 4)
_DUP_NGRAMS = (5, 6, 7, 8, 9, 10)


def _count(pattern: re.Pattern, text: str) -> int:
    """Characters matching a one-character pattern: one C-level pass, no list of matches."""
    return len(text) - len(pattern.sub("", text))


def _duplicate_fraction(parts: list[str]) -> float:
    """Share of the non-empty parts (lines, paragraphs) that repeat an earlier one.

    Parts without a letter or digit ("}", "---") are ignored: code closes many blocks the same way.
    """
    parts = [part for part in (part.strip() for part in parts) if part and _HAS_WORD.search(part)]
    return (len(parts) - len(set(parts))) / len(parts) if parts else 0.0


def _top_ngram_share(words: list[str], n: int, total_chars: int) -> float:
    """Characters covered by the most frequent word n-gram (count x its length) per word character."""
    if len(words) < n:
        return 0.0
    counts = Counter(zip(*(words[start:] for start in range(n))))
    gram, count = counts.most_common(1)[0]
    return count * sum(map(len, gram)) / total_chars if count > 1 else 0.0


def _dup_ngram_share(words: list[str], n: int, total_chars: int) -> float:
    """Characters in word n-grams that repeat an earlier n-gram, counted without overlap (Gopher)."""
    seen, repeated, start, last = set(), 0, 0, len(words) - n
    while start <= last:
        gram = tuple(words[start:start + n])
        if gram in seen:
            repeated += sum(map(len, gram))
            start += n
        else:
            seen.add(gram)
            start += 1
    return repeated / total_chars


_NEEDS_KIWI = "needs Kiwi"  # a sentinel, never returned by judge_batch


def _head(text: str, limit: int) -> str:
    """The first `limit` characters, cut at a line break when one is near so no sentence is halved."""
    if len(text) <= limit:
        return text
    cut = text.rfind("\n", 0, limit)
    return text[:cut] if cut > limit // 2 else text[:limit]


class QualityFilter:
    """Judges documents; build once in the parent process, then fork (see module docstring)."""

    def __init__(self, config: QualityConfig | None = None, threads: int = 0):
        """`threads=0`: no Kiwi thread pool, safe to fork (each forked worker analyses one document at a
        time). `threads=N`: Kiwi analyses a batch on N threads of its own — build such a filter in the
        process that uses it, never before a fork (a forked Kiwi thread pool hangs)."""
        from kiwipiepy import Kiwi

        self._apply(config or QualityConfig())
        self.threads = threads
        with warnings.catch_warnings():
            # kiwipiepy >= 0.21 warns that num_workers=0 changed meaning; "no thread pool" is what we want.
            warnings.simplefilter("ignore", DeprecationWarning)
            self._kiwi = Kiwi(num_workers=threads)
        # The first call loads the model lazily (~2 s); do it here, before the pipeline forks, so every
        # worker shares the loaded model copy-on-write instead of loading its own.
        self._kiwi.split_into_sents("모델을 미리 불러 둡니다.", return_tokens=True)

    def _apply(self, config: QualityConfig) -> None:
        self.config = config
        self._stop_morphemes = frozenset(config.stop_morphemes)
        self._boilerplate = tuple(phrase.lower() for phrase in config.boilerplate_phrases)
        self._placeholders = tuple(phrase.lower() for phrase in config.placeholder_phrases)

    def with_config(self, config: QualityConfig) -> "QualityFilter":
        """Another filter with other thresholds, sharing this one's Kiwi (no second 2-4 s model load)."""
        other = object.__new__(QualityFilter)
        other._kiwi, other.threads = self._kiwi, self.threads
        other._apply(config)
        return other

    def __reduce__(self):
        # Kiwi does not pickle; a spawned worker rebuilds the filter from its config instead.
        return (QualityFilter, (self.config, self.threads))

    def judge_batch(self, texts: list[str]) -> list[str | None]:
        """None = keep; otherwise the name (from REASONS) of the first check the document failed.

        The cheap checks run first over the whole batch; the Korean survivors then go through Kiwi in
        one call, so a filter with `threads` analyses them in parallel while this thread turns each
        finished analysis into statistics (results come back in order).
        """
        verdicts: list[str | None] = []
        waiting: list[int] = []
        heads: list[str] = []
        for index, text in enumerate(texts):
            text = text.strip()
            reason = self._reason_before_kiwi(text)
            verdicts.append(reason)
            if reason is _NEEDS_KIWI:
                waiting.append(index)
                heads.append(_head(text, self.config.kiwi_max_chars))
        if heads:
            if self.threads:  # a list goes to Kiwi's thread pool, which analyses ahead of this loop
                analyses = self._kiwi.split_into_sents(heads, return_tokens=True)
            else:  # no pool (Kiwi's batch API needs one): one document at a time
                analyses = (self._kiwi.split_into_sents(head, return_tokens=True) for head in heads)
            for index, sentences in zip(waiting, analyses):
                verdicts[index] = self._kiwi_reason(self._statistics_of(sentences))
        return verdicts

    def judge(self, text: str) -> str | None:
        return self.judge_batch([text])[0]

    def _reason_before_kiwi(self, text: str) -> str | None:
        """Every check but Kiwi's: a reason, None (keep: not Korean), or _NEEDS_KIWI."""
        config = self.config
        if len(text) < config.min_chars:
            return "too_short"
        if len(text) > config.max_chars:
            return "too_long"
        non_space = (len(text) - _count(_WHITESPACE, text)) or 1
        letters = _count(_LETTER, text)
        hangul = _count(_HANGUL, text)
        is_korean = letters > 0 and hangul / letters >= config.korean_min_hangul_letter_share
        if config.drop_non_korean and not is_korean:
            return "not_korean"
        reason = self._cheap_reason(text, non_space)
        if reason or not is_korean:
            return reason
        if hangul / non_space < config.min_hangul_ratio:
            return "low_hangul_ratio"
        if self._line_punctuation_ratio(text) < config.min_line_punctuation_ratio:
            return "low_line_punctuation"
        return _NEEDS_KIWI

    # Language-agnostic checks, cheapest first.
    def _cheap_reason(self, text: str, non_space: int) -> str | None:
        config = self.config
        if _count(_SYMBOL, text) / non_space > config.max_symbol_ratio:
            return "high_symbol_ratio"
        if _count(_PUNCTUATION, text) / non_space > config.max_punctuation_ratio:
            return "high_punctuation_ratio"
        if _count(_DIGIT, text) / non_space > config.max_digit_ratio:
            return "high_digit_ratio"
        if sum(map(len, _URL.findall(text))) / non_space > config.max_url_ratio:
            return "high_url_ratio"
        lowered = text.lower()
        if any(phrase in lowered for phrase in self._placeholders):
            return "placeholder_text"
        lines = lowered.splitlines()
        if self._boilerplate_fraction(lines) > config.max_boilerplate_line_fraction:
            return "boilerplate"
        if _duplicate_fraction(lines) > config.max_dup_line_fraction:
            return "dup_lines"
        if _duplicate_fraction(_PARAGRAPH_BREAK.split(text)) > config.max_dup_paragraph_fraction:
            return "dup_paragraphs"
        return self._ngram_reason(text)

    def _boilerplate_fraction(self, lowered_lines: list[str]) -> float:
        lines = [line for line in lowered_lines if line.strip()]
        if not lines or not self._boilerplate:
            return 0.0
        flagged = sum(1 for line in lines if any(phrase in line for phrase in self._boilerplate))
        return flagged / len(lines)

    def _ngram_reason(self, text: str) -> str | None:
        # Whitespace words (eojeol for Korean): no Kiwi needed, and every script gets the same measure.
        # Past ngram_max_chars the Python loops cost more than they tell; repetition shows early.
        words = _head(text, self.config.ngram_max_chars).split()
        total_chars = sum(map(len, words))
        if not total_chars:
            return None
        for n in _TOP_NGRAMS:
            if _top_ngram_share(words, n, total_chars) > getattr(self.config, f"max_top_{n}gram_char_share"):
                return "top_ngram_repetition"
        for n in _DUP_NGRAMS:
            if _dup_ngram_share(words, n, total_chars) > getattr(self.config, f"max_dup_{n}gram_char_share"):
                return "dup_ngram_repetition"
        return None

    @staticmethod
    def _line_punctuation_ratio(text: str) -> float:
        lines = [line for line in (line.rstrip() for line in text.splitlines()) if line]
        return sum(line.endswith(_LINE_END_PUNCTUATION) for line in lines) / len(lines) if lines else 0.0

    # Korean documents: one Kiwi pass.
    def kiwi_statistics(self, text: str) -> dict:
        """Morphological statistics of a document's head, from one `split_into_sents` pass.

        Only the first `kiwi_max_chars` are analysed: Kiwi runs at ~70k chars/s, so a 1 MB document
        would hold a worker for ~15 s, while these shares settle within a few thousand characters.
        "Korean morphemes" are tokens whose tag is not S* (punctuation, numbers, Latin, Hanja),
        W_* (URL, emoji, ...) or Z_*; sentences without one ("2024.03.15", "ㅋㅋ") are not counted.
        """
        return self._statistics_of(self._kiwi.split_into_sents(_head(text, self.config.kiwi_max_chars),
                                                               return_tokens=True))

    def _statistics_of(self, sentences) -> dict:
        stop = self._stop_morphemes
        tokens = alphabetic = korean = particles_endings = korean_chars = 0
        korean_sentences = final_sentences = 0
        stops_seen = set()
        for sentence in sentences:
            has_korean = has_final = False
            last_korean_tag = ""
            for token in sentence.tokens:
                tag = token.tag
                kind = tag[0]
                tokens += 1
                if kind in "SWZ":
                    # Latin words and Hanja are alphabetic; punctuation, numbers, emoji, serials are not.
                    alphabetic += tag in ("SL", "SH", "W_URL", "W_EMAIL", "W_HASHTAG", "W_MENTION")
                    continue
                alphabetic += 1
                korean += 1
                korean_chars += token.len
                has_korean = True
                last_korean_tag = tag
                if kind == "J" or kind == "E":
                    particles_endings += 1
                    has_final = has_final or tag == "EF"
                if token.form in stop:
                    stops_seen.add(token.form)
            if has_korean:
                korean_sentences += 1
                # "~함." / "~음." notes end in a nominal ending (ETN): complete, if terse, Korean.
                final_sentences += has_final or last_korean_tag == "ETN"
        return {
            "stop_morphemes": len(stops_seen),
            "mean_morpheme_chars": korean_chars / korean if korean else 0.0,
            "alphabetic_token_share": alphabetic / tokens if tokens else 0.0,
            "final_ending_sentence_ratio": final_sentences / korean_sentences if korean_sentences else 0.0,
            "particle_ending_ratio": particles_endings / korean if korean else 0.0,
        }

    def _kiwi_reason(self, stats: dict) -> str | None:
        config = self.config
        if stats["stop_morphemes"] < config.min_stop_morphemes:
            return "kiwi_few_stop_morphemes"
        if not config.min_mean_morpheme_chars <= stats["mean_morpheme_chars"] <= config.max_mean_morpheme_chars:
            return "kiwi_mean_morpheme_length"
        if stats["alphabetic_token_share"] < config.min_alphabetic_token_share:
            return "kiwi_low_alphabetic_tokens"
        if stats["final_ending_sentence_ratio"] < config.min_final_ending_sentence_ratio:
            return "kiwi_no_final_endings"
        if stats["particle_ending_ratio"] < config.min_particle_ending_ratio:
            return "kiwi_low_particle_ending_ratio"
        return None

    def statistics(self, text: str) -> dict:
        """Every measured value of one document, no early exit: for tuning (bench/quality_eval.py)."""
        text = text.strip()
        non_space = (len(text) - _count(_WHITESPACE, text)) or 1
        letters, hangul = _count(_LETTER, text), _count(_HANGUL, text)
        lines = text.lower().splitlines()
        words = _head(text, self.config.ngram_max_chars).split()
        total_chars = sum(map(len, words)) or 1
        stats = {
            "chars": len(text),
            "korean": letters > 0 and hangul / letters >= self.config.korean_min_hangul_letter_share,
            "symbol_ratio": _count(_SYMBOL, text) / non_space,
            "punctuation_ratio": _count(_PUNCTUATION, text) / non_space,
            "digit_ratio": _count(_DIGIT, text) / non_space,
            "url_ratio": sum(map(len, _URL.findall(text))) / non_space,
            "boilerplate_line_fraction": self._boilerplate_fraction(lines),
            "dup_line_fraction": _duplicate_fraction(lines),
            "dup_paragraph_fraction": _duplicate_fraction(_PARAGRAPH_BREAK.split(text)),
            "hangul_ratio": hangul / non_space,
            "line_punctuation_ratio": self._line_punctuation_ratio(text),
        }
        for n in _TOP_NGRAMS:
            stats[f"top_{n}gram_char_share"] = _top_ngram_share(words, n, total_chars)
        for n in _DUP_NGRAMS:
            stats[f"dup_{n}gram_char_share"] = _dup_ngram_share(words, n, total_chars)
        if stats["korean"]:
            stats.update(self.kiwi_statistics(text))
        return stats
