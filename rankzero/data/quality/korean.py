"""Korean documents: the Hangul gate, then sentence statistics from one Kiwi pass over prose.

    stats = hangul_statistics(text)                                        # which documents are Korean
    sample = kiwi_sample(text, config.kiwi_max_chars, config.kiwi_windows)  # what Kiwi reads
    stats = prose_statistics(sample, kiwi.tokenize(sample), config)

Kiwi costs 30-50x more CPU per byte than the rest of the filter, so it first reads a sample of a long
document: `kiwi_windows` windows from its start, middle and end, `kiwi_max_chars` in all, cut at line
or sentence ends. The statistics below are shares, and such a sample decides as the whole document
does unless they sit near a threshold; then, or when the sample would drop the document, the filter
reads the whole (`near_threshold`, filter.py). bench/quality_eval.py --agreement measures both.

Each line is cut into sentences at Kiwi's sentence-final punctuation (SF). A sentence is
- prose, closed: it has a final ending (EF), or ends as a noun phrase ("~함.", "…도는 영화.", see _sentences);
- structure: otherwise, when it sits on a structure line (structure.py: list items, clauses, headings,
  dialogue turns, table rows) or has fewer than `min_prose_morphemes` Korean morphemes (titles,
  bylines, captions, labels);
- prose, open: otherwise — a long run of words that never ends, like keyword lists and word salad.
The share of closed sentences, of particles and endings and the morpheme length are measured over
prose only; structure is judged on its own (`min_prose_share`), generously. The same analysis gives
the word-order statistic (word_order_statistics): shuffled words pass every sentence statistic.
"Korean morphemes" are tokens whose tag is not S* (punctuation, numbers, Latin, Hanja, bullets),
W_* (URL, emoji, serials) or Z_*.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from operator import itemgetter

from rankzero.data.quality.characters import DIGIT, HANGUL, SPACE, URL, WORD, class_counts, class_total
from rankzero.data.quality.structure import is_structure_line, structure_lines, without_table_rows

# Where a window may start or end inside a line: the space after a sentence's closing punctuation.
_SENTENCE_END = re.compile(r"(?<=[.!?。…])[ \t]+")


def hangul_statistics(text: str) -> dict[str, float]:
    """Hangul among the letters (is it Korean?), and per non-space character outside table rows and
    URLs (structure and links are judged on their own: a changelog citing release URLs is Korean)."""
    counts = class_counts(text)
    letters = class_total(counts, WORD, absent=DIGIT) - text.count("_")  # [^\W\d_]
    hangul = class_total(counts, HANGUL)
    body = without_table_rows(text)
    if "://" in body or "www." in body:
        body = URL.sub(" ", body)
    if body is not text:
        counts = class_counts(body)
    return {"hangul_letter_share": hangul / letters if letters else 0.0,
            "hangul_ratio": class_total(counts, HANGUL) / (len(body) - class_total(counts, SPACE) or 1)}


def is_korean(stats: dict, config) -> bool:
    return stats["hangul_letter_share"] >= config.korean_min_hangul_letter_share


def gate_reason(stats: dict, config) -> str | None:
    return "low_hangul_ratio" if stats["hangul_ratio"] < config.min_hangul_ratio else None


# --- Surface statistics: what decides clear prose without Kiwi (the cascade's first stage) -------------
#
# Kiwi costs ~10 µs per character; a regular expression over the text costs ~0.05. Most Korean
# documents are plain prose whose Kiwi statistics sit far from every threshold, and their surface shows
# it: sentences that end on a final-ending syllable ("…했다.", "…해요?"), words that end on a particle or
# an ending syllable. `surface_statistics` measures those on the raw text; `surface_keeps` keeps a
# document only when they are all clear of the bars below: the laxest of a grid that no document the full
# filter drops reaches on the real corpora, the statutes, the labelled sample and the bench corpus but one
# statute (docs/quality.md, "The cascade"). Every other Korean document is read by Kiwi as before. The
# surface can keep a document, never drop one.

# Last syllables of a sentence closed by a final ending (다 요 까 죠 네 …), or by the nominal ends
# Kiwi closes too (~음 ~함 ~임): the syllables that end 97% of real Korean sentences.
_FINAL_SYLLABLES = frozenset("다요까줘라음지어오래네나데해야함죠듯아워임니자냐여소게군세")
# Last syllables of a word that is a particle or an ending (는 을 이 의 에 …; 한 된 던: adnominal).
_PARTICLE_SYLLABLES = frozenset("다는을고이의에로를은가서한도게요만과면데며와할라야된던른")
# Word-final syllables that are (or end) FW2's stop morphemes: 의 다 이 는 에 을 은 를 가 고 로 ….
_STOP_SYLLABLES = frozenset("의다이는에을은를가고로한")
_HANGUL_WORD = re.compile(r"[\uac00-\ud7a3]+")
_SURFACE_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# Sentence punctuation after the last Hangul word, with only closing marks or emoticons after it.
_CLOSING_PUNCTUATION = re.compile(r"[.!?][^\uac00-\ud7a3]*$")
# The bound nouns whose neighbours Korean fixes (word_order_statistics): 수 comes before 있다/없다
# ("할 수 있다"); 것 after an -ㄴ/-ㄹ adnominal ("하는 것", "할 것") or a determiner ("그 것").
_BOUND_SU = frozenset(("수", "수가", "수도", "수는", "수밖에"))
_RIEUL, _NIEUN = 8, 4  # final consonant indexes of ㄹ and ㄴ in a precomposed syllable
_DETERMINERS = frozenset("그이저")
_AMBIGUOUS_PARTICLES = frozenset("을를은는")

# The bars a document's surface must clear to be kept without Kiwi (docs/quality.md gives the evidence).
SURFACE_MIN_SENTENCES = 2
SURFACE_MIN_WORDS = 20
SURFACE_MIN_CLOSED_SHARE = 0.6
SURFACE_MIN_PARTICLE_SHARE = 0.3
SURFACE_MIN_STOP_SYLLABLES = 6
SURFACE_MAX_BROKEN_BOUND_NOUN_SHARE = 1 / 3


def surface_statistics(text: str) -> dict[str, float]:
    """Sentences (cut at . ! ? and line breaks) and their Hangul words, measured without Kiwi:

    - closed share: prose sentences whose last Hangul word ends on a final-ending syllable, before
      punctuation or after five words; an unclosed sentence on a structure line (structure.py) or
      of fewer than five words is structure and not counted, as Kiwi's reading does;
    - particle share: Hangul words ending on a particle or ending syllable, per Hangul word;
    - stop syllables: how many distinct stop-morpheme syllables end a word (FW2's list, on the surface);
    - bound nouns: 수 and 것 words, and those whose neighbours break Korean order.
    """
    # Words, particles and stop syllables over the whole text at once (sentences split at spaces and
    # line breaks, which no Hangul word holds): the last syllable of every word, counted in C.
    runs = _HANGUL_WORD.findall(text)
    words = len(runs)
    ends = Counter(map(itemgetter(-1), runs))
    particles = sum(ends[syllable] for syllable in _PARTICLE_SYLLABLES if syllable in ends)
    prose = closed = 0
    for line in text.split("\n"):
        structure = None
        for sentence in _SURFACE_SENTENCE_END.split(line):
            runs = _HANGUL_WORD.findall(sentence)
            if not runs:
                continue
            is_closed = runs[-1][-1] in _FINAL_SYLLABLES and (
                len(runs) >= 5 or _CLOSING_PUNCTUATION.search(sentence) is not None)
            if not is_closed:
                if structure is None:
                    structure = is_structure_line(line)
                if structure or len(runs) < 5:
                    continue
            prose += 1
            closed += is_closed
    pairs, broken = bound_noun_order(text)
    return {"surface_sentences": float(prose), "surface_words": float(words),
            "surface_closed_share": closed / prose if prose else 0.0,
            "surface_particle_share": particles / words if words else 0.0,
            "surface_stop_syllables": float(len(_STOP_SYLLABLES.intersection(ends))),
            "surface_bound_nouns": float(pairs), "surface_broken_bound_nouns": float(broken)}


def _final_consonant(syllable: str) -> int:
    offset = ord(syllable) - 0xAC00
    return offset % 28 if 0 <= offset < 11172 else -1


def bound_noun_order(text: str) -> tuple[int, int]:
    """(bound nouns 수 and 것, those whose neighbours break Korean order), word by word on each line.
    Words shuffled into a random order break most of them; real text a few (a noun's "학생 수")."""
    if "수" not in text and "것" not in text:
        return 0, 0
    pairs = broken = 0
    for line in text.split("\n"):
        if "수" not in line and "것" not in line:
            continue
        words = line.split()
        for index, word in enumerate(words):
            if word[0] not in "수것":
                continue
            core = _HANGUL_WORD.match(word)
            if core is None:
                continue
            before = _last_syllable(words[index - 1]) if index else ""
            if word[0] == "수":
                if core.group() not in _BOUND_SU or word[core.end():] not in ("", ".", ","):
                    continue
                after = words[index + 1] if index + 1 < len(words) else ""
                ordered = after.startswith(("있", "없")) or core.group() == "수밖에"
            elif before in _AMBIGUOUS_PARTICLES:
                continue  # "먹을 것" or "빵을 것": an adnominal ending and a particle look alike
            else:
                ordered = bool(before) and (_final_consonant(before) in (_NIEUN, _RIEUL) or before in _DETERMINERS)
            pairs += 1
            broken += not ordered
    return pairs, broken


def _last_syllable(word: str) -> str:
    """The word's last character when it is a Hangul syllable (no punctuation after it), else ""."""
    return word[-1] if "\uac00" <= word[-1] <= "\ud7a3" else ""


def surface_applies(config) -> bool:
    """Whether the surface bars hold for these Kiwi thresholds: they were measured against the defaults,
    so they keep documents only where every Kiwi threshold is the default's or more lenient."""
    from rankzero.data.quality.config import QualityConfig

    default = QualityConfig()
    return (config.min_prose_morphemes == default.min_prose_morphemes
            and set(config.stop_morphemes) >= set(default.stop_morphemes)
            and all(getattr(config, name) <= getattr(default, name) for name in (
                "min_prose_share", "min_stop_morphemes", "min_mean_morpheme_chars",
                "min_final_ending_sentence_ratio", "min_particle_ending_ratio"))
            and all(getattr(config, name) >= getattr(default, name) for name in (
                "max_mean_morpheme_chars", "min_word_order_pairs", "max_word_order_broken_ratio")))


def surface_keeps(stats: dict) -> bool:
    """Whether the surface alone keeps a Korean document: clear prose, far from every Kiwi threshold."""
    pairs = stats["surface_bound_nouns"]
    return (stats["surface_sentences"] >= SURFACE_MIN_SENTENCES
            and stats["surface_words"] >= SURFACE_MIN_WORDS
            and stats["surface_closed_share"] >= SURFACE_MIN_CLOSED_SHARE
            and stats["surface_particle_share"] >= SURFACE_MIN_PARTICLE_SHARE
            and stats["surface_stop_syllables"] >= SURFACE_MIN_STOP_SYLLABLES
            and not (pairs and stats["surface_broken_bound_nouns"] / pairs > SURFACE_MAX_BROKEN_BOUND_NOUN_SHARE))


def kiwi_sample(text: str, budget: int, windows: int) -> str:
    """The whole text when short; otherwise `windows` windows of equal size from its start to its end,
    `budget` characters in all, each cut at line ends (or else sentence ends) where one is near, joined
    by line breaks."""
    if len(text) <= budget:
        return text
    size = budget // windows
    last_start = len(text) - size
    pieces = []
    for index in range(windows):
        start = last_start * index // (windows - 1) if windows > 1 else 0
        if start:
            start = _first_boundary(text, start, start + size // 2)
        end = start + size
        if end < len(text):
            end = _last_boundary(text, start + size // 2, end)
        pieces.append(text[start:end].strip())
    return "\n".join(pieces)


def _first_boundary(text: str, start: int, limit: int) -> int:
    """Where the first line (else sentence) after `start` begins, if before `limit`; else `start`."""
    newline = text.find("\n", start, limit)
    if newline >= 0:
        return newline + 1
    match = _SENTENCE_END.search(text, start, limit)
    return match.end() if match else start


def _last_boundary(text: str, floor: int, end: int) -> int:
    """Where the last line (else sentence) before `end` ends, if after `floor`; else `end`."""
    newline = text.rfind("\n", floor, end)
    if newline >= 0:
        return newline
    ends = [match.start() for match in _SENTENCE_END.finditer(text, floor, end)]
    return ends[-1] if ends else end


def _sentences(tokens, line_starts: list[int], min_prose_morphemes: int, stop: frozenset, stops_seen: set):
    """Per sentence of a Kiwi token list: (line, Korean morphemes, their characters, particles and
    endings among them, closed). A sentence ends at SF punctuation or a line break. It is closed by a
    final ending (EF); or, when punctuation follows or it is long enough to be prose, by a nominal end:
    a nominalizing ending (ETN), the "~함." of notes and minutes, or a noun right after an adnominal
    ending (ETM + N), the "…눈물이 핑 도는 영화." of reviews, headlines and captions. The "더보기" of a
    menu and a run of keywords are not closed. Every stop morpheme met is added to `stops_seen`."""
    line, korean, chars, particles, closed, last_tag, before_last = 0, 0, 0, 0, False, "", ""
    for token in tokens:
        token_line = bisect.bisect_right(line_starts, token.start) - 1
        if token_line != line:
            nominal = _nominal_end(before_last, last_tag) and korean >= min_prose_morphemes
            yield line, korean, chars, particles, closed or nominal
            line, korean, chars, particles, closed, last_tag, before_last = token_line, 0, 0, 0, False, "", ""
        tag = token.tag
        kind = tag[0]
        if kind in "SWZ":
            if tag == "SF":
                yield line, korean, chars, particles, closed or _nominal_end(before_last, last_tag)
                korean, chars, particles, closed, last_tag, before_last = 0, 0, 0, False, "", ""
            continue
        korean += 1
        chars += token.len
        last_tag, before_last = tag, last_tag
        if kind == "J" or kind == "E":
            particles += 1
            closed = closed or tag == "EF"
        if token.form in stop:
            stops_seen.add(token.form)
    nominal = _nominal_end(before_last, last_tag) and korean >= min_prose_morphemes
    yield line, korean, chars, particles, closed or nominal


_NOUNS = frozenset(("NNG", "NNP", "NNB", "NR", "NP"))


def _nominal_end(before_last: str, last_tag: str) -> bool:
    """A sentence that ends as a noun phrase: "~함" (ETN), or a noun its adnominal clause modifies (ETM + N).
    Not a noun after a noun or a particle ("하나의 걸작"): that closes Hangul salad as well."""
    return last_tag == "ETN" or (last_tag in _NOUNS and before_last == "ETM")


def prose_statistics(sample: str, tokens, config) -> dict[str, float]:
    """Statistics of one Kiwi analysis (`kiwi.tokenize(sample)`), over prose sentences (module docstring)."""
    structure = structure_lines(sample)
    line_starts = [0] + [match.end() for match in re.finditer("\n", sample)]
    stops_seen: set = set()
    korean_all = prose_korean = prose_chars = prose_particles = prose_sentences = closed_sentences = 0
    for line, korean, chars, particles, closed in _sentences(tokens, line_starts, config.min_prose_morphemes,
                                                             frozenset(config.stop_morphemes), stops_seen):
        if not korean:
            continue  # "2024.03.15", "▶", a closing quote after the period
        korean_all += korean
        if not closed and (structure[line] or korean < config.min_prose_morphemes):
            continue  # structure: a heading, a list item, a label
        prose_sentences += 1
        closed_sentences += closed
        prose_korean += korean
        prose_chars += chars
        prose_particles += particles
    return {
        **word_order_statistics(sample, tokens),
        "stop_morphemes": len(stops_seen),
        "prose_share": prose_korean / korean_all if korean_all else 0.0,
        "mean_morpheme_chars": prose_chars / prose_korean if prose_korean else 0.0,
        "final_ending_sentence_ratio": closed_sentences / prose_sentences if prose_sentences else 0.0,
        "particle_ending_ratio": prose_particles / prose_korean if prose_korean else 0.0,
    }


# Word order. Korean fixes a few neighbours: an adnominal ending (ETM: "새로운", "하는") or a bare
# determiner (MM: "그", "이런") comes before a noun; a bound noun (NNB: 수, 것, 때) comes after a modifier
# or a noun; an auxiliary verb (VX: the 있다 of "-고 있다") comes after a connective ending (EC). Real text
# breaks these at most a quarter of the time (Kiwi's mistakes, poetry, ellipsis; 0.31 in movie-review
# threads); words shuffled into a random order break a third to two thirds of them, in sentences that
# are otherwise flawless (docs/quality.md).
_NOMINAL = frozenset(("NNG", "NNB", "NNP", "NP", "NR", "SN", "SL", "SH", "XPN", "MM", "XR"))
_BEFORE_BOUND_NOUN = frozenset(("ETM", "MM", "SN", "NR", "NNG", "NNP", "NP", "NNB", "XSN"))


def word_order_statistics(sample: str, tokens) -> dict[str, float]:
    """Pairs of neighbouring words (on one line, no punctuation between) that Korean word order
    constrains, and the share of them that break it."""
    pairs = broken = 0
    last_tag, word_tokens, word_end = "", 0, -1
    for token in tokens:
        tag = token.tag.split("-", 1)[0]  # "VV-R" → "VV": Kiwi marks irregular conjugations
        if 0 <= token.start <= word_end:  # the same word: contiguous or overlapping ("했다" = 하+었+다)
            last_tag, word_tokens, word_end = tag, word_tokens + 1, max(word_end, token.start + token.len)
            continue
        if word_end >= 0 and _in_words(last_tag) and _in_words(tag) and "\n" not in sample[word_end:token.start]:
            after_modifier = last_tag == "ETM" or (last_tag == "MM" and word_tokens == 1)
            if after_modifier or tag in ("VX", "NNB"):
                pairs += 1
                broken += ((after_modifier and tag not in _NOMINAL)
                           or (tag == "VX" and last_tag != "EC")
                           or (tag == "NNB" and last_tag not in _BEFORE_BOUND_NOUN))
        last_tag, word_tokens, word_end = tag, 1, token.start + token.len
    return {"word_order_pairs": float(pairs), "word_order_broken_ratio": broken / pairs if pairs else 0.0}


def _in_words(tag: str) -> bool:
    """A morpheme of a word, not punctuation, a symbol or a URL/emoji (numbers, Latin and Hanja are words)."""
    return tag[0] not in "SWZ" or tag in ("SN", "SL", "SH")


# How far a sample's statistic may fall from the whole document's: the 99th percentile of
# |sample - whole| over the Korean documents longer than the default sample in the labelled sample,
# ko_real_dev and the bench corpus (bench/quality_eval.py --agreement prints them). A sample this close
# to a threshold does not decide; the whole document is read.
SAMPLE_MARGINS = {"final_ending_sentence_ratio": 0.25, "particle_ending_ratio": 0.04, "prose_share": 0.12,
                  "mean_morpheme_chars": 0.12}

# A 450-character sample holds only a few constrained pairs, so its word-order share is too noisy for a
# p99 margin (it would re-read one long document in ten). A sample with at least half the pairs the
# rule needs and a share within this of the threshold is re-read whole: 1.3% of 1,011 long clean
# documents; 27 of the 28 long shuffled documents a whole reading drops are caught (docs/quality.md).
WORD_ORDER_MARGIN = 0.10


def near_threshold(stats: dict, config) -> bool:
    """Whether a sample's statistics sit close enough to a threshold that the whole text may differ."""
    floors = {"final_ending_sentence_ratio": config.min_final_ending_sentence_ratio,
              "particle_ending_ratio": config.min_particle_ending_ratio,
              "prose_share": config.min_prose_share,
              "mean_morpheme_chars": config.min_mean_morpheme_chars}
    if any(stats[name] < floor + SAMPLE_MARGINS[name] for name, floor in floors.items()):
        return True
    if stats["mean_morpheme_chars"] > config.max_mean_morpheme_chars - SAMPLE_MARGINS["mean_morpheme_chars"]:
        return True
    return (stats["word_order_pairs"] >= config.min_word_order_pairs / 2
            and stats["word_order_broken_ratio"] > config.max_word_order_broken_ratio - WORD_ORDER_MARGIN)


def kiwi_reason(stats: dict, config) -> str | None:
    if stats["stop_morphemes"] < config.min_stop_morphemes:
        return "kiwi_few_stop_morphemes"
    if stats["prose_share"] < config.min_prose_share:
        return "kiwi_mostly_structure"
    if not config.min_mean_morpheme_chars <= stats["mean_morpheme_chars"] <= config.max_mean_morpheme_chars:
        return "kiwi_mean_morpheme_length"
    if stats["final_ending_sentence_ratio"] < config.min_final_ending_sentence_ratio:
        return "kiwi_no_final_endings"
    if stats["particle_ending_ratio"] < config.min_particle_ending_ratio:
        return "kiwi_low_particle_ending_ratio"
    if (stats["word_order_pairs"] >= config.min_word_order_pairs
            and stats["word_order_broken_ratio"] > config.max_word_order_broken_ratio):
        return "kiwi_word_order"
    return None
