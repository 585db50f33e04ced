"""Attention, checked on CPU through build_model, the collators and the Trainer.

- Document masking: every document's logits inside a packed row equal the document run alone, for each
  backend rankzero may pick (sdpa, eager, flex_attention) and for the flattened batch that flash-attention's
  varlen kernel takes (emulated here with SDPA per cu_seqlens segment: no flash-attn on CPU).
- The default batch (packed rows, attention across documents allowed) reaches
  `scaled_dot_product_attention` with `attn_mask=None, is_causal=True, enable_gqa=True` — SDPA's flash
  path on a GPU — with and without `--torch_compile`.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rankzero.config import ModelConfig
from rankzero.train.collator import BlockCollator
from rankzero.train.model import build_model
from helpers import TINY, needs_cxx

ROWS = [[7, 5, 4], [3, 13]]  # document lengths of two packed rows of 16 tokens
SFT_ROWS = [[7, 5], [3, 4, 2]]  # rows of whole samples, shorter than a row: the batch is padded to 16


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tokenizer_dir)


def build(tokenizer, attention: str):
    torch.manual_seed(0)
    return build_model(ModelConfig(model_config=str(TINY)), tokenizer, None, attention)[0]


def packed_rows(layout=ROWS):
    generator = torch.Generator().manual_seed(1)
    return [{"input_ids": torch.randint(5, 1000, (sum(lengths),), generator=generator).numpy(),
             "document_lengths": np.array(lengths)} for lengths in layout]


def varlen_reference(module, query, key, value, attention_mask, cu_seq_lens_q=None, **kwargs):
    """What flash-attn's varlen kernel computes: causal attention inside each cu_seqlens segment, nothing across."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    assert attention_mask is None and query.shape[0] == 1
    bounds = cu_seq_lens_q.tolist()
    pieces = [sdpa_attention_forward(module, query[:, :, start:end], key[:, :, start:end], value[:, :, start:end],
                                     None, **kwargs)[0] for start, end in zip(bounds[:-1], bounds[1:])]
    return torch.cat(pieces, dim=1), None


@pytest.mark.parametrize("layout", [ROWS, SFT_ROWS], ids=["packed", "sft-padded"])
@pytest.mark.parametrize("attention", ["sdpa", "eager", pytest.param("flex_attention", marks=needs_cxx), "flattened"])
def test_each_document_in_a_packed_row_equals_the_document_alone(attention, layout, tokenizer):
    from transformers import AttentionInterface

    AttentionInterface.register("varlen_reference", varlen_reference)
    flatten = attention == "flattened"
    model = build(tokenizer, "varlen_reference" if flatten else attention).eval()
    alone_model = build(tokenizer, "sdpa").eval()
    rows = packed_rows(layout)
    batch = BlockCollator(mask_across_documents=True, flatten=flatten)(rows)
    inputs = {k: v for k, v in batch.items() if k not in ("labels", "num_tokens")}
    assert "attention_mask" not in inputs
    with torch.no_grad():
        logits = model(**inputs).logits
        if flatten:  # one flat row: back to the rows
            logits = torch.split(logits[0], [len(row["input_ids"]) for row in rows])
        else:
            assert logits.shape[1] == 16  # SFT rows of 12 and 9 tokens, padded to a multiple of 8
        for row, packed in zip(rows, logits):
            edges = np.cumsum([0, *row["document_lengths"]])
            for start, end in zip(edges[:-1], edges[1:]):
                alone = alone_model(input_ids=torch.as_tensor(row["input_ids"][start:end])[None]).logits[0]
                torch.testing.assert_close(packed[start:end], alone, atol=1e-5, rtol=1e-4)
        # The property can fail: without the document mask, later documents see earlier ones.
        unmasked = alone_model(input_ids=torch.as_tensor(rows[0]["input_ids"])[None]).logits[0]
        later = alone_model(input_ids=torch.as_tensor(rows[0]["input_ids"][7:12])[None]).logits[0]
        assert not torch.allclose(unmasked[7:12], later, atol=1e-3)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "torch_compile"])
def test_default_batch_reaches_sdpa_with_no_mask_and_is_causal(compiled, tokenizer, tmp_path, monkeypatch):
    """One training step through RankzeroTrainer; a spy records what SDPA receives (under compile: at trace)."""
    from accelerate.utils import has_compiled_regions
    from datasets import Dataset

    from rankzero.train.throughput import ThroughputCallback
    from rankzero.train.trainer import RankzeroTrainer
    from rankzero.runtime import Runtime
    from rankzero.train.training_args import TrainingArguments, set_up_devices

    calls = []
    real = torch.nn.functional.scaled_dot_product_attention

    def spy(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        calls.append({"attn_mask": attn_mask, "is_causal": is_causal, "enable_gqa": enable_gqa})
        return real(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                    enable_gqa=enable_gqa)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    model = build(tokenizer, "sdpa")
    rows = packed_rows()
    dataset = Dataset.from_dict({key: [row[key] for row in rows] for key in rows[0]}).with_format("numpy")
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2, use_cpu=True,
                             report_to="none", save_strategy="no", disable_tqdm=True, remove_unused_columns=False,
                             torch_compile=compiled, torch_compile_backend="eager" if compiled else None)
    set_up_devices(args, Runtime(rank=0, world_size=1, local_rank=0, local_world_size=1, node_rank=0, hostname="h"))
    trainer = RankzeroTrainer(model=model, args=args, train_dataset=dataset, data_collator=BlockCollator(),
                              meter=ThroughputCallback(model, seq_length=16))
    try:
        trainer.train()
        assert has_compiled_regions(trainer.model_wrapped) == compiled
    finally:
        torch._dynamo.reset()
    assert len(calls) >= model.config.num_hidden_layers
    assert all(call == {"attn_mask": None, "is_causal": True, "enable_gqa": True} for call in calls), calls[0]
