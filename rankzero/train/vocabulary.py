"""A checkpoint meets a tokenizer with more tokens: new embedding rows from their sub-words, trained first.

    old = checkpoint_tokenizer("ckpt/")                       # the tokenizer the checkpoint was trained with, or None
    extension = extend_embeddings(model, tokenizer, old, source="--pretrained_model ckpt/")
    trainer.add_callback(NewEmbeddingsFirst(model, extension.first_new_row, steps=100))

Each token the old tokenizer did not have starts, in the input and the output embeddings, as the mean
of the old rows of the pieces the *old* tokenizer splits its text into (the sub-word mean of EEVE,
Kim et al. 2024, and of Gee et al. 2022's FVT): " 한국어" starts where " 한", "국", "어" already are, so the
model reads and predicts it as it did those pieces. Hugging Face's `resize_token_embeddings` starts every
new row at the one mean of all old rows (plus noise of 1e-9 of their covariance): thousands of tokens the
model cannot tell apart, in and out. A token whose text the old tokenizer gives nothing for (no pieces
but unknowns) falls back to that mean, counted; so do the padding rows past the tokenizer.

Pieces come from the old tokenizer's own model (`tokenizers.Model.tokenize`) applied to the token's
string as the vocabulary spells it, not from re-encoding decoded text: a byte-level token may hold half a
UTF-8 character, which decodes to U+FFFD and would be split as that. Added tokens (special tokens) have
no such string in the model and are encoded from their text.

`NewEmbeddingsFirst` trains only the new rows for the first N optimizer steps, then everything; its
docstring says why it is a callback that drops gradients rather than frozen parameters.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import TrainerCallback

logger = logging.getLogger(__name__)

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


@dataclass(frozen=True)
class Extension:
    """What extend_embeddings did: rows from first_new_row on are new (until the embedding matrix ends)."""

    first_new_row: int
    rows: int  # the embedding matrix's rows after the change
    subword_rows: int  # new tokens initialised from their pieces
    fallback_rows: int  # new tokens the old tokenizer gave no piece for: the old mean
    padding_rows: int  # rows past the tokenizer (a multiple of 64): the old mean
    split: bool = True  # False: the checkpoint held no tokenizer to split the new tokens with

    def describe(self, source: str) -> str:
        if not self.split:
            return (f"{self.fallback_rows} new token(s) beyond {source}'s {self.first_new_row} rows: all at the old "
                    f"mean (the checkpoint holds no tokenizer to split them with; {self.rows} rows in all)")
        fallback = (f"; {self.fallback_rows} the old tokenizer splits into nothing it knows start at the old mean"
                    if self.fallback_rows else "")
        return (f"{self.subword_rows + self.fallback_rows} new token(s) beyond {source}'s {self.first_new_row}: "
                f"{self.subword_rows} start, in the input and output embeddings, as the mean of their old "
                f"pieces' rows{fallback}; {self.padding_rows} padding row(s) at the old mean "
                f"({self.rows} rows in all)")


def new_rows_start(model_args, tokenizer, extension: Extension | None, checkpoint: str | None = None) -> int | None:
    """The first row --train_new_embeddings_steps trains: the extension's; on a resume (the model rebuilt from the
    run's `checkpoint`, its new rows made when the run started) the row the checkpoint records (`new_rows_from` in
    its data record), or for a checkpoint of an older rankzero the same row found again from --pretrained_model.
    None without the flag, without --pretrained_model, or when it lacked no token. --pretrained_model is not read
    otherwise on a resume: a continued run resumes after its starting dir is gone."""
    from transformers import AutoConfig

    from rankzero.errors import RankzeroError
    from rankzero.files import read_json
    from rankzero.train.checkpoints.records import DATA_RECORD

    if extension is not None:
        return extension.first_new_row
    if not model_args.pretrained_model or not model_args.train_new_embeddings_steps:
        return None
    record = read_json(Path(checkpoint, DATA_RECORD)) if checkpoint else None
    if isinstance(record, dict) and "new_rows_from" in record:
        return record["new_rows_from"]
    if not Path(model_args.pretrained_model).is_dir():
        raise RankzeroError(f"--train_new_embeddings_steps {model_args.train_new_embeddings_steps}: {checkpoint} does "
                            "not record which embedding rows are new (saved by an older rankzero), and --pretrained_model "
                            f"{model_args.pretrained_model}, where they would be found again, is gone: restore it, or "
                            "drop --train_new_embeddings_steps if the run is past those steps")
    rows = AutoConfig.from_pretrained(model_args.pretrained_model).get_text_config().vocab_size
    old = checkpoint_tokenizer(model_args.pretrained_model)
    first = rows if old is None else min(len(old), rows)
    return first if len(tokenizer) > first else None


def checkpoint_tokenizer(directory: str | Path):
    """The tokenizer saved with a checkpoint, or None when the directory holds none."""
    from transformers import AutoTokenizer

    directory = Path(directory)
    if not any((directory / name).is_file() for name in TOKENIZER_FILES):
        return None
    return AutoTokenizer.from_pretrained(directory)


def token_pieces(tokenizer, old_tokenizer, first_new_id: int) -> dict[int, list[int]]:
    """For each id from first_new_id to the end of `tokenizer`: the old ids its text splits into (known ids
    below first_new_id only; an empty list when there are none)."""
    old_model = old_tokenizer.backend_tokenizer.model
    unknown = old_tokenizer.unk_token_id
    added = tokenizer.added_tokens_decoder  # id → AddedToken: not in the model's vocabulary
    pieces = {}
    for token_id in range(first_new_id, len(tokenizer)):
        if token_id in added:
            ids = old_tokenizer.encode(added[token_id].content, add_special_tokens=False)
        else:
            ids = [piece.id for piece in old_model.tokenize(tokenizer.convert_ids_to_tokens(token_id))]
        pieces[token_id] = [i for i in ids if i < first_new_id and i != unknown]
    return pieces


@torch.no_grad()
def subword_means(weight: torch.Tensor, pieces: list[list[int]], fallback: torch.Tensor) -> torch.Tensor:
    """Row i is the mean of weight[pieces[i]] (or `fallback` where pieces[i] is empty), in `weight`'s dtype.

    Summed in float64 and rounded once: the result is the mean to the dtype's precision whatever the
    order of the sum (and equals `weight[p].double().mean(0)` cast back, which the tests check)."""
    rows = fallback.expand(len(pieces), -1).clone()
    with_pieces = [i for i, p in enumerate(pieces) if p]
    if with_pieces:
        flat = torch.tensor([i for index in with_pieces for i in pieces[index]], dtype=torch.long)
        offsets = torch.tensor([0] + [len(pieces[index]) for index in with_pieces[:-1]]).cumsum(0)
        # Only the rows some piece uses go to float64, not the whole (possibly 128k-row) matrix.
        used, flat = torch.unique(flat, return_inverse=True)
        gathered = weight[used.to(weight.device)].double()
        means = torch.nn.functional.embedding_bag(flat.to(weight.device), gathered, offsets.to(weight.device),
                                                  mode="mean")
        rows[torch.tensor(with_pieces, device=rows.device)] = means.to(rows.dtype)
    return rows


@torch.no_grad()
def extend_embeddings(model, tokenizer, old_tokenizer, padded_rows: int) -> Extension:
    """Grow the embeddings to `padded_rows` if needed and initialise every row of a token the old tokenizer did
    not have from its old pieces (module docstring). Tied embeddings stay one tensor."""
    rows = model.get_input_embeddings().num_embeddings
    first_new = min(len(old_tokenizer), rows)
    if padded_rows > rows:
        # Not HF's mean init: its covariance product costs vocabulary × hidden² (seconds to a minute for a
        # 128k × 4096 matrix on CPU) for rows overwritten below.
        model.resize_token_embeddings(padded_rows, pad_to_multiple_of=None, mean_resizing=False)
        rows = padded_rows
    pieces = token_pieces(tokenizer, old_tokenizer, first_new)
    new_ids = torch.arange(first_new, first_new + len(pieces))
    padding = torch.arange(first_new + len(pieces), rows)
    matrices = [model.get_input_embeddings().weight]
    output = model.get_output_embeddings()
    if output is not None and output.weight is not matrices[0]:
        matrices.append(output.weight)
    bias = getattr(output, "bias", None)
    with whole_under_zero3([*matrices, *([bias] if bias is not None else [])]):
        for weight in matrices:
            old_mean = weight[:first_new].double().mean(0).to(weight.dtype)
            weight[new_ids.to(weight.device)] = subword_means(weight, list(pieces.values()), old_mean)
            weight[padding.to(weight.device)] = old_mean
        if bias is not None:  # a head with a bias (rare for causal LMs): the same mean over its entries
            old_mean = bias[:first_new].double().mean().to(bias.dtype).reshape(1)
            means = subword_means(bias[:, None], list(pieces.values()), old_mean[:, None])
            bias[new_ids.to(bias.device)] = means[:, 0]
            bias[padding.to(bias.device)] = old_mean
    fallback = sum(1 for p in pieces.values() if not p)
    return Extension(first_new_row=first_new, rows=rows, subword_rows=len(pieces) - fallback,
                     fallback_rows=fallback, padding_rows=len(padding))


def whole_under_zero3(parameters):
    """Under ZeRO-3 each rank holds only its partition of a parameter built inside zero.Init (an embedding the
    checkpoint already had: new tokens that fit its padding rows); rows are written into the whole tensor, gathered
    and re-partitioned after, rank 0's values kept (the ranks compute the same ones). A no-op otherwise."""
    import contextlib

    from transformers.integrations import is_deepspeed_zero3_enabled

    if not is_deepspeed_zero3_enabled():
        return contextlib.nullcontext()
    import deepspeed

    return deepspeed.zero.GatheredParameters(parameters, modifier_rank=0)


