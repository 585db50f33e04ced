"""The training loss without the full fp32 logits: chunked over the tokens in torch, or liger-kernel's fused kernel.

    problems = lm_loss_problems(args.model.lm_loss, training)           # checks.py, with the other flags
    training, choice, reason = resolve_lm_loss(args.model.lm_loss, model, training)    # run.py
    use_lm_loss(model, choice, compile=training.torch_compile)                          # run.py, before the Trainer

HF's causal-LM loss (`ForCausalLMLoss`) takes the logits of every token: at 4,096 tokens and Llama-3's 128,256 rows
that is 2.1 GB a row in fp32, then as much again for the log-softmax and for its gradient — the largest thing a
training step holds. `--lm_loss`:

- `full`: HF's loss, unchanged.
- `chunked`: the model's decoder (`get_decoder()`) gives the hidden states, and the head
  (`get_output_embeddings()`) is applied CHUNK_LOGIT_BYTES of fp32 logits at a time inside
  `torch.utils.checkpoint`: each chunk's logits are freed once its summed cross-entropy is taken, and
  recomputed in the backward (one more matmul of the head: a few % of a step). The sum over chunks divided
  by the label tokens — `num_items_in_batch` when the Trainer passes it (gradient accumulation, tokens
  averaged over ranks), else the batch's own — is HF's loss: labels shifted by one, -100 ignored.
- `liger`: liger-kernel's fused linear cross-entropy (Triton, CUDA only), through transformers' own
  `use_liger_kernel` with every other liger kernel off (`LIGER_LOSS_ONLY`): the model's forward is liger's,
  which never materialises the logits in training.
- `auto` (the default): liger where CUDA, Triton and liger-kernel are there and liger knows the model type;
  else chunked where it is exact (EXACT_MODEL_TYPES: forwards that are decoder → head → HF's loss, with no
  logit softcapping or scaling and no router loss); else full.

Both replace the model's `forward` on the instance, as transformers' liger integration does, and only for a
training forward with labels (evaluation and generation get the logits as before). The loss has to be
computed *inside* the model's forward: under FSDP2 accelerate shards the final norm and the head (with the
embedding when tied) as one unit kept gathered from its first use in the forward until the backward, and
reduce-scatters its gradients in its post-backward hook; under DDP the gradients are all-reduced only for a
forward run through DDP. The head's weight is read once there (already gathered) and used as a tensor in every
chunk and in its recompute, as liger-kernel does, so nothing rests on how FSDP's hooks treat a module called
once per chunk and again in the backward.
"""

from __future__ import annotations

import functools
import importlib.util
import types

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from rankzero.errors import ConfigError, RankzeroError

IGNORE_INDEX = -100  # transformers' and the collator's
CHUNK_LOGIT_BYTES = 256 * 2**20  # fp32 logits of one chunk: 512 tokens at 128,256 rows, 2,048 at 32k
LM_LOSS_CHOICES = ("auto", "full", "chunked", "liger")
# Model types whose *ForCausalLM.forward is exactly: decoder → lm_head on every position → ForCausalLMLoss (no
# softcapping, logit scaling or router loss); tests/train/test_losses.py checks each against HF's loss.
EXACT_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3", "gemma", "olmo2", "phi3")
# transformers' use_liger_kernel applies every liger kernel it has for the model type; only the loss is wanted
# (the others change numerics and the compiled graph). Keys of liger's apply_liger_kernel_to_<type>.
LIGER_LOSS_ONLY = {"fused_linear_cross_entropy": True, "cross_entropy": False, "rope": False, "rms_norm": False,
                   "swiglu": False, "geglu": False, "layer_norm": False}


