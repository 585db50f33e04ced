"""Build the model: from an HF config JSON (from scratch) or an HF checkpoint dir (continue).

    model = build_model(model_args, tokenizer, max_token_id=…)

transformers' own classes only (`AutoModelForCausalLM`). Weights stay fp32: the Trainer autocasts
to bf16 where the GPU has it (casting the weights themselves to bf16 loses small updates).
The tokenizer and the model must agree on the vocabulary: a larger tokenizer grows the embeddings
(with a warning); token ids the model cannot embed stop the run with the numbers and the fix.
"""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedModel

from rankzero.args import ModelArguments

logger = logging.getLogger(__name__)


def resolve_attention(requested: str) -> tuple[str, list[str]]:
    """flash_attention_2 only when flash-attn is installed and there is a GPU; otherwise SDPA, with a warning."""
    from transformers.utils import is_flash_attn_2_available

    if requested == "flash_attention_2" and not (torch.cuda.is_available() and is_flash_attn_2_available()):
        return "sdpa", ["--attn_implementation flash_attention_2 is ignored: the flash-attn package or a "
                        "supported GPU is missing; using sdpa (pip install flash-attn to use it)"]
    return requested, []


def load_config(path: str | Path):
    """An HF config from a JSON file (needs `model_type`) or from a checkpoint directory."""
    path = Path(path)
    if path.is_dir():
        return AutoConfig.from_pretrained(path)
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"--model_config {path}:{error.lineno}: not valid JSON ({error.msg})") from None
    model_type = values.pop("model_type", None)
    if not model_type:
        raise ValueError(f"--model_config {path}: needs a \"model_type\" key (e.g. \"llama\" or \"qwen3\")")
    values.pop("architectures", None)
    values.pop("transformers_version", None)
    return AutoConfig.for_model(model_type, **values)


def build_model(model_args: ModelArguments, tokenizer, max_token_id: int | None, attn_implementation: str) -> PreTrainedModel:
    if model_args.pretrained_model:
        model = AutoModelForCausalLM.from_pretrained(
            model_args.pretrained_model, dtype=torch.float32, attn_implementation=attn_implementation
        )
        source = f"--pretrained_model {model_args.pretrained_model}"
    else:
        config = load_config(model_args.model_config)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation=attn_implementation)
        source = f"--model_config {model_args.model_config}"
    match_vocabulary(model, tokenizer, max_token_id, source)
    # Generation after training should stop and pad the way the tokenizer says.
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        token_id = getattr(tokenizer, name, None)
        if token_id is not None:
            setattr(model.config, name, token_id)
            if model.generation_config is not None:
                setattr(model.generation_config, name, token_id)
    model.config.use_cache = False  # training: no KV cache (it would also hide packed position ids)
    return model


def match_vocabulary(model: PreTrainedModel, tokenizer, max_token_id: int | None, source: str) -> None:
    embeddings = model.get_input_embeddings().num_embeddings
    tokenizer_size = len(tokenizer)
    if tokenizer_size > embeddings:
        new_size = -(-tokenizer_size // 64) * 64  # a multiple of 64 keeps the matmuls on tensor-core shapes
        warnings.warn(
            f"the tokenizer has {tokenizer_size} tokens but {source} embeds only {embeddings}: "
            f"resizing the embeddings to {new_size} (new rows are initialised from the mean)",
            stacklevel=2,
        )
        model.resize_token_embeddings(new_size, pad_to_multiple_of=None)
        embeddings = new_size
    if max_token_id is not None and max_token_id >= embeddings:
        raise ValueError(
            f"the prepared data holds token id {max_token_id} but {source} embeds only {embeddings} ids: "
            f"the data was tokenized with a different tokenizer — re-prepare it with --tokenizer_path of this "
            f"model, or set vocab_size >= {max_token_id + 1} in the model config"
        )
