"""Tokens: encode documents on the Rust backend of a fast tokenizer, ids kept in numpy.

`load_tokenizer(DIR)` reads `tokenizer.json` with the `tokenizers` library directly: importing
transformers costs ~3 s (it pulls in torch) and its Python wrapper is ~3x slower per batch than
`Tokenizer.encode_batch_fast` (DESIGN.md). A directory without `tokenizer.json` is loaded through
transformers once to see whether it converts to a fast tokenizer; a slow-only tokenizer is an error.

Each document becomes `[bos] + ids + [eos]` (bos only when the tokenizer's template adds one).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import numpy as np

from rankzero.errors import RankzeroError

IGNORE_INDEX = -100


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
    chat_template: str | None
    special_tokens: dict[str, str]
    content_hash: str


def load_tokenizer(path: str | Path) -> TokenizerInfo:
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
    return TokenizerInfo(str(directory), backend, eos_id, tuple(bos_ids), backend.get_vocab_size(with_added_tokens=True),
                         chat_template, special, digest.hexdigest())


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


class DocumentEncoder:
    """Encodes documents (lists of (text, trainable) segments) into one flat id array per batch."""

    def __init__(self, info: TokenizerInfo):
        self.backend = info.backend
        self.bos = list(info.bos_ids)
        self.eos = info.eos_id
        self.eos_tail = (info.eos_id,)
        self.dtype = np.int32

    def encode(self, documents: list[list[tuple[str, bool]]], with_labels: bool = False):
        """Return (ids, lengths, labels): flat int32 ids, int64 per-document lengths, labels or None."""
        if not with_labels:
            texts = [segments[0][0] if len(segments) == 1 else "".join(t for t, _ in segments) for segments in documents]
            encodings = self.backend.encode_batch_fast(texts, add_special_tokens=False)
            # The ids only leave Rust as one Python list per document. Streaming them through
            # `np.fromiter` converts each list as it is made and frees it at once: ~2x cheaper than
            # collecting one list of every id, which also keeps ~9 MB of int objects alive per chunk
            # that the allocator hands back to the OS and faults in again for the next one.
            lengths = np.fromiter(map(len, encodings), dtype=np.int64, count=len(encodings)) + (len(self.bos) + 1)
            stream = chain.from_iterable(part for encoding in encodings for part in (self.bos, encoding.ids, self.eos_tail))
            return np.fromiter(stream, dtype=self.dtype, count=int(lengths.sum())), lengths, None
        flat = [text for segments in documents for text, _ in segments]
        encodings = self.backend.encode_batch_fast(flat, add_special_tokens=False)
        all_ids, all_labels, lengths = [], [], []
        cursor = 0
        for segments in documents:
            doc_ids, doc_labels = list(self.bos), [IGNORE_INDEX] * len(self.bos)
            for _, trainable in segments:
                piece = encodings[cursor].ids
                cursor += 1
                doc_ids += piece
                doc_labels += piece if trainable else [IGNORE_INDEX] * len(piece)
            doc_ids.append(self.eos)
            doc_labels.append(self.eos)
            all_ids += doc_ids
            all_labels += doc_labels
            lengths.append(len(doc_ids))
        return (np.asarray(all_ids, dtype=self.dtype), np.asarray(lengths, dtype=np.int64),
                np.asarray(all_labels, dtype=self.dtype))
