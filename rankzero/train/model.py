"""Build the model: from an HF config JSON (from scratch) or an HF checkpoint dir (continue).

    attention, notes = resolve_attention(requested, chosen=…, mask_across_documents=…)
    model, extension = build_model(model_args, tokenizer, max_token_id, attention)   # extension: vocabulary.py

transformers' own classes only (`AutoModelForCausalLM`). Weights stay fp32, also from a bf16
checkpoint: the Trainer autocasts to bf16 where the GPU has it (casting the weights themselves to
bf16 loses small updates). The attention backend is the user's, or for document masking the fastest
one this machine has; what each costs is printed with the configuration (the tables below).
The tokenizer and the model must agree on the vocabulary: a new model gets the tokenizer's (its config's
vocab_size is replaced); for a pretrained one, every token its own tokenizer did not have gets embedding
rows from the sub-words it had (vocabulary.py), growing the embeddings where needed; token ids the model
cannot embed stop the run with the numbers and the fix.
"""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedModel

from rankzero.config import ModelConfig
from rankzero.train.vocabulary import Extension, checkpoint_tokenizer, extend_embeddings, mismatched_ids

logger = logging.getLogger(__name__)


# What attention costs per backend, printed with the resolved configuration. B rows of T tokens.
# One causal span per row (the default batch: packed blocks, attention may cross document edges):
CAUSAL_COST = {
    "sdpa": "no mask: SDPA is_causal=True, flash kernel on CUDA in bf16/fp16, GQA without K/V copies",
    "flash_attention_2": "flash-attn causal kernel",
    "flex_attention": "causal block mask, kernel compiled at the first step",
    "eager": "additive B×1×T×T mask and full T×T score matrices: slowest",
}
# Attention stopped at document edges (--mask_across_documents):
DOCUMENT_MASKING_COST = {
    "flash_attention_2": "flattened batch, flash-attn varlen kernel over cu_seqlens: no mask, work ∝ Σ document², "
                         "GQA without K/V copies",
    "flex_attention": "block mask from the position ids: 128×128 tiles with nothing visible are skipped "
                      "(work ≈ Σ document²), kernel compiled at the first step",
    "sdpa": "boolean B×1×T×T mask: no flash kernel (memory-efficient or math kernel), every one of the T² "
            "scores computed (~2x the causal work), K/V heads repeated for GQA",
    "eager": "additive B×1×T×T mask and full T×T score matrices: slowest",
}


def resolve_attention(requested: str, *, chosen: bool, mask_across_documents: bool) -> tuple[str, list[str]]:
    """The attention implementation to build the model with, and notes for the user.

    flash_attention_2 needs the flash-attn package and a GPU (else SDPA, with a note). For document masking
    without an --attn_implementation given (`chosen`), the fastest correct backend this machine has:
    flash-attn's varlen kernel, else flex attention's block mask on an Ampere-or-newer GPU (its Triton
    kernels target those), else SDPA with a boolean mask — the only one of the three on CPU.
    """
    from transformers.utils import is_flash_attn_2_available, is_torch_flex_attn_available

    cuda = torch.cuda.is_available()
    flash = cuda and is_flash_attn_2_available()
    notes = []
    if requested == "flash_attention_2" and not flash:
        notes.append("--attn_implementation flash_attention_2 is ignored: the flash-attn package or a supported "
                     "GPU is missing; using sdpa (pip install flash-attn to use it)")
        requested = "sdpa"
    if mask_across_documents and not chosen:
        if flash:
            return "flash_attention_2", notes
        if cuda and torch.cuda.get_device_capability()[0] >= 8 and is_torch_flex_attn_available():
            return "flex_attention", notes
    return requested, notes


def attention_cost(attention: str, mask_across_documents: bool) -> str:
    return (DOCUMENT_MASKING_COST if mask_across_documents else CAUSAL_COST).get(attention, "")


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


