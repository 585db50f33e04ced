"""Train a lossless byte-level BPE tokenizer for Korean-first text and save it as an HF fast tokenizer.

    from rankzero.tokenizer_trainer import train_tokenizer
    tokenizer = train_tokenizer(texts, vocab_size=32000, output_dir="tok/")       # from scratch
    tokenizer = train_tokenizer(ko_texts, 40000, "tok2/", base_tokenizer="tok/")   # extend, old ids kept
    AutoTokenizer.from_pretrained("tok/").is_fast  # True

`scripts/train_tokenizer.py` is the command line around it (streaming sources, caps, progress,
held-out chars/token).

Choices, and why:
- **No normalizer.** `decode(encode(x)) == x` for every string. NFKC would turn ① into 1 and
  full-width forms into ASCII (Korean legal and office text is full of both); NFD/NFC would
  change the bytes of archaic or decomposed Hangul. The model sees the text as written.
- **Byte level.** Every string is bytes and all 256 bytes are in the vocabulary, so there is never
  an unknown token at run time (`<unk>` exists only because HF tooling expects one).
- **Pre-tokenization** (`PRETOKENIZE_PATTERN`, applied before the byte mapping):
  * a Hangul run (syllables and jamo, so ㅋㅋㅋ too) is one piece *with its leading space*: a Korean
    eojeol — stem plus particles/endings, " 한국어는" — is the unit BPE should learn merges inside,
    and keeping the space with it makes the space cost nothing, as " the" does in English;
  * other letters (Latin, Hanja, …) form their own runs, so "abc한국어" never glues two scripts
    into tokens that only fit one spelling;
  * every digit is its own piece (a leading space may attach to the first): numbers then cost one
    token per digit, and the model sees 2024 as 2-0-2-4 instead of a random split like 20|24;
  * one sentence mark (. , ? !) may end a Hangul run: Korean sentences end in a handful of
    endings (다. 요. 까? 니다.), so "니다." is one of the most frequent pieces there is, and letting
    BPE merge it is worth ~5% chars/token on Korean prose (bench/RESULTS.md, "Tokenizer");
  * other punctuation and symbols are separated from words, but a run of them stays together,
    which keeps code operators (==, ->, **) cheap;
  * whitespace follows GPT-2: a run of spaces gives all but its last to a separate piece so
    indentation tokenizes regularly; line breaks are their own pieces;
  * no space is added before the text (GPT-2's `add_prefix_space`): it cannot be undone exactly.
  Apart from the sentence marks these rules cut Korean eojeol where GPT-2's do; see
  bench/RESULTS.md for chars/token against a plain byte-level BPE of the same vocabulary size.
- **Special tokens** `<unk> <s> </s> <pad> <|im_start|> <|im_end|>` take ids 0..5, the placeholders
  of masked personal information (`|||PHONE_NUMBER|||`, ...; rankzero/data/screen/pii.py) the next ids, and a
  ChatML chat template is saved, so `apply_chat_template` works. Encoding adds no special
  tokens by itself: the data pipeline decides where `</s>` goes between documents. (A literal
  "</s>" inside raw text still encodes as the special token, as in every HF tokenizer.)
- **Extending** (`base_tokenizer=`) continues BPE training on top of the base: the new text is
  first segmented with *all* the base's merges, then new merges are learned over those segments and
  appended after the base's merges, each creating a token that did not exist, with an id after
  every existing id. Because every new merge yields a brand-new token, no earlier merge can fire
  after it, so the tokenizer applies merges exactly in the order training simulated them: all
  new tokens are reachable and every old token keeps its id. (Training a separate BPE and pasting
  its merges after the base's would leave many merges dead: their halves are never formed once the
  base's merges, which run first, have chopped the word differently.)
"""

from __future__ import annotations

import contextlib
import heapq
import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator

from rankzero.data.screen.pii import PLACEHOLDER_TOKENS

if TYPE_CHECKING:
    import transformers

