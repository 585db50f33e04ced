"""Tokens: encode documents into flat numpy ids, on fastokens when it gives the same ids as HF.

    info = load_tokenizer("tok/")                              # tokenizer.json + specials + chat template
    engine = select_engine(info, "auto", sample_texts)         # checked against the HF backend first
    ids, lengths, labels = DocumentEncoder(info, engine).encode(documents, with_labels=False)

Two engines encode the same `tokenizer.json`:
- `fastokens` (Rust, PyPI): ~5-6x less CPU than `tokenizers` on Korean, and `encode_batch_flat` hands
  back every id as one uint32 buffer, so no Python object is made per token.
- `hf`: the `tokenizers` library's `encode_batch_fast`, the reference every HF pipeline uses.
`select_engine` never trusts fastokens blindly: it encodes a fixed set of hard strings (emoji and
ZWJ sequences, combining marks, Hanja, digit and whitespace runs, the tokenizer's own added tokens
inside text, …) plus a sample of the corpus with both and takes fastokens only when every id is
equal; otherwise the HF backend, with one warning saying why (`--tokenizer_engine fastokens` makes it
an error instead). The ids are equal by construction, so the dataset fingerprint ignores the engine.

Each document becomes `[bos] + ids + [eos]` (bos only when the tokenizer's template adds one). In SFT
mode each segment is encoded on its own and its tokens are labelled (trainable) or -100 (context).

Long documents: a text longer than `PIECE_CHARS` is encoded in pieces cut just after a letter and
before whitespace — a boundary every regex pre-tokenizer we know of (GPT-2, Llama 3, ours) also
cuts at, so the pieces' ids are the document's ids. `split_point` checks it per tokenizer on probe
strings; a tokenizer that fails the probes encodes long documents whole (and says so once). Memory
per document is then bounded by the piece, not the document: the HF backend needs ~80 bytes per
input byte while it encodes one text, fastokens ~8 (bench/RESULTS.md).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import numpy as np

from rankzero.data import fastokens_ahead
from rankzero.errors import RankzeroError

logger = logging.getLogger(__name__)

IGNORE_INDEX = -100
ENGINES = ("auto", "fastokens", "hf")
PIECE_CHARS = 1 << 18  # long texts are encoded in pieces of at most this many characters ...
CALL_CHARS = 1 << 22  # ... and at most this many characters go into one encode call
SAMPLE_CHARS = 1 << 18  # corpus text the engine check encodes twice (HF's half costs ~0.1 CPU-s per MiB)


def _token_content(value) -> str | None:
    if isinstance(value, dict):
        return value.get("content")
    return value if isinstance(value, str) else None


@dataclass
class TokenizerInfo:
    path: str
    backend: object  # tokenizers.Tokenizer
    eos_id: int
    bos_ids: tuple[int, ...]
    vocab_size: int
    max_token_id: int  # the largest id the tokenizer can give (ids may be sparse): what the stored dtype must hold
    chat_template: str | None
    special_tokens: dict[str, str]
    content_hash: str

    def tokenizer_json(self) -> str:
        """The serialized tokenizer both engines load."""
        path = Path(self.path) / "tokenizer.json"
        return path.read_text(encoding="utf-8") if path.is_file() else self.backend.to_str()


def load_tokenizer(path: str | Path) -> TokenizerInfo:
    """Read `tokenizer.json` with the `tokenizers` library directly: importing transformers costs ~3 s
    (it pulls in torch). A directory without it is converted once through transformers; a slow-only
    tokenizer is an error."""
    from tokenizers import Tokenizer

    directory = Path(path)
    config_path = directory / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else {}
    tokenizer_json = directory / "tokenizer.json"
    if tokenizer_json.is_file():
        backend = Tokenizer.from_file(str(tokenizer_json))
    else:
        backend = _convert_to_fast(directory)
        tokenizer_json = None
    special = {name: _token_content(config.get(name)) for name in ("bos_token", "eos_token", "pad_token", "unk_token")}
    special_map = directory / "special_tokens_map.json"
    if special_map.is_file():
        for name, value in json.loads(special_map.read_text(encoding="utf-8")).items():
            if not special.get(name):
                special[name] = _token_content(value)
    special = {k: v for k, v in special.items() if v}
    eos = special.get("eos_token")
    eos_id = backend.token_to_id(eos) if eos else None
    if eos_id is None:
        raise RankzeroError(f"--tokenizer_path {path}: the tokenizer has no eos_token in tokenizer_config.json; "
                            "documents need one to end")
    bos_ids = _template_prefix(backend)
    bos = special.get("bos_token")
    if not bos_ids and config.get("add_bos_token") and bos and backend.token_to_id(bos) is not None:
        bos_ids = (backend.token_to_id(bos),)
    chat_template = config.get("chat_template")
    template_file = directory / "chat_template.jinja"
    if not chat_template and template_file.is_file():
        chat_template = template_file.read_text(encoding="utf-8")
    if isinstance(chat_template, list):  # several named templates: the default one
        chat_template = next((t["template"] for t in chat_template if t.get("name") == "default"), None)
    digest = hashlib.sha256()
    digest.update(Path(tokenizer_json).read_bytes() if tokenizer_json else backend.to_str().encode())
    digest.update(json.dumps([eos_id, bos_ids, chat_template], sort_keys=True).encode())
    max_token_id = max(backend.get_vocab(with_added_tokens=True).values(), default=0)
    return TokenizerInfo(str(directory), backend, eos_id, tuple(bos_ids), backend.get_vocab_size(with_added_tokens=True),
                         max_token_id, chat_template, special, digest.hexdigest())


def _convert_to_fast(directory: Path):
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(directory))
    except Exception as error:
        raise RankzeroError(f"--tokenizer_path {directory}: could not load a tokenizer ({error})") from None
    if not getattr(tokenizer, "is_fast", False):
        raise RankzeroError(f"--tokenizer_path {directory}: {type(tokenizer).__name__} is not a fast (Rust) tokenizer; "
                            "convert it (AutoTokenizer.from_pretrained(..., use_fast=True).save_pretrained(DIR))")
    return tokenizer.backend_tokenizer


def _template_prefix(backend) -> tuple[int, ...]:
    """The ids the tokenizer's post-processor puts before a single sequence (a BOS, usually)."""
    with_special = backend.encode("a", add_special_tokens=True).ids
    without = backend.encode("a", add_special_tokens=False).ids
    for start in range(len(with_special) - len(without) + 1):
        if with_special[start:start + len(without)] == without:
            return tuple(with_special[:start])
    return ()


