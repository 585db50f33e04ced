"""Evaluation that reads the same whatever the tokenizer: bits per UTF-8 byte, per source, and a fixed prompt's sample.

    scores = EvalScores(token_bytes(tokenizer), source_names(manifest))     # once; the trainer feeds it
    rows = scores.row_sums(logits, labels, token_sources)                   # per evaluation batch, every rank
    scores.add(accelerator.gather_for_metrics(rows)); scores.metrics("eval")  # after the loop
    sampler = FixedPromptSample(tokenizer, eval_dataset, output_dir)        # rank 0: sampler.write(model, step)

A loss in nats per token moves with the tokenizer: after extending a vocabulary each token covers more text, so
the same model reads worse per token while it predicts the text as well. Bits per byte divides by the text
instead: eval_bits_per_byte = Σ nats of the scored tokens / ln 2 / Σ UTF-8 bytes those tokens stand for. The
bytes come from the tokens actually scored (`token_bytes`: each id's share of the text), so rows packed across
documents, documents cut at a row's edge and the unscored first token of a row (nothing in the row predicts it)
need no bookkeeping of their own. Special tokens (EOS) stand for no text: like nanochat's `evaluate_bpb` they
count in neither sum, so where a tokenizer marks document ends does not move the figure.

The validation split keeps each document piece's source (`document_sources`, pack.SourcePacker); the collator
spreads it over the tokens, and the sums above are grouped by it in the same pass: with two or more sources,
`eval_<name>_loss` and `eval_<name>_bits_per_byte` for each, no extra evaluation.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import re
from pathlib import Path

import numpy as np
import torch

from rankzero.data.encode import IGNORE_INDEX

REPLACEMENT = "\ufffd"
PROMPT_TOKENS = 16  # the fixed prompt: the start of the first document the validation split's first row begins
SAMPLE_TOKENS = 32  # greedy tokens generated from it at each evaluation


def token_bytes(tokenizer) -> np.ndarray:
    """The UTF-8 bytes of text each token id stands for (0 for special tokens), as an int64 array over len(tokenizer).

    Byte-level BPE (GPT-2, Llama 3, rankzero's own): every character of a vocabulary entry is one byte (the
    bytes_to_unicode alphabet). SentencePiece-style vocabularies: `<0xNN>` is one byte, `▁` a space, the rest
    their UTF-8 (a leading space the tokenizer adds to a document counts as text). Added tokens that are not
    special are their content's UTF-8."""
    added = tokenizer.added_tokens_decoder  # id → AddedToken
    decoder = tokenizer.backend_tokenizer.decoder  # its own JSON only: the whole tokenizer's holds every merge
    byte_level = decoder is not None and b'"ByteLevel"' in decoder.__getstate__()
    counts = np.zeros(len(tokenizer), dtype=np.int64)
    for index, token in enumerate(tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))):
        if token is None:
            continue
        if index in added:
            counts[index] = 0 if added[index].special else len(added[index].content.encode("utf-8"))
        elif byte_level:
            counts[index] = len(token)
        elif re.fullmatch(r"<0x[0-9A-Fa-f]{2}>", token):
            counts[index] = 1
        else:
            counts[index] = len(token.replace("\u2581", " ").encode("utf-8"))
    return counts


def source_names(manifest: dict) -> list[str] | None:
    """A metric name for each source of the prepared data (its position in the manifest's `sources`), or None when
    fewer than two sources gave held-out documents: then the overall figures say it all."""
    sources = manifest.get("sources") or []
    if sum(1 for source in sources if source.get("validation_documents")) < 2:
        return None
    names = []
    for index, source in enumerate(sources):
        spec = str(source.get("spec", index)).rsplit("@", 1)[0].rstrip("/")
        stem = re.sub(r"(\.(jsonl|json|parquet|csv|txt|arrow|gz|zst|bz2|xz))+$", "", spec.rsplit("/", 1)[-1])
        name = re.sub(r"\W+", "_", stem).strip("_").lower() or f"source{index}"
        names.append(name if name not in names else f"{name}_{index}")
    return names


