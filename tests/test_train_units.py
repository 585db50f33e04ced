"""Unit tests of the training pieces: collator, per-document masking, vocabulary check, defaults."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rankzero.train.collator import IGNORE_INDEX, BlockCollator, document_position_ids
from trainutil import TINY


def rows(*lengths_per_row, labels=False):
    out = []
    for lengths in lengths_per_row:
        ids = np.arange(10, 10 + sum(lengths), dtype=np.int32)
        row = {"input_ids": ids, "document_lengths": np.array(lengths, dtype=np.int32)}
        if labels:
            row["labels"] = np.where(np.arange(len(ids)) < 2, IGNORE_INDEX, ids)
        out.append(row)
    return out


def test_packed_rows_stack_without_padding_or_mask():
    batch = BlockCollator()(rows([6], [2, 4]))
    assert batch["input_ids"].shape == (2, 6)
    assert "attention_mask" not in batch and "position_ids" not in batch
    assert torch.equal(batch["labels"], batch["input_ids"])
    assert batch["num_tokens"] == 12


def test_unpacked_rows_pad_to_multiple_of_8_with_ignored_labels():
    batch = BlockCollator(pad_token_id=3)(rows([5], [11]))
    assert batch["input_ids"].shape == (2, 16)
    assert batch["attention_mask"][0].tolist() == [1] * 5 + [0] * 11
    assert (batch["labels"][0, 5:] == IGNORE_INDEX).all() and (batch["input_ids"][0, 5:] == 3).all()
    assert batch["num_tokens"] == 16  # real tokens only


def test_document_positions_restart_and_mask_first_labels():
    assert document_position_ids([3, 2], 5).tolist() == [0, 1, 2, 0, 1]
    batch = BlockCollator(mask_across_documents=True)(rows([3, 2], [5]))
    assert batch["position_ids"].tolist() == [[0, 1, 2, 0, 1], [0, 1, 2, 3, 4]]
    assert batch["labels"][0].tolist() == [IGNORE_INDEX, 11, 12, IGNORE_INDEX, 14]
    assert "attention_mask" not in batch


def test_sft_labels_pass_through():
    batch = BlockCollator()(rows([4], [4], labels=True))
    assert batch["labels"][0].tolist() == [IGNORE_INDEX, IGNORE_INDEX, 12, 13]


def test_flattened_batch_for_flash_attention():
    batch = BlockCollator(mask_across_documents=True, flatten=True)(rows([3, 2], [5]))
    assert batch["input_ids"].shape == (1, 10)
    assert batch["position_ids"].tolist() == [[0, 1, 2, 0, 1, 0, 1, 2, 3, 4]]


def tiny_model(**overrides):
    from rankzero.train.model import load_config
    from transformers import AutoModelForCausalLM

    config = load_config(TINY)
    for key, value in overrides.items():
        setattr(config, key, value)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").eval()


def test_mask_across_documents_equals_separate_documents():
    """A row of two documents with restarting positions gives each document's own logits (sdpa)."""
    model = tiny_model()
    first, second = torch.randint(5, 1000, (1, 7)), torch.randint(5, 1000, (1, 5))
    batch = BlockCollator(mask_across_documents=True)(
        [{"input_ids": torch.cat([first, second], 1)[0].numpy(), "document_lengths": np.array([7, 5])}] * 2
    )
    with torch.no_grad():
        # use_cache=False as in training (build_model sets it): a KV cache turns packed detection off
        packed = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"], use_cache=False).logits
        alone = model(input_ids=second, use_cache=False).logits
        unmasked = model(input_ids=batch["input_ids"], use_cache=False).logits
    assert torch.allclose(packed[:, 7:], alone.expand(2, -1, -1), atol=1e-5)
    assert not torch.allclose(unmasked[:, 7:], alone.expand(2, -1, -1), atol=1e-3)


def test_vocabulary_resize_and_out_of_range(tokenizer_dir):
    from transformers import AutoTokenizer

    from rankzero.train.model import match_vocabulary

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    small = tiny_model(vocab_size=len(tokenizer) - 200)
    with pytest.warns(UserWarning, match="resizing the embeddings"):
        match_vocabulary(small, tokenizer, max_token_id=len(tokenizer) - 1, source="test")
    assert small.get_input_embeddings().num_embeddings >= len(tokenizer)
    with pytest.raises(ValueError, match="token id 5000"):
        match_vocabulary(tiny_model(), tokenizer, max_token_id=5000, source="test")


def test_fast_defaults_respect_given_flags(tmp_path):
    from rankzero.runtime import Runtime
    from rankzero.train.training_args import TrainingArguments, apply_fast_defaults

    runtime = Runtime(rank=0, world_size=1, local_rank=0, local_world_size=1, node_rank=0, hostname="h")
    given = TrainingArguments(output_dir=str(tmp_path), dataloader_num_workers=0, dataloader_prefetch_factor=None)
    args, applied, warnings = apply_fast_defaults(given, frozenset({"dataloader_num_workers", "output_dir"}), runtime)
    assert args.dataloader_num_workers == 0 and "dataloader_num_workers" not in applied
    assert args.use_cpu is True and "use_cpu" in applied  # no CUDA here
    assert args.remove_unused_columns is False

    forced = TrainingArguments(output_dir=str(tmp_path), remove_unused_columns=True)
    _, _, warnings = apply_fast_defaults(forced, frozenset({"remove_unused_columns"}), runtime)
    assert any("--remove_unused_columns is ignored" in w for w in warnings)


def test_peak_flops_table_matches_device_names():
    from rankzero.train.throughput import peak_flops

    assert peak_flops("NVIDIA H100 80GB HBM3", True) == 989e12
    assert peak_flops("NVIDIA H100 PCIe", True) == 756e12
    assert peak_flops("NVIDIA A100-SXM4-80GB", True) == 312e12
    assert peak_flops("NVIDIA GeForce RTX 4090", False) == 165e12 / 2
    assert peak_flops("NVIDIA L40S", True) == 362e12
    assert peak_flops("Some CPU", True) is None