UNK_TOKEN = "<unk>"
BOS_TOKEN = "<s>"
EOS_TOKEN = "</s>"
PAD_TOKEN = "<pad>"
CHAT_TOKENS = ["<|im_start|>", "<|im_end|>"]
# The placeholders of masked personal information (|||PHONE_NUMBER|||, ...) are one token each, never split
# into pieces the model could learn to complete (rankzero/data/screen/pii.py).
RESERVED_TOKENS = [*CHAT_TOKENS, *PLACEHOLDER_TOKENS]
SPECIAL_TOKENS = [UNK_TOKEN, BOS_TOKEN, EOS_TOKEN, PAD_TOKEN, *RESERVED_TOKENS]

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Alternatives are tried left to right at each position (see the module docstring for the why):
PRETOKENIZE_PATTERN = "|".join([
    r"'(?:[sS]|[tT]|[mM]|[dD]|ll|LL|ve|VE|re|RE)",  # English contractions: don't → don 't
    r" ?\p{Hangul}+[.,?!]?",                          # Korean eojeol with its leading space (+ 다. 요? 까!)
    r" ?[\p{L}\p{M}&&[^\p{Hangul}]]+",                # other letters, never mixed with Hangul
    r" ?\p{N}",                                       # one digit at a time
    r" ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*",                # punctuation/symbol runs (code operators)
    r"\s*[\r\n]+",                                    # line breaks, with the spaces before them
    r"\s+(?!\S)",                                     # spaces, leaving the last for the next word
    r"\s+",
])

MIN_FREQUENCY = 2  # a merge seen once is noise, not vocabulary