# ---------------------------------------------------------------------------------------------
# Engines: texts → (flat int32 ids, int64 per-text lengths), no special tokens added


class HFEngine:
    """`tokenizers`' `encode_batch_fast` (Rayon threads, GIL released)."""

    name = "hf"

    def __init__(self, info: TokenizerInfo):
        import tokenizers

        self.backend = info.backend
        self.version = tokenizers.__version__

    def encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        encodings = self.backend.encode_batch_fast(texts, add_special_tokens=False)
        lengths = np.fromiter(map(len, encodings), dtype=np.int64, count=len(encodings))
        # The ids only leave Rust as one Python list per text; streaming them through `np.fromiter`
        # frees each list as it is made (cheaper than collecting every id in one list first).
        ids = np.fromiter(chain.from_iterable(e.ids for e in encodings), dtype=np.int32, count=int(lengths.sum()))
        return ids, lengths


class FastokensEngine:
    """fastokens' `encode_batch_flat`: one little-endian uint32 buffer of ids plus uint64 offsets."""

    name = "fastokens"

    def __init__(self, info: TokenizerInfo):
        from importlib.metadata import version

        import fastokens

        text = info.tokenizer_json()
        built = fastokens_ahead.take(text)  # built on a thread since the arguments were read, if it was
        self.tokenizer = built if built is not None else fastokens.Tokenizer.from_json_str(text)
        self.version = version("fastokens")

    def encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        raw_ids, raw_offsets = self.tokenizer.encode_batch_flat(texts, add_special_tokens=False)
        offsets = np.frombuffer(raw_offsets, dtype="<u8").astype(np.int64)
        # Ids below 2**31 (every vocabulary) read the same as int32 (read-only: callers make new arrays).
        return np.frombuffer(raw_ids, dtype="<i4"), np.diff(offsets)