def mismatched_ids(tokenizer, old_tokenizer, count: int) -> int:
    """How many of the first `count` ids name different tokens in the two tokenizers (0 for an extension)."""
    old = old_tokenizer.convert_ids_to_tokens(list(range(count)))
    new = tokenizer.convert_ids_to_tokens(list(range(count)))
    return sum(a != b for a, b in zip(old, new))


class NewEmbeddingsFirst(TrainerCallback):
    """For the first `steps` optimizer steps only embedding rows from `first_new_row` on change; then everything.

    Before each of those steps every other parameter's gradient is dropped (set to None) and the old rows'
    gradient zeroed, and every parameter group's weight decay is 0 for that one step (put back right after,
    so that a checkpoint saved then holds the run's own value). Why this keeps the old rows bit-identical
    with AdamW (torch's, fused or not): a parameter without a gradient is skipped entirely — no update, no
    decay, no optimizer state (it starts fresh, with its own step count, when those steps end); the embedding
    matrices get zero gradients in their old rows from their first step, so their Adam moments there stay 0
    and the update is 0 / (0 + eps) = 0; and with no decay nothing else moves them.

    Why not `requires_grad=False` for those steps: the Trainer builds its optimizer from the parameters that
    require a gradient when training starts, and DDP registers its all-reduce hooks only for those, so a
    parameter unfrozen after N steps would never be updated, or on each rank differently. The price here is
    that they compute every gradient (the backward pass reaches the input embeddings through all layers
    anyway); its logged grad_norm, and the clipping, count the dropped gradients too (the callback runs after
    clipping; Adam's update is nearly invariant to that common scale). They are optimizer steps of the
    run's own schedule, so its warm-up and decay run on through it.
    """

    def __init__(self, model, first_new_row: int, steps: int):
        self.first_new_row, self.steps = first_new_row, steps
        self._hold(model)
        self._decay = None

    def _hold(self, model) -> None:
        """The embedding matrices and every other parameter, as `model` holds them now."""
        self.matrices = [model.get_input_embeddings().weight]
        output = model.get_output_embeddings()
        if output is not None and output.weight is not self.matrices[0]:
            self.matrices.append(output.weight)
        held = {id(weight) for weight in self.matrices}
        self.frozen = [p for p in model.parameters() if id(p) not in held]

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        # FSDP2 replaces every parameter by its DTensor shard when accelerate prepares the model, which is
        # after this callback was made: hold the parameters the optimizer will step.
        if model is not None:
            self._hold(model)

    def on_pre_optimizer_step(self, args, state, control, optimizer=None, **kwargs):
        if state.global_step >= self.steps:
            return
        for parameter in self.frozen:
            parameter.grad = None
        for weight in self.matrices:
            if weight.grad is not None:
                _zero_rows(weight.grad, self.first_new_row)
        self._decay = [group["weight_decay"] for group in optimizer.param_groups]
        for group in optimizer.param_groups:
            group["weight_decay"] = 0.0

    def on_optimizer_step(self, args, state, control, optimizer=None, **kwargs):
        if self._decay is not None:
            for group, decay in zip(optimizer.param_groups, self._decay):
                group["weight_decay"] = decay
            self._decay = None
        if state.global_step + 1 == self.steps:  # global_step counts this step only after the callback
            logger.info("new embedding rows trained alone for %d step(s): every parameter trains from now on", self.steps)