def build_backend(vocab_size: int, *, korean_choices: bool = True, show_progress: bool = False):
    """An untrained `tokenizers.Tokenizer` and its trainer.

    `korean_choices=False` gives the baseline the bench compares against: the default ByteLevel
    pre-tokenizer (GPT-2's regex, with its added prefix space) and nothing else — same byte-level
    model, special tokens, trainer and vocab size.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tokenizer.normalizer = None  # lossless: see the module docstring
    if korean_choices:
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(PRETOKENIZE_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel()
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=MIN_FREQUENCY,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=show_progress,
    )
    return tokenizer, trainer


def train_tokenizer(
    texts: Iterable[str],
    vocab_size: int,
    output_dir: str | Path,
    *,
    base_tokenizer: str | Path | None = None,
    show_progress: bool = False,
) -> "transformers.PreTrainedTokenizerFast":
    """Train on `texts` (streamed once), save an HF fast tokenizer in `output_dir`, and return it.

    With `base_tokenizer`, `vocab_size` is the size after extension (it must exceed the base's);
    every base token keeps its id and new Korean tokens are appended (see the module docstring).
    """
    if base_tokenizer is not None:
        return extend_tokenizer(texts, vocab_size, output_dir, base_tokenizer, show_progress=show_progress)
    minimum = 256 + len(SPECIAL_TOKENS)
    if vocab_size < minimum:
        raise ValueError(f"--vocab_size {vocab_size} is too small: a byte-level BPE needs at least {minimum} "
                         f"(256 bytes + {len(SPECIAL_TOKENS)} special tokens)")
    # The Rust progress bars only draw on a terminal; elsewhere they leave blank lines in logs.
    bars = show_progress and sys.stderr.isatty()
    backend, trainer = build_backend(vocab_size, show_progress=bars)
    from rankzero.logging_utils import stdout_to_stderr

    # The Rust trainer draws its progress bars on stdout; keep stdout for results.
    with stdout_to_stderr() if bars else contextlib.nullcontext():
        backend.train_from_iterator(texts, trainer=trainer)
    return save_fast_tokenizer(backend, output_dir)


def save_fast_tokenizer(backend, output_dir: str | Path, *, chat_template: str | None = CHAT_TEMPLATE,
                        special: dict[str, str] | None = None) -> "transformers.PreTrainedTokenizerFast":
    """Wrap a `tokenizers.Tokenizer` as an HF fast tokenizer and save it (tokenizer.json + config)."""
    from transformers import PreTrainedTokenizerFast

    special = special or {"bos_token": BOS_TOKEN, "eos_token": EOS_TOKEN, "pad_token": PAD_TOKEN,
                          "unk_token": UNK_TOKEN}
    extra = [t for t in RESERVED_TOKENS if t not in special.values()]
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        **special,
        extra_special_tokens=extra,
        chat_template=chat_template,
        # The transformers default would "clean up" " ," into "," on decode and break the round trip.
        clean_up_tokenization_spaces=False,
        add_prefix_space=False,
    )
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    # The chat template goes inside tokenizer_config.json (not chat_template.jinja), and the class is
    # named PreTrainedTokenizerFast: both load in transformers 4.x as well as 5.x (serving stacks lag).
    tokenizer.save_pretrained(str(output_dir), save_jinja_files=False)
    config_path = output_dir / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config_path.write_text(json.dumps(config, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return tokenizer


def chars_per_token(tokenizer, texts: list[str]) -> float:
    """Characters per token over `texts`, encoded without special tokens on the Rust backend."""
    backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
    if not texts:
        return float("nan")
    encodings = backend.encode_batch_fast(texts, add_special_tokens=False)
    tokens = sum(len(e.ids) for e in encodings)
    return sum(len(t) for t in texts) / max(1, tokens)


# ---------------------------------------------------------------------------------------------
# Extending an existing byte-level BPE: continued training on top of all of its merges.
# ---------------------------------------------------------------------------------------------

def extend_tokenizer(texts: Iterable[str], vocab_size: int, output_dir: str | Path, base_tokenizer: str | Path,
                     *, show_progress: bool = False) -> "transformers.PreTrainedTokenizerFast":
    from tokenizers import Tokenizer, pre_tokenizers
    from transformers import AutoTokenizer

    base_dir = Path(base_tokenizer)
    if not (base_dir / "tokenizer.json").is_file():
        raise FileNotFoundError(f"--base_tokenizer {base_dir}: no tokenizer.json there (need an HF fast tokenizer dir)")
    base = AutoTokenizer.from_pretrained(str(base_dir))
    state = json.loads(base.backend_tokenizer.to_str())
    model = state["model"]
    if model.get("type") != "BPE" or "ByteLevel" not in json.dumps(state.get("pre_tokenizer")):
        raise ValueError(f"--base_tokenizer {base_dir}: only byte-level BPE tokenizers can be extended "
                         f"(found model {model.get('type')}, pre-tokenizer "
                         f"{(state.get('pre_tokenizer') or {}).get('type')})")
    vocab: dict[str, int] = model["vocab"]
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    next_id = max([*vocab.values(), *(t["id"] for t in state.get("added_tokens", []))]) + 1
    if vocab_size <= next_id:
        raise ValueError(f"--vocab_size {vocab_size} must be larger than the base tokenizer's {next_id} ids "
                         "when extending with --base_tokenizer (it is the size after extension)")

    # Missing bytes would make some text unencodable: add them first so the result is lossless.
    for char in sorted(pre_tokenizers.ByteLevel.alphabet()):
        if char not in vocab:
            vocab[char] = next_id
            next_id += 1

    base_backend = base.backend_tokenizer
    word_counts: Counter[str] = Counter()
    for text in texts:
        for piece, _ in base_backend.pre_tokenizer.pre_tokenize_str(text):
            word_counts[piece] += 1
    segment = Tokenizer.from_str(json.dumps({**state, "model": {**model, "vocab": vocab}})).model
    words = [[t.value for t in segment.tokenize(w)] for w in word_counts]
    counts = list(word_counts.values())

    # Special tokens the base lacks (ours fill in for missing bos/eos/pad/unk and the chat tokens).
    base_vocab = base.get_vocab()
    defaults = {"bos_token": BOS_TOKEN, "eos_token": EOS_TOKEN, "pad_token": PAD_TOKEN, "unk_token": UNK_TOKEN}
    special = {name: getattr(base, name, None) or default for name, default in defaults.items()}
    to_add = [t for t in dict.fromkeys([*special.values(), *RESERVED_TOKENS]) if t not in base_vocab]

    budget = vocab_size - next_id - len(to_add)
    new_merges = _learn_merges(words, counts, vocab, budget, show_progress=show_progress)
    for left, right in new_merges:
        vocab[left + right] = next_id
        next_id += 1
    model["vocab"] = vocab
    model["merges"] = [[a, b] for a, b in merges + new_merges]
    state["model"] = model
    extended = Tokenizer.from_str(json.dumps(state))
    extended.add_special_tokens(to_add)
    if show_progress:
        print(f"extended {base_dir}: +{len(new_merges)} merges, {extended.get_vocab_size()} tokens",
              file=sys.stderr, flush=True)
    return save_fast_tokenizer(extended, output_dir, chat_template=base.chat_template or CHAT_TEMPLATE,
                               special=special)


def _learn_merges(words: list[list[str]], counts: list[int], vocab: dict[str, int], budget: int,
                  *, show_progress: bool = False) -> list[tuple[str, str]]:
    """Greedy BPE over pre-segmented words: up to `budget` merges, each making a token not in `vocab`.

    A pair whose concatenation already exists (reached through another path) is skipped: merging
    into an old token could let an old merge fire after a new one, which training would not model.
    """
    pair_counts: Counter[tuple[str, str]] = Counter()
    where: dict[tuple[str, str], set[int]] = defaultdict(set)
    for index, (word, count) in enumerate(zip(words, counts)):
        for pair in zip(word, word[1:]):
            pair_counts[pair] += count
            where[pair].add(index)
    heap = [(-c, pair) for pair, c in pair_counts.items()]
    heapq.heapify(heap)
    created: set[str] = set()
    merges: list[tuple[str, str]] = []
    started = last_report = time.monotonic()
    while heap and len(merges) < budget:
        negative, pair = heapq.heappop(heap)
        count = pair_counts.get(pair, 0)
        if count != -negative:  # stale entry: its count changed since it was pushed
            if count >= MIN_FREQUENCY:
                heapq.heappush(heap, (-count, pair))
            continue
        if count < MIN_FREQUENCY:
            break
        merged = pair[0] + pair[1]
        if merged in vocab or merged in created:
            continue
        created.add(merged)
        merges.append(pair)
        touched: set[tuple[str, str]] = set()
        for index in list(where.pop(pair, ())):
            word, weight = words[index], counts[index]
            for old in zip(word, word[1:]):
                pair_counts[old] -= weight
                touched.add(old)
            word = _apply_merge(word, pair, merged)
            words[index] = word
            for new in zip(word, word[1:]):
                pair_counts[new] += weight
                where[new].add(index)
                touched.add(new)
        pair_counts.pop(pair, None)
        for other in touched:
            if other != pair and pair_counts.get(other, 0) >= MIN_FREQUENCY:
                heapq.heappush(heap, (-pair_counts[other], other))
        if show_progress and time.monotonic() - last_report > 2:
            last_report = time.monotonic()
            print(f"extending: {len(merges)}/{budget} merges, {len(merges) / (last_report - started):.0f}/s",
                  file=sys.stderr, flush=True)
    return merges


def _apply_merge(word: list[str], pair: tuple[str, str], merged: str) -> list[str]:
    """Merge every non-overlapping occurrence of `pair`, left to right (as the BPE model does)."""
    out: list[str] = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == pair[0] and word[i + 1] == pair[1]:
            out.append(merged)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


class DocumentStream:
    """Stream documents for training: cap them, hold some out, and show progress on stderr.

    Iterating yields the training documents; afterwards `heldout` holds every document whose running
    index crossed a multiple of 1/heldout_fraction (deterministic, spread over the whole stream, never
    trained on; at most `heldout_max_bytes` of them are kept). Reading stops at `max_documents` or
    once `max_bytes` (UTF-8, held-out included) have been read.
    """

    def __init__(self, texts: Iterable[str], *, max_documents: int | None = None, max_bytes: int | None = None,
                 heldout_fraction: float = 0.0, heldout_max_bytes: int = 8 << 20, every_s: float = 2.0,
                 stream=None):
        self.texts = texts
        self.max_documents = max_documents
        self.max_bytes = max_bytes
        self.heldout_fraction = heldout_fraction
        self.heldout_max_bytes = heldout_max_bytes
        self.every_s = every_s
        self.stream = stream or sys.stderr
        self.heldout: list[str] = []
        self.documents = 0
        self.bytes = 0
        self.elapsed_s = 0.0

    def _report(self, started: float, final: bool = False) -> None:
        elapsed = max(1e-9, time.monotonic() - started)
        cap = ""
        if self.max_bytes:
            cap = f" ({100 * self.bytes / self.max_bytes:.0f}% of --max_bytes)"
        elif self.max_documents:
            cap = f" ({100 * self.documents / self.max_documents:.0f}% of --max_documents)"
        head = "read" if final else "reading"
        print(f"{head}: {self.documents:,} docs, {self.bytes / 1e6:.1f} MB{cap}, "
              f"{self.documents / elapsed:,.0f} docs/s, {self.bytes / 1e6 / elapsed:.2f} MB/s"
              + (f", {elapsed:.1f} s, {len(self.heldout):,} held out" if final else ""),
              file=self.stream, flush=True)

    def __iter__(self) -> Iterator[str]:
        started = last = time.monotonic()
        heldout_bytes = 0
        for text in self.texts:
            if self.max_documents is not None and self.documents >= self.max_documents:
                break
            if self.max_bytes is not None and self.bytes >= self.max_bytes:
                break
            size = len(text.encode("utf-8"))
            index = self.documents
            self.documents += 1
            self.bytes += size
            if int((index + 1) * self.heldout_fraction) > int(index * self.heldout_fraction) \
                    and heldout_bytes + size <= self.heldout_max_bytes:
                self.heldout.append(text)
                heldout_bytes += size
            else:
                yield text
            if time.monotonic() - last >= self.every_s:
                last = time.monotonic()
                self._report(started)
        self.elapsed_s = time.monotonic() - started
        self._report(started, final=True)


def hangul_share(text: str) -> float:
    """Share of non-space characters that are Hangul (syllables or jamo)."""
    letters = [c for c in text if not c.isspace()]
    if not letters:
        return 0.0
    hangul = sum(1 for c in letters if "\uac00" <= c <= "\ud7a3" or "\u1100" <= c <= "\u11ff"
                 or "\u3130" <= c <= "\u318f")
    return hangul / len(letters)