def build_engine(name: str, info: TokenizerInfo):
    """The named engine, unchecked: for workers once `select_engine` has chosen (by name, never pickled)."""
    return FastokensEngine(info) if name == "fastokens" else HFEngine(info)


def fastokens_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("fastokens") is not None


# Strings where BPE implementations tend to disagree: grapheme clusters, normalisation-sensitive
# forms, scripts without spaces, very long runs, control and replacement characters.
HARD_STRINGS = (
    "", " ", "\n", "\t", "  \n\n  \t \r\n", " " * 300, "\n" * 50, "\u3000\u00a0\u2009 \u200b",
    "👨‍👩‍👧‍👦 가족 🏳️‍🌈 🇰🇷 👍🏽 ❤️‍🔥", "e\u0301 ń Å \u1112\u1161\u11ab\u1100\u1173\u11af 한글 ᄀᆞ ㅋㅋㅋ ㅠㅠ",
    "大韓民國 憲法 第1條 ① 大韓民國은 民主共和國이다.", "GPT-4는 2023年に発表された AI입니다. Привет, мир! مرحبا",
    "1234567890" * 30, "３．１４１５９ ①②③ ⅠⅡⅢ ½ x² ∑∫√", "a" * 3000, "가" * 3000, "가나다라마바사" * 200,
    "don't I'll WE'VE y'all 'tis", "https://example.com/경로?q=한국어&x=1#frag user@example.co.kr",
    "def f(x):\n    return x ** 2  # 주석\n\n\tif (a && b) { c->d(); }",
    "\ufffd\ufffd 깨진\ufffd글자 \x00\x01\x7f \u202e역방향\u202c \ufeff",
    "제1조(목적) 이 법은 … 한다.\n② 「민법」 제3조에도 불구하고 ─ ※ 참고: ★☆ →←",
)


def _hard_strings(info: TokenizerInfo) -> list[str]:
    """The fixed strings, plus every added/special token of this tokenizer inside and beside text."""
    added = [token.content for token in info.backend.get_added_tokens_decoder().values()]
    with_added = [f"앞{token}뒤 {token}{token} x{token}\n" for token in added]
    return list(HARD_STRINGS) + with_added + ["".join(added)]


def first_difference(engine, reference, texts: list[str]) -> str | None:
    """None when both engines give the same ids for every text; else which text differs and how."""
    ids, lengths = engine.encode(texts)
    expected_ids, expected_lengths = reference.encode(texts)
    if np.array_equal(lengths, expected_lengths) and np.array_equal(ids, expected_ids):
        return None
    starts = np.concatenate([[0], np.cumsum(expected_lengths)])
    got_starts = np.concatenate([[0], np.cumsum(lengths)])
    for index, text in enumerate(texts):
        got = ids[got_starts[index]:got_starts[index + 1]]
        want = expected_ids[starts[index]:starts[index + 1]]
        if not np.array_equal(got, want):
            return f"text {text[:60]!r}{'…' if len(text) > 60 else ''}: {got[:12].tolist()} != {want[:12].tolist()}"
    return "the batch's ids differ"