def chunk_tokens(vocab_size: int) -> int:
    """Tokens per chunk: CHUNK_LOGIT_BYTES of fp32 logits, a multiple of 64 (at least 64)."""
    return max(64, CHUNK_LOGIT_BYTES // (4 * vocab_size) // 64 * 64)


def _chunk_loss_sum(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                    targets: torch.Tensor) -> torch.Tensor:
    logits = F.linear(hidden, weight, bias).float()  # HF upcasts the logits too (bf16 under autocast)
    return F.cross_entropy(logits, targets, ignore_index=IGNORE_INDEX, reduction="sum")


def chunked_causal_lm_loss(hidden_states: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                           labels: torch.Tensor | None, *, num_items_in_batch=None,
                           shift_labels: torch.Tensor | None = None, chunk: int | None = None,
                           chunk_loss=_chunk_loss_sum) -> torch.Tensor:
    """HF's ForCausalLMLoss of `hidden_states @ weight.T + bias`, computed `chunk` tokens at a time.

    `labels` (batch, length) are shifted here (-100 after each row's last token); `shift_labels`, when given,
    are already shifted (transformers' context-parallel form). The summed cross-entropy is divided by
    `num_items_in_batch` when given, else by this batch's label tokens (HF's "mean"; 0/0 = NaN as there)."""
    if shift_labels is None:
        shift_labels = F.pad(labels, (0, 1), value=IGNORE_INDEX)[..., 1:]
    hidden = hidden_states.reshape(-1, hidden_states.shape[-1])
    targets = shift_labels.reshape(-1).to(hidden.device)
    step = chunk or chunk_tokens(weight.shape[0])
    total = None
    for start in range(0, hidden.shape[0], step):
        piece = checkpoint(chunk_loss, hidden[start:start + step], weight, bias, targets[start:start + step],
                           use_reentrant=False)
        total = piece if total is None else total + piece
    if num_items_in_batch is None:
        return total / targets.ne(IGNORE_INDEX).sum()
    if torch.is_tensor(num_items_in_batch):
        num_items_in_batch = num_items_in_batch.to(total.device)
    return total / num_items_in_batch


# ---------------------------------------------------------------------------------------------
# Which loss a run uses


def liger_available() -> bool:
    """liger-kernel's fused loss can run here: CUDA, Triton and liger-kernel >= 0.3 (transformers' own test)."""
    from transformers.utils import is_liger_kernel_available

    return torch.cuda.is_available() and importlib.util.find_spec("triton") is not None \
        and is_liger_kernel_available()


def liger_model_types() -> set[str]:
    from liger_kernel.transformers import monkey_patch

    return set(monkey_patch.MODEL_TYPE_TO_APPLY_LIGER_FN)


def lm_loss_problems(requested: str, training) -> list[str]:
    """--lm_loss against this machine and the Trainer's flags, before any data work (checks.py)."""
    problems = []
    if requested == "liger" and not liger_available():
        problems.append("--lm_loss liger: needs a CUDA GPU, Triton and liger-kernel (pip install 'rankzero[gpu]'); "
                        "use --lm_loss chunked (the same loss in torch) or auto")
    if requested in ("chunked", "liger") and training.label_smoothing_factor:
        problems.append(f"--lm_loss {requested} with --label_smoothing_factor {training.label_smoothing_factor:g}: "
                        "the Trainer smooths the labels over the full logits; use --lm_loss full")
    if requested in ("full", "chunked") and training.use_liger_kernel:
        problems.append(f"--lm_loss {requested} with --use_liger_kernel: liger's forward computes its own loss; "
                        "give --lm_loss liger (or auto), or leave --use_liger_kernel out")
    if requested == "chunked" and training.deepspeed is not None:
        problems.append("--lm_loss chunked with --deepspeed: ZeRO-3 gathers the head's weight only when the head is "
                        "called as a module; use --lm_loss full (or shard with --fsdp full_shard)")
    return problems


def exactness_problem(model) -> str | None:
    """Why the chunked loss would not be this model's loss (None: it is)."""
    config = model.config
    model_type = getattr(config, "model_type", None)
    for key in ("final_logit_softcapping", "logit_scale", "logits_scaling"):
        if getattr(config, key, None) not in (None, 1, 1.0):
            return f"{model_type} scales its logits ({key}={getattr(config, key)})"
    if model_type not in EXACT_MODEL_TYPES:
        return f"model type {model_type!r} is not one whose loss it is known to equal ({', '.join(EXACT_MODEL_TYPES)})"
    if not isinstance(model.get_output_embeddings(), torch.nn.Linear):
        return f"{type(model).__name__}'s output embedding is not a Linear layer"
    return None


def resolve_lm_loss(requested: str, model, training) -> tuple[object, str, str]:
    """The loss this run uses: (training args, with the liger flags when it is liger; "full" | "chunked" |
    "liger"; "choice (why)" for the printed defaults). An explicit choice the model cannot take is a ConfigError."""
    problem = exactness_problem(model)
    model_type = getattr(model.config, "model_type", None)
    if requested == "auto" and training.use_liger_kernel:
        requested = "liger"
        why = "--use_liger_kernel given"
    elif requested == "auto":
        if training.label_smoothing_factor or training.deepspeed is not None:
            flag = "--label_smoothing_factor" if training.label_smoothing_factor else "--deepspeed"
            return training, "full", f"'full' ({flag}: HF's loss over the full logits)"
        if liger_available() and model_type in liger_model_types():
            requested, why = "liger", "CUDA, Triton and liger-kernel: fused linear cross-entropy, no logits"
        elif problem is None:
            requested, why = "chunked", (f"the head applied {chunk_tokens(model.config.vocab_size):,} tokens at a "
                                         "time; its logits recomputed in the backward")
        else:
            return training, "full", f"'full' (the chunked loss is not exact here: {problem})"
    else:
        why = "--lm_loss given"
    if requested == "chunked" and problem is not None:
        raise ConfigError([f"--lm_loss chunked: {problem}; use --lm_loss full"])
    if requested == "liger":
        if model_type not in liger_model_types():
            raise ConfigError([f"--lm_loss liger: liger-kernel has no kernels for model type {model_type!r}; use "
                               "--lm_loss chunked or full"])
        config = {**LIGER_LOSS_ONLY, **(training.liger_kernel_config or {})}
        training = training.replaced(use_liger_kernel=True, liger_kernel_config=config)
    return training, requested, f"{requested!r} ({why})"


def use_lm_loss(model, choice: str, *, compile: bool = False, chunk: int | None = None) -> None:
    """Give `model` the chunked loss (a new forward on the instance); "full" and "liger" leave it as it is (the
    Trainer applies liger from its `use_liger_kernel`). `compile`: the per-chunk loss compiled (one fused kernel);
    `chunk`: tokens per chunk (default chunk_tokens(vocabulary))."""
    if choice != "chunked":
        return
    chunk_loss = torch.compile(_chunk_loss_sum) if compile else _chunk_loss_sum
    forward = type(model).forward  # the class's: accelerate's regional compile rebinds methods to its copy

    @functools.wraps(forward)
    def chunked_forward(self, *args, labels=None, num_items_in_batch=None, shift_labels=None, **kwargs):
        if not self.training or labels is None and shift_labels is None:
            if num_items_in_batch is not None:
                kwargs["num_items_in_batch"] = num_items_in_batch
            return forward(self, *args, labels=labels, **kwargs)
        return chunked_loss_output(self, args, kwargs, labels, num_items_in_batch, shift_labels, chunk_loss, chunk)

    model.forward = types.MethodType(chunked_forward, model)


def chunked_loss_output(model, args, kwargs, labels, num_items_in_batch, shift_labels, chunk_loss, chunk):
    from torch.distributed.tensor import DTensor
    from transformers.modeling_outputs import CausalLMOutputWithPast

    kwargs.pop("logits_to_keep", None)  # no logits are returned
    outputs = model.get_decoder()(*args, **kwargs)
    head = model.get_output_embeddings()
    weight = head.weight
    if isinstance(weight, DTensor):
        raise RankzeroError("--lm_loss chunked: the lm_head's weight is still sharded inside the forward (its FSDP "
                            "unit is not the final norm's, as accelerate lays it out); use --lm_loss full")
    loss = chunked_causal_lm_loss(outputs.last_hidden_state, weight, head.bias, labels,
                                  num_items_in_batch=num_items_in_batch, shift_labels=shift_labels, chunk=chunk,
                                  chunk_loss=chunk_loss)
    return CausalLMOutputWithPast(loss=loss, logits=None, hidden_states=outputs.hidden_states,
                                  attentions=outputs.attentions)
