"""Every threshold of the Korean quality filter, with its default, and reading them from YAML.

    config = QualityConfig.from_yaml("configs/quality_ko.yaml")   # unknown keys and wrong types: one error
    config.to_dict()                                                # enters the dataset fingerprint

configs/quality_ko.yaml spells out the same defaults with a line on each; docs/quality.md gives the
evidence behind every value.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import yaml

from rankzero import strict_yaml

# FineWeb-2's kor_Hang stop morphemes (Kiwi forms). "했", "한" and "인" never come out of Kiwi as one
# morpheme (하+었, 하+ᆫ, 이+ᆫ); they are kept so the list stays the published one.
STOP_MORPHEMES = ("의", "다", "이", "는", "에", "을", "한", "년", "하", "은", "를", "했", "고", "에서", "가",
                  "있", "으로", "인", "월", "로", "되")

# A line holding one of these is boilerplate (C4-style line markers); matched without regard to case.
BOILERPLATE_PHRASES = (
    "쿠키를 사용", "쿠키 사용에 동의", "쿠키 정책", "쿠키 설정", "uses cookies", "use cookies", "cookie policy",
    "cookie settings", "accept all cookies", "all rights reserved", "copyright ©",
    "copyright(c)", "copyright (c)", "무단 전재", "무단전재", "재배포 금지", "재배포금지",
    "개인정보처리방침", "개인정보 처리방침", "이용약관", "사업자등록번호", "통신판매업",
    "아이디/비밀번호 찾기", "아이디 찾기", "비밀번호 찾기", "아이디 저장", "자동 로그인", "로그인 회원가입",
    "로그인 | 회원가입",
    "javascript를 활성화", "자바스크립트를 활성화", "enable javascript",
)

# Gambling-site vocabulary: two of these beside a messenger handle make a gambling ad (solicitation.py).
# Only words whose everyday sense is rare: "충전" (charging), "슬롯" (a card slot), "사설" (an
# editorial) are left out.
GAMBLING_TERMS = ("카지노", "토토", "바카라", "먹튀", "배팅", "베팅", "환전", "홀덤", "릴게임", "파워볼", "casino",
                  "baccarat", "betting")

# A document containing one of these is template filler, whatever else it holds (C4 drops them).
PLACEHOLDER_PHRASES = ("lorem ipsum", "dolor sit amet", "consectetur adipiscing")


@dataclass
class QualityConfig:
    """Every threshold of the filter. Shares are in [0, 1]; lengths in characters (code points)."""

    # Mojibake (UTF-8 read as Latin-1 / cp1252): repaired with ftfy (true) or dropped (false).
    repair_mojibake: bool = True
    # Length.
    min_chars: int = 30
    max_chars: int = 1_000_000
    # Word shape, every document: machine text rather than language.
    max_encoded_char_share: float = 0.20    # base64 / hex / uuencoded / %-escaped runs per non-space char
    max_mean_word_chars: float = 25.0       # whitespace words outside URLs and space-less scripts
    long_word_chars: int = 100
    max_long_word_char_share: float = 0.30  # characters in words of long_word_chars or more
    # Characters, every document (outside table rows).
    max_symbol_ratio: float = 0.10          # emoji, dingbats, box/arrow/shape symbols per non-space char
    max_punctuation_ratio: float = 0.60     # every non-alphanumeric char, ASCII punctuation included
    max_digit_ratio: float = 0.30
    max_link_line_fraction: float = 0.5     # lines that are a URL and little else, per non-empty line
    # Repetition, every document.
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
    statute_ngram_factor: float = 3.0       # n-gram limits x this for statute-shaped documents (repetition.py)
    # Gambling ads, every document: a messenger @handle and this many distinct gambling terms ([] = off).
    gambling_terms: list[str] = field(default_factory=lambda: list(GAMBLING_TERMS))
    min_gambling_terms: int = 2
    # Which documents are Korean, and what to do with the others.
    korean_min_hangul_letter_share: float = 0.5
    drop_non_korean: bool = False
    # Korean documents only.
    min_hangul_ratio: float = 0.40          # Hangul per non-space char
    kiwi_cascade: bool = True               # clear prose by its surface is kept without Kiwi (false: Kiwi reads all)
    kiwi_max_chars: int = 450               # what Kiwi reads of a document, in kiwi_windows spread windows
    kiwi_windows: int = 3
    kiwi_recheck_max_chars: int = 8_000     # what it reads of a document its sample would drop
    min_prose_morphemes: int = 8            # a sentence without a final ending and fewer morphemes is structure
    min_prose_share: float = 0.10           # Korean morphemes in prose sentences per Korean morpheme
    min_stop_morphemes: int = 2
    stop_morphemes: list[str] = field(default_factory=lambda: list(STOP_MORPHEMES))
    min_mean_morpheme_chars: float = 1.0
    max_mean_morpheme_chars: float = 3.0
    min_final_ending_sentence_ratio: float = 0.40
    min_particle_ending_ratio: float = 0.15
    # Word order (korean.word_order_statistics): judged once a document has this many constrained pairs.
    min_word_order_pairs: int = 10
    max_word_order_broken_ratio: float = 0.35

    def __post_init__(self) -> None:
        problems = [f"{spec.name}={getattr(self, spec.name)!r} must be between 0 and 1"
                    for spec in fields(self) if spec.name.endswith(_SHARE_SUFFIXES)
                    and not 0.0 <= getattr(self, spec.name) <= 1.0]
        if self.min_chars > self.max_chars:
            problems.append(f"min_chars={self.min_chars} is above max_chars={self.max_chars}")
        if self.min_mean_morpheme_chars > self.max_mean_morpheme_chars:
            problems.append("min_mean_morpheme_chars is above max_mean_morpheme_chars")
        if self.kiwi_windows < 1:
            problems.append(f"kiwi_windows={self.kiwi_windows} must be at least 1")
        if self.kiwi_max_chars < 100 * self.kiwi_windows or self.ngram_max_chars < 100:
            problems.append("kiwi_max_chars must be at least 100 per window, ngram_max_chars at least 100")
        if self.kiwi_recheck_max_chars < self.kiwi_max_chars:
            problems.append("kiwi_recheck_max_chars is below kiwi_max_chars")
        if self.statute_ngram_factor < 1:
            problems.append(f"statute_ngram_factor={self.statute_ngram_factor} must be at least 1 (1: as other documents)")
        if self.long_word_chars < 2:
            problems.append(f"long_word_chars={self.long_word_chars} must be at least 2")
        if problems:
            raise ValueError("invalid quality config: " + "; ".join(problems))

    @classmethod
    def from_yaml(cls, path) -> "QualityConfig":
        """Defaults overridden by a YAML mapping; every unknown key or wrong type is reported at once."""
        path = Path(path)
        try:
            with open(path, encoding="utf-8") as handle:
                loaded = strict_yaml.load(handle)
        except yaml.YAMLError as error:
            raise ValueError(f"--quality_config {strict_yaml.where(error, path)}: "
                             f"{getattr(error, 'problem', None) or error}") from None
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