@dataclass
class EngineChoice:
    engine: object
    requested: str
    checked_texts: int = 0
    fallback_reason: str | None = None

    def describe(self) -> dict:
        return {"name": self.engine.name, "version": self.engine.version, "requested": self.requested,
                "checked_texts": self.checked_texts, "fallback_reason": self.fallback_reason}


def select_engine(info: TokenizerInfo, requested: str, sample: list[str]) -> EngineChoice:
    """fastokens when installed and equal to the HF backend on the hard strings and `sample`, else HF.

    `requested` is --tokenizer_engine: 'hf' skips the check; 'fastokens' makes any failure an error.
    """
    if requested not in ENGINES:
        raise RankzeroError(f"--tokenizer_engine {requested}: choose one of {', '.join(ENGINES)}")
    reference = HFEngine(info)
    if requested == "hf":
        return EngineChoice(reference, requested)
    if not fastokens_installed():
        if requested == "fastokens":
            raise RankzeroError("--tokenizer_engine fastokens: the fastokens package is not installed "
                                "(pip install fastokens; wheels exist for Linux, macOS and Windows)")
        return EngineChoice(reference, requested, fallback_reason="fastokens is not installed")
    texts = _hard_strings(info) + sample
    try:
        engine = FastokensEngine(info)
        reason = first_difference(engine, reference, texts)
        if reason:
            reason = f"its ids differ from the HF tokenizer's on {reason}"
    except Exception as error:  # fastokens rejects what it does not implement (normalizers, pre-tokenizers…)
        reason = f"it cannot run this tokenizer ({type(error).__name__}: {error})"
    if reason is None:
        return EngineChoice(engine, requested, checked_texts=len(texts))
    if requested == "fastokens":
        raise RankzeroError(f"--tokenizer_engine fastokens: {reason}; use --tokenizer_engine auto (falls back to the "
                            "HF tokenizer) or hf")
    logger.warning("tokenizer engine: using the HF tokenizer, not fastokens: %s", reason)
    return EngineChoice(reference, requested, checked_texts=len(texts), fallback_reason=reason)


# ---------------------------------------------------------------------------------------------
# Long texts: pieces cut where every regex pre-tokenizer cuts anyway

# Where a long text may be cut: before whitespace that follows a letter, or (for pre-tokenizers that
# add a prefix space to a text that does not start with one, like GPT-2's) only before a space.
_CUTS = (re.compile(r"(?<=[^\W\d_])[ \t\n]"), re.compile(r"(?<=[^\W\d_]) "))
_PROBES = [("한국어는", " 교착어이다."), ("word", " next"), ("大韓", " 民國"), ("abc", "  \n두 줄"),
           ("문장이다", "\n\n다음 문단"), ("end", "\n  indented"), ("가나다", "\t탭")]


def split_point(engine) -> re.Pattern | None:
    """The first cut pattern whose probe strings keep this tokenizer's ids across the cut, or None."""
    for cut in _CUTS:
        probes = [(a, b) for a, b in _PROBES if cut.match(a[-1] + b, 1)]
        whole_ids, _ = engine.encode([a + b for a, b in probes])
        parts_ids, _ = engine.encode([part for pair in probes for part in pair])
        if np.array_equal(whole_ids, parts_ids):
            return cut
    return None