class EvalScores:
    """Per source: nats and count of every scored token (the loss), nats and bytes of the text tokens (bits per
    byte), summed over one evaluation."""

    CHANNELS = 4  # nats, tokens, text nats, text bytes

    def __init__(self, token_bytes: np.ndarray, names: list[str] | None):
        self.token_bytes = torch.as_tensor(token_bytes)
        self.names = names
        self.sources = len(names) if names else 1
        self.reset()

    def reset(self) -> None:
        self.sums = torch.zeros(self.sources, self.CHANNELS, dtype=torch.float64)
        self.unsourced = False  # a batch came without token_sources: no per-source figure can be right

    def row_sums(self, logits: torch.Tensor, labels: torch.Tensor, token_sources: torch.Tensor | None) -> torch.Tensor:
        """(rows, sources, CHANNELS) for one batch: a row apiece, so that accelerate's gather_for_metrics can drop
        the rows it repeated to even out the last batch. Token t predicts label t + 1, as in the model's loss."""
        labels = labels[:, 1:]
        scored = labels != IGNORE_INDEX
        targets = labels.clamp(min=0)
        nats = torch.stack([torch.nn.functional.cross_entropy(row[:-1].float(), target, reduction="none")
                            for row, target in zip(logits, targets)])  # a row at a time: one row's fp32 logits
        nats = nats.double() * scored
        if self.token_bytes.device != labels.device:  # moved once, not a vocabulary's worth of bytes every batch
            self.token_bytes = self.token_bytes.to(labels.device)
        text_bytes = self.token_bytes[targets] * scored
        text = text_bytes > 0
        channels = torch.stack([nats, scored.double(), nats * text, text_bytes.double()], dim=-1)
        self.unsourced |= token_sources is None
        sources = (token_sources[:, 1:].to(labels.device).clamp(0, self.sources - 1) if token_sources is not None
                   and self.names else torch.zeros_like(labels))
        rows = torch.zeros(len(labels), self.sources, self.CHANNELS, dtype=torch.float64, device=labels.device)
        return rows.scatter_add_(1, sources.unsqueeze(-1).expand_as(channels), channels)

    def add(self, rows: torch.Tensor) -> None:
        self.sums += rows.sum(dim=0).cpu()

    def metrics(self, prefix: str) -> dict[str, float]:
        """`<prefix>_bits_per_byte` and, with named sources, each one's loss and bits per byte."""
        def bits(sums) -> float | None:
            return round(float(sums[2] / math.log(2) / sums[3]), 6) if sums[3] > 0 else None

        metrics = {f"{prefix}_bits_per_byte": bits(self.sums.sum(dim=0))}
        for name, sums in zip(() if self.unsourced else self.names or (), self.sums):
            if sums[1] > 0:
                metrics[f"{prefix}_{name}_loss"] = round(float(sums[0] / sums[1]), 6)
                metrics[f"{prefix}_{name}_bits_per_byte"] = bits(sums)
        return {key: value for key, value in metrics.items() if value is not None}


@contextlib.contextmanager
def kept_rng_state():
    """Every random stream training draws from (Python, numpy, torch, CUDA) as it was before: an evaluation starts a
    DataLoader iterator, which draws its workers' base seed from torch's stream, and would otherwise move the order
    the training data is read in (RandomSampler draws there too). With it, evaluating changes no training step."""
    states = random.getstate(), np.random.get_state(), torch.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    try:
        yield
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


def whole_characters(tokenizer, ids: list[int]) -> str:
    """The generated ids as text, without the U+FFFD of byte sequences left unfinished: the last tokens are
    dropped until the text ends on a whole character (a UTF-8 character is at most 4 bytes), and a stray
    sequence in the middle is left out."""
    for end in range(len(ids), max(len(ids) - 4, 0) - 1, -1):
        text = tokenizer.decode(ids[:end], skip_special_tokens=True)
        if not text.endswith(REPLACEMENT):
            break
    return text.replace(REPLACEMENT, "")


class FixedPromptSample:
    """A greedy continuation of one fixed prompt at each evaluation, printed and kept in `eval_samples.jsonl`:
    what the numbers mean, read as text. The prompt is the start of a held-out document, so it is in the data's
    language and never trained on. Rank 0 alone generates: not under FSDP or ZeRO-3, where every rank would
    have to join each forward."""

    def __init__(self, tokenizer, eval_dataset, output_dir: Path):
        self.tokenizer = tokenizer
        self.path = Path(output_dir) / "eval_samples.jsonl"
        row = eval_dataset[0]
        pieces = list(row.get("document_lengths", [len(row["input_ids"])]))
        start = int(pieces[0]) if len(pieces) > 1 else 0  # the first piece may be the end of a cut document
        self.prompt = [int(token) for token in row["input_ids"][start:start + PROMPT_TOKENS]]

    @torch.no_grad()
    def write(self, model, step: int) -> None:
        was_training = model.training
        model.eval()
        try:
            device = next(model.parameters()).device
            output = model.generate(torch.tensor([self.prompt], device=device), max_new_tokens=SAMPLE_TOKENS,
                                    do_sample=False, use_cache=True, attention_mask=None,
                                    pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id)
        finally:
            model.train(was_training)
        prompt = whole_characters(self.tokenizer, self.prompt)
        sample = whole_characters(self.tokenizer, output[0, len(self.prompt):].tolist())
        print(f"eval sample at step {step}: {prompt!r} → {sample!r}", flush=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"step": step, "prompt": prompt, "sample": sample}, ensure_ascii=False) + "\n")


def evaluation_parts(tokenizer, eval_dataset, prepared_dir: Path, training, sharded: bool):
    """What the trainer evaluates with, beside its loss: (EvalScores, FixedPromptSample or None, notes), or
    (None, None, []) without held-out data. `sharded`: FSDP or ZeRO-3, where the sample is left out."""
    if eval_dataset is None:
        return None, None, []
    manifest = json.loads((Path(prepared_dir) / "manifest.json").read_text())
    names = source_names(manifest) if "document_sources" in eval_dataset.column_names else None
    scores = EvalScores(token_bytes(tokenizer), names)
    if sharded:
        return scores, None, ["no fixed-prompt sample at the evaluations: under FSDP or ZeRO-3 every rank would have "
                              "to join each generation step (scripts/generate.py samples the saved model)"]
    return scores, FixedPromptSample(tokenizer, eval_dataset, training.output_dir), []
