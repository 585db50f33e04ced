"""Turn prepared rows into model batches: packed blocks stack as they are, unpacked rows pad per batch.

    collator = BlockCollator(pad_token_id=tok.pad_token_id, mask_across_documents=False)
    batch = collator([{"input_ids": np.array([...]), "document_lengths": np.array([...])}, ...])

- Packed rows are all `max_seq_length` long: stacked, no padding, no attention mask (SDPA then
  takes its causal fast path).
- `mask_across_documents`: position ids restart at every document inside a row and no attention
  mask is sent, so transformers builds a block-causal mask (sdpa and eager: B×1×T×T; flex: a block
  mask). With `flatten` (flash_attention_2) the batch goes through transformers'
  `DataCollatorWithFlattening` instead: one flat row with `cu_seq_lens_*` for flash-attn's varlen
  kernel — no mask at all. Either way the first token of each document gets label -100: nothing
  before it in the row may predict it. model.py says what each backend costs.
  Rows of different lengths (SFT rows of whole samples) are padded to the batch's longest, rounded up
  to `pad_to_multiple_of`, and the padding is one more document: its positions restart at 0, its
  labels are -100, and still no attention mask is sent, so the packed-sequence mask keeps every
  sample to itself and the padding out of every sample's view.
- Unpacked rows are padded to the batch's longest row, rounded up to `pad_to_multiple_of`; padding
  gets attention mask 0 and label -100.
- SFT rows carry `labels` (prompt tokens already -100); pretraining learns every token.
- Validation rows carry `document_sources` (each document piece's source): the batch gets `token_sources`,
  the source of each token laid out like `labels` (padding: 0, never scored), which the trainer pops to score
  the evaluation per source (evaluation.py).
- Each batch reports `num_tokens` (real tokens, no padding) as a plain int for the throughput
  meter; the trainer pops it before the forward pass.
- With `vocab_size`, an id outside the tokenizer's range (a byte of a published shard changed on disk)
  is reported as the batch's `data_problem`, which the trainer raises as an error naming the prepared
  dir: raised here, in a DataLoader worker, it would reach the user wrapped in the worker's traceback,
  and left alone it is an IndexError in the embedding (a device-side assert on CUDA).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from rankzero.data.encode import IGNORE_INDEX


def document_position_ids(document_lengths, row_length: int) -> np.ndarray:
    """0, 1, … restarting at every document: [3, 2] → [0, 1, 2, 0, 1]."""
    lengths = np.asarray(document_lengths, dtype=np.int64)
    assert lengths.sum() == row_length, f"document_lengths sum to {lengths.sum()}, row has {row_length} tokens"
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.arange(row_length, dtype=np.int64) - starts


@dataclass
class BlockCollator:
    pad_token_id: int = 0
    mask_across_documents: bool = False
    flatten: bool = False  # flash_attention_2: one flat row per batch (see module docstring)
    pad_to_multiple_of: int = 8
    vocab_size: int | None = None  # the tokenizer's: ids outside [0, vocab_size) are damaged data

    def __call__(self, rows: list[dict]) -> dict:
        ids = [np.asarray(row["input_ids"], dtype=np.int64) for row in rows]
        problem = self._id_problem(ids)
        has_labels = "labels" in rows[0]
        labels = [np.asarray(row["labels"], dtype=np.int64) if has_labels else ids[i].copy() for i, row in enumerate(rows)]
        num_tokens = int(sum(len(x) for x in ids))
        if self.mask_across_documents and self.flatten:
            batch = self._flattened(rows, ids, labels)
        elif self.mask_across_documents:
            batch = self._documents(rows, ids, labels)
        elif len({len(x) for x in ids}) == 1:  # packed blocks: nothing to pad
            batch = {"input_ids": torch.from_numpy(np.stack(ids)), "labels": torch.from_numpy(np.stack(labels))}
        else:
            batch = self._padded(ids, labels)
        batch["num_tokens"] = num_tokens
        if "document_sources" in rows[0]:
            batch["token_sources"] = self._token_sources(rows, ids, batch["labels"].shape)
        if problem:
            batch["data_problem"] = problem
        return batch

    @staticmethod
    def _token_sources(rows, ids, shape) -> torch.Tensor:
        spread = [np.repeat(np.asarray(row["document_sources"], dtype=np.int64),
                            np.asarray(row.get("document_lengths", [len(row_ids)]), dtype=np.int64))
                  for row, row_ids in zip(rows, ids)]
        if shape[0] != len(rows):  # flattened: every row one after the other
            return torch.from_numpy(np.concatenate(spread)).reshape(shape)
        sources = np.zeros(shape, dtype=np.int64)
        for i, row_sources in enumerate(spread):
            sources[i, :len(row_sources)] = row_sources
        return torch.from_numpy(sources)

    def _id_problem(self, ids: list[np.ndarray]) -> str | None:
        if self.vocab_size is None or not any(len(x) for x in ids):
            return None
        flat = np.concatenate(ids)
        low, high = int(flat.min()), int(flat.max())
        if low < 0 or high >= self.vocab_size:
            return f"a batch holds token id {high if high >= self.vocab_size else low:,}, outside the tokenizer's " \
                   f"{self.vocab_size:,} ids"
        return None

    def _documents(self, rows, ids, labels) -> dict:
        lengths = [len(x) for x in ids]
        width = max(lengths)
        if min(lengths) != width:
            width = -(-width // self.pad_to_multiple_of) * self.pad_to_multiple_of
        input_ids = np.full((len(ids), width), self.pad_token_id, dtype=np.int64)
        label_ids = np.full((len(ids), width), IGNORE_INDEX, dtype=np.int64)
        positions = np.empty((len(ids), width), dtype=np.int64)
        for i, (row, row_ids, row_labels) in enumerate(zip(rows, ids, labels)):
            length = len(row_ids)
            position = document_position_ids(row.get("document_lengths", [length]), length)
            row_labels[position == 0] = IGNORE_INDEX
            input_ids[i, :length], label_ids[i, :length], positions[i, :length] = row_ids, row_labels, position
            positions[i, length:] = np.arange(width - length)  # the padding: a document of its own
        return {
            "input_ids": torch.from_numpy(input_ids),
            "labels": torch.from_numpy(label_ids),
            "position_ids": torch.from_numpy(positions),
        }

    def _flattened(self, rows, ids, labels) -> dict:
        from transformers import DataCollatorWithFlattening

        documents = []
        for row, row_ids, row_labels in zip(rows, ids, labels):
            edges = np.cumsum(row.get("document_lengths", [len(row_ids)]))[:-1]
            for piece_ids, piece_labels in zip(np.split(row_ids, edges), np.split(row_labels, edges)):
                documents.append({"input_ids": piece_ids.tolist(), "labels": piece_labels.tolist()})
        return dict(DataCollatorWithFlattening(separator_id=IGNORE_INDEX, return_flash_attn_kwargs=True)(documents))

    def _padded(self, ids, labels) -> dict:
        multiple = self.pad_to_multiple_of
        length = -(-max(len(x) for x in ids) // multiple) * multiple
        input_ids = np.full((len(ids), length), self.pad_token_id, dtype=np.int64)
        label_ids = np.full((len(ids), length), IGNORE_INDEX, dtype=np.int64)
        attention_mask = np.zeros((len(ids), length), dtype=np.int64)
        for i, (row_ids, row_labels) in enumerate(zip(ids, labels)):
            input_ids[i, : len(row_ids)] = row_ids
            label_ids[i, : len(row_ids)] = row_labels
            attention_mask[i, : len(row_ids)] = 1
        return {
            "input_ids": torch.from_numpy(input_ids),
            "labels": torch.from_numpy(label_ids),
            "attention_mask": torch.from_numpy(attention_mask),
        }