def build_model(model_args: ModelConfig, tokenizer, max_token_id: int | None, attn_implementation: str,
                checkpoint: str | None = None, load_weights: bool = True) -> tuple[PreTrainedModel, Extension | None]:
    """The model, and what was done to its embeddings for tokens its checkpoint did not have (None: nothing).

    `checkpoint`: a resume's, whose weights the Trainer loads: the model is built from its config.json as it
    is, so neither the config file the run started from nor the pretrained weights are read again (nor are
    new rows made: the checkpoint has them). `load_weights=False`: no weights read or initialised (under FSDP
    the ranks other than 0 receive their shards from rank 0: sharding.build_without_weights)."""
    from rankzero.train.sharding import build_without_weights

    def from_config(config):
        def build():
            return AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation=attn_implementation)
        return build() if load_weights else build_without_weights(build)

    if checkpoint:
        model = from_config(AutoConfig.from_pretrained(checkpoint))
        source = f"--resume_from_checkpoint {checkpoint}"
    elif model_args.pretrained_model:
        if load_weights:
            model = AutoModelForCausalLM.from_pretrained(
                model_args.pretrained_model, dtype=torch.float32, attn_implementation=attn_implementation
            )
        else:
            model = from_config(AutoConfig.from_pretrained(model_args.pretrained_model))
        source = f"--pretrained_model {model_args.pretrained_model}"
    else:
        config = load_config(model_args.model_config)
        # A new model embeds the tokenizer's vocabulary (a multiple of 64: tensor-core shapes), whatever the
        # config file says: there are no weights to keep, so nothing to resize or warn about.
        config.vocab_size = padded_vocabulary(len(tokenizer))
        model = from_config(config)
        source = f"--model_config {model_args.model_config}"
    # A continued model's new tokens start from their pieces in its own tokenizer (not on a resume: it has them).
    continued = model_args.pretrained_model if model_args.pretrained_model and not checkpoint else None
    extension = match_vocabulary(model, tokenizer, max_token_id, source, continued)
    # Generation after training should stop and pad the way the tokenizer says.
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        token_id = getattr(tokenizer, name, None)
        if token_id is not None:
            setattr(model.config, name, token_id)
            if model.generation_config is not None:
                setattr(model.generation_config, name, token_id)
    model.config.use_cache = False  # training: no KV cache (it would also hide packed position ids)
    return model, extension


def padded_vocabulary(size: int) -> int:
    return -(-size // 64) * 64  # a multiple of 64 keeps the matmuls on tensor-core shapes


def match_vocabulary(model: PreTrainedModel, tokenizer, max_token_id: int | None, source: str,
                     pretrained: str | None = None) -> Extension | None:
    """Make the embeddings hold every token id of `tokenizer`. With the checkpoint's own tokenizer (saved beside
    the weights in `pretrained`), the rows of the tokens it lacked start from their sub-words (vocabulary.py), also
    where they fit in the checkpoint's padding rows; without it, a tokenizer larger than the embeddings grows them
    with Hugging Face's mean init, and a warning says so."""
    old_tokenizer = checkpoint_tokenizer(pretrained) if pretrained else None
    embeddings = model.get_input_embeddings().num_embeddings
    tokenizer_size = len(tokenizer)
    extension = None
    if old_tokenizer is not None and tokenizer_size > min(len(old_tokenizer), embeddings):
        known = min(len(old_tokenizer), embeddings)
        differ = mismatched_ids(tokenizer, old_tokenizer, known)
        if differ:
            warnings.warn(f"--tokenizer_path is not an extension of {source}'s own tokenizer: {differ} of its first "
                          f"{known} ids name other tokens there, whose trained rows are kept as they are; extend "
                          "the checkpoint's tokenizer with scripts/train_tokenizer.py --base_tokenizer", stacklevel=2)
        extension = extend_embeddings(model, tokenizer, old_tokenizer, max(embeddings, padded_vocabulary(tokenizer_size)))
        embeddings = extension.rows
    elif tokenizer_size > embeddings:
        new_size = padded_vocabulary(tokenizer_size)
        warnings.warn(
            f"the tokenizer has {tokenizer_size} tokens but {source} embeds only {embeddings} and holds no tokenizer "
            f"to split the new ones into known pieces: resizing the embeddings to {new_size} with every new row at "
            f"the old rows' mean (for the sub-word init, save the checkpoint's own tokenizer beside its weights)",
            stacklevel=2,
        )
        model.resize_token_embeddings(new_size, pad_to_multiple_of=None)
        extension = Extension(first_new_row=embeddings, rows=new_size, subword_rows=0,
                              fallback_rows=tokenizer_size - embeddings, padding_rows=new_size - tokenizer_size,
                              split=False)
        embeddings = new_size
    if max_token_id is not None and max_token_id >= embeddings:
        raise ValueError(
            f"the prepared data holds token id {max_token_id} but {source} embeds only {embeddings} ids: "
            f"the data was tokenized with a different tokenizer — re-prepare it with --tokenizer_path of this "
            f"model, or set vocab_size >= {max_token_id + 1} in the model config"
        )
    return extension