def split_long(text: str, limit: int = PIECE_CHARS, cut: re.Pattern = _CUTS[0]) -> list[str]:
    """`text` in pieces of at most `limit` chars, each cut (where possible) where `cut` matches.

    A stretch of `limit` chars without such a place (a blob, not prose) is cut hard: the ids around
    that one cut may differ from encoding the text whole.
    """
    pieces, start = [], 0
    while len(text) - start > limit:
        window = text[start + limit // 2:start + limit]
        end = start + limit
        for match in cut.finditer(window):
            end = start + limit // 2 + match.start()
        pieces.append(text[start:end])
        start = end
    pieces.append(text[start:])
    return pieces


# ---------------------------------------------------------------------------------------------
# Documents → flat ids with bos/eos (and labels)


class DocumentEncoder:
    """Encodes documents (lists of (text, trainable) segments) into one flat id array per batch."""

    def __init__(self, info: TokenizerInfo, engine=None):
        self.engine = engine or HFEngine(info)
        self.bos = np.asarray(info.bos_ids, dtype=np.int32)
        self.eos = info.eos_id
        self._cut: re.Pattern | None | bool = False  # False: not probed yet
        self._warned_whole = False

    def encode(self, documents: list[list[tuple[str, bool]]], with_labels: bool = False):
        """Return (ids, lengths, labels): flat int32 ids, int64 per-document lengths, labels or None."""
        if with_labels:
            texts = [text for segments in documents for text, _ in segments]
            owner = np.repeat(np.arange(len(documents)), [len(segments) for segments in documents])
            trainable = np.fromiter((t for segments in documents for _, t in segments), dtype=bool, count=len(texts))
        else:  # a document's segments are one text: tokens may merge across segment edges
            texts = [segments[0][0] if len(segments) == 1 else "".join(t for t, _ in segments) for segments in documents]
            owner, trainable = np.arange(len(documents)), None
        texts, owner, trainable = self._split_long_texts(texts, owner, trainable)
        ids, text_lengths = self._encode_bounded(texts)
        labels = None
        if with_labels:
            labels = np.where(np.repeat(trainable, text_lengths), ids, IGNORE_INDEX).astype(np.int32)
        lengths = np.bincount(owner, weights=text_lengths, minlength=len(documents)).astype(np.int64)
        return self._add_bos_eos(ids, lengths, labels)

    def _split_long_texts(self, texts, owner, trainable):
        long = [index for index, text in enumerate(texts) if len(text) > PIECE_CHARS]
        if not long:
            return texts, owner, trainable
        if self._cut is False:
            self._cut = split_point(self.engine)
        if self._cut is None:
            if not self._warned_whole:
                self._warned_whole = True
                logger.warning("a document of %s characters is encoded whole: this tokenizer's pre-tokenizer does not "
                               "cut between a letter and whitespace, so pieces could change its ids (memory grows "
                               "with the document)", f"{max(len(texts[i]) for i in long):,}")
            return texts, owner, trainable
        pieces = [split_long(text, PIECE_CHARS, self._cut) if len(text) > PIECE_CHARS else [text] for text in texts]
        counts = [len(p) for p in pieces]
        flat = [piece for group in pieces for piece in group]
        return flat, np.repeat(owner, counts), (np.repeat(trainable, counts) if trainable is not None else None)

    def _encode_bounded(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """One encode call per ≤ CALL_CHARS of text, so a chunk of long documents stays bounded."""
        if sum(map(len, texts)) <= CALL_CHARS:
            return self.engine.encode(texts)
        parts, batch, size = [], [], 0
        for text in texts:
            if batch and size + len(text) > CALL_CHARS:
                parts.append(self.engine.encode(batch))
                batch, size = [], 0
            batch.append(text)
            size += len(text)
        parts.append(self.engine.encode(batch))
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def _add_bos_eos(self, ids, lengths, labels):
        """`[bos] + document + [eos]` for every document, in one vectorised insert."""
        ends = np.cumsum(lengths)
        count, bos_count = len(lengths), len(self.bos)
        # np.insert keeps the given order among equal positions: document i's eos lands before
        # document i+1's bos, which is inserted at the same index.
        positions = np.concatenate([ends, np.repeat(ends - lengths, bos_count)])
        ids = np.insert(ids, positions, np.concatenate([np.full(count, self.eos, np.int32), np.tile(self.bos, count)]))
        if labels is not None:
            labels = np.insert(labels, positions, np.concatenate(
                [np.full(count, self.eos, np.int32), np.full(count * bos_count, IGNORE_INDEX, np.int32)]))
        return ids, lengths + bos_count + 1, labels