def _zero_rows(grad: torch.Tensor, rows: int) -> None:
    """grad[:rows] = 0, also where `grad` is the DTensor of FSDP2's row shards: a mesh of W ranks splits the N rows
    as torch.chunk does (DTensor's Shard(0)), so the rank at mesh index r holds rows from r * ceil(N / W) on."""
    from torch.distributed.tensor import DTensor, Shard

    if not isinstance(grad, DTensor):
        grad[:rows].zero_()
        return
    if tuple(grad.placements) != (Shard(0),):
        raise RuntimeError(f"new embedding rows: a gradient sharded as {grad.placements}, not by rows (Shard(0))")
    start = grad.device_mesh.get_local_rank() * -(-grad.shape[0] // grad.device_mesh.size())
    grad.to_local()[:max(0, rows - start)].zero_()  # the local shard itself, in place


def new_embeddings_problems(steps: int, training, steps_per_epoch: int | None = None) -> list[str]:
    """--train_new_embeddings_steps against the run's other flags (checks.py, before any data work; run.py again
    with the data's steps_per_epoch, which a run of --num_train_epochs ends by)."""
    import math

    if not steps:
        return []
    problems = []
    if 0 < training.max_steps <= steps:
        problems.append(f"--train_new_embeddings_steps {steps}: the run ends at --max_steps {training.max_steps}, so "
                        "the whole model would never train; give more --max_steps or fewer new-embeddings steps")
    elif training.max_steps <= 0 and steps_per_epoch is not None:
        total = math.ceil(training.num_train_epochs * steps_per_epoch)  # as the Trainer counts the run's steps
        if total <= steps:
            problems.append(f"--train_new_embeddings_steps {steps}: the run ends after {total} optimizer steps "
                            f"(--num_train_epochs {training.num_train_epochs:g} of {steps_per_epoch} step(s) each), so "
                            "the whole model would never train; give fewer new-embeddings steps, more --num_train_epochs, or "
                            "--max_steps")
    if training.deepspeed:
        # ZeRO keeps flat partitions of many parameters per rank: the old rows have no place of their own there.
        problems.append(f"--train_new_embeddings_steps {steps}: not supported with --deepspeed; use --fsdp full_shard "
                        "(or DDP) for those steps, or leave the flag out")
    return problems
