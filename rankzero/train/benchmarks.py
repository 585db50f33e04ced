"""Multiple-choice benchmarks scored as lm-evaluation-harness scores them, split over every rank.

    suites = read_suites(["kmmlu/"], shots=5, max_items=500)      # rankzero/data/screen/benchmark_files.py
    scores = score_suites(model, tokenizer, suites)                # every rank calls it; every rank gets the scores
    scores["kmmlu"]["acc"], scores["kmmlu"]["acc_norm"], scores["kmmlu"]["predictions"][0]

Each choice is a request (the prompt, " " + the choice) whose summed log-likelihood and greediness are what
lm-eval's HFLM computes: the context's trailing spaces move to the continuation (`_encode_pair`), both are
encoded as the tokenizer encodes by default (BOS if it adds one), the whole is cut from the left to the model's
length, and batches are right-padded (a causal model's real positions never see the padding). acc takes the
choice with the highest log-likelihood, acc_norm the highest per character of the choice (lm-eval's).

Only the continuation positions reach the output layer: a pre-hook on the model's output embeddings hands it
the final hidden states at those positions alone, so the logits are [tokens scored, vocab], never
[batch, length, vocab], and whatever the model does after its output layer (soft-capping, scaling) still runs.

Over ranks: items ordered by length and dealt round-robin, so each rank gets long and short ones alike; every
rank runs as many forwards as the busiest one (a rank out of work runs a one-token forward: FSDP2 needs every
rank in every forward) and the results are gathered with all_gather_object (gloo or NCCL). Choices whose inputs are
equal (" A".." D" after the same prompt) share one row, as HFLM's logits cache shares one.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from rankzero.errors import RankzeroError

DEFAULT_MAX_LENGTH = 2048  # HFLM's, when neither the config nor the tokenizer gives one


def max_length_of(model, tokenizer) -> int:
    """The model's context length as HFLM resolves it: the (text) config, the tokenizer, then 2048."""
    config = getattr(model.config, "text_config", None) or model.config
    for name in ("n_positions", "max_position_embeddings", "n_ctx"):
        if getattr(config, name, None) is not None:
            return int(getattr(config, name))
    length = getattr(tokenizer, "model_max_length", None)
    return int(length) if length is not None and length < int(1e30) else DEFAULT_MAX_LENGTH


def encode_pair(tokenizer, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """lm-eval's `_encode_pair` for a causal model: the context's trailing spaces belong to the continuation (a
    BPE token starts with its space), and the continuation is what the whole adds to the context's tokens."""
    spaces = len(context) - len(context.rstrip())
    if spaces:
        context, continuation = context[:-spaces], context[-spaces:] + continuation
    whole = tokenizer.encode(context + continuation)
    context_ids = tokenizer.encode(context)
    return context_ids, whole[len(context_ids):]


@contextmanager
def _scoring(model):
    """Eval mode, no autograd, the RNG state left as it was (a training run's data order and dropout must not
    notice an evaluation), the previous mode back after."""
    was_training = model.training
    device = next(model.parameters()).device
    model.eval()
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            yield device
    finally:
        model.train(was_training)


@contextmanager
def _output_layer_at(model, rows: torch.Tensor, columns: torch.Tensor):
    """The output layer sees only hidden[rows, columns] (shape [1, tokens, hidden])."""
    head = model.get_output_embeddings()
    if head is None:
        raise RankzeroError(f"{type(model).__name__} has no output embeddings to score choices with")

    def gather(module, args, kwargs):
        return (args[0][rows, columns].unsqueeze(0), *args[1:]), kwargs

    handle = head.register_forward_pre_hook(gather, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


def _forward(model, device, rows: list[tuple[tuple[int, ...], int]]) -> torch.Tensor:
    """One forward over `rows` (input tokens, how many last positions to score), right-padded; the log-probabilities
    at those positions, row after row: [positions, vocab]."""
    width = max(len(tokens) for tokens, _ in rows)
    inputs = torch.zeros(len(rows), width, dtype=torch.long)
    at_rows, at_columns = [], []
    for row, (tokens, scored) in enumerate(rows):
        inputs[row, :len(tokens)] = torch.tensor(tokens)
        at_rows += [row] * scored
        at_columns += range(len(tokens) - scored, len(tokens))
    with _output_layer_at(model, torch.tensor(at_rows, device=device), torch.tensor(at_columns, device=device)):
        logits = model(input_ids=inputs.to(device), use_cache=False).logits[0]
    return F.log_softmax(logits.float(), dim=-1)


def _idle_forward(model, device) -> None:
    """A one-token forward, for a rank whose share ran out while others still run theirs (FSDP2 gathers each
    layer's weights from every rank in every forward)."""
    zero = torch.zeros(1, dtype=torch.long, device=device)
    with _output_layer_at(model, zero, zero):
        model(input_ids=torch.zeros(1, 1, dtype=torch.long, device=device), use_cache=False)


def _requests(suites, share, tokenizer, max_length: int) -> list[tuple]:
    """(suite, item, choice, tokens, continuation length) of each choice of this rank's items, cut as HFLM cuts."""
    requests = []
    for s, i in share:
        question = suites[s].items[i]
        for c, continuation in enumerate(question.continuations()):
            context_ids, continuation_ids = encode_pair(tokenizer, question.context, continuation)
            if not context_ids or not continuation_ids:
                raise RankzeroError(f"{question.where}: choice {c} encodes to no tokens after its prompt; it cannot "
                                    "be scored")
            if len(continuation_ids) > max_length:
                raise RankzeroError(f"{question.where}: choice {c} is {len(continuation_ids)} tokens, more than the "
                                    f"model's {max_length}")
            tokens = (context_ids + continuation_ids)[-(max_length + 1):]  # HFLM cuts the context from the left
            requests.append((s, i, c, tokens, len(continuation_ids)))
    return requests


def _batches(requests, batch_size: int):
    """The forwards' rows, longest first, and where each row's scored positions end in its forward's output.
    Choices whose inputs are equal (one-token choices after the same prompt: " A".." D") share a row, as HFLM's
    logits cache shares one; a row scores as many last positions as the longest of its continuations."""
    rows: dict[tuple[int, ...], int] = {}
    for *_, tokens, length in requests:
        rows[tuple(tokens[:-1])] = max(rows.get(tuple(tokens[:-1]), 0), length)
    ordered = sorted(rows.items(), key=lambda row: (-len(row[0]), row[0]))
    batches = [ordered[start:start + batch_size] for start in range(0, len(ordered), batch_size)]
    places = {}  # row -> (its forward, one past its last scored position in that forward's output)
    for number, batch in enumerate(batches):
        end = 0
        for tokens, scored in batch:
            end += scored
            places[tokens] = (number, end)
    return batches, places


def _world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def score_suites(model, tokenizer, suites, *, batch_size: int = 8) -> dict[str, dict]:
    """Every suite's acc, acc_norm and per-item predictions. Collective over the default process group when one
    is initialized: every rank calls it with the same suites, every rank gets the same scores."""
    if batch_size < 1:
        raise RankzeroError(f"benchmark batch size {batch_size}: give 1 or more")
    rank, world = _world()
    items = [(s, i) for s, suite in enumerate(suites) for i in range(len(suite.items))]

    def characters(key):
        question = suites[key[0]].items[key[1]]
        return len(question.context) + max(map(len, question.choices))

    # Longest first (an out-of-memory shows at once), then dealt round-robin: every rank gets long and short items.
    items.sort(key=lambda key: (-characters(key), key))
    shares = [items[r::world] for r in range(world)]

    problem, requests = None, []
    try:
        requests = _requests(suites, shares[rank], tokenizer, max_length_of(model, tokenizer))
    except RankzeroError as error:  # said on every rank below: the others must not wait for this one's forwards
        problem = str(error)
    batches, places = _batches(requests, batch_size)
    counts = [(len(batches), problem)]
    if world > 1:  # the busiest rank's count: the others run idle forwards to match it
        counts = [None] * world
        dist.all_gather_object(counts, (len(batches), problem))
    for _, said in counts:
        if said:
            raise RankzeroError(said)
    per_batch: list[list] = [[] for _ in batches]  # each request with where its positions end in its forward
    for request in requests:
        batch, end = places[tuple(request[3][:-1])]
        per_batch[batch].append((request, end))
    local = {}
    with _scoring(model) as device:
        for number in range(max(count for count, _ in counts)):
            if number >= len(batches):
                _idle_forward(model, device)
                continue
            log_probs = _forward(model, device, batches[number])
            for (s, i, c, tokens, length), end in per_batch[number]:
                targets = torch.tensor(tokens[-length:], device=log_probs.device)
                scored = log_probs[end - length:end]
                local[(s, i, c)] = (float(scored.gather(1, targets[:, None]).sum()),
                                    bool((scored.argmax(-1) == targets).all()))
    gathered = [local]
    if world > 1:
        gathered = [None] * world
        dist.all_gather_object(gathered, local)
    results = {key: value for part in gathered for key, value in part.items()}
    return {suite.name: _scores(suite, [[results[(s, i, c)] for c in range(len(question.choices))]
                                        for i, question in enumerate(suite.items)])
            for s, suite in enumerate(suites)}


def _scores(suite, per_item: list[list[tuple[float, bool]]]) -> dict:
    predictions, correct, correct_norm = [], 0, 0
    for question, results in zip(suite.items, per_item):
        likelihoods = np.array([likelihood for likelihood, _ in results])
        lengths = np.array([float(len(choice)) for choice in question.choices])
        predicted, predicted_norm = int(np.argmax(likelihoods)), int(np.argmax(likelihoods / lengths))
        correct += predicted == question.gold
        correct_norm += predicted_norm == question.gold
        predictions.append({"id": question.id, "where": question.where, "gold": question.gold,
                            "predicted": predicted, "predicted_norm": predicted_norm,
                            "loglikelihoods": likelihoods.tolist(), "greedy": [greedy for _, greedy in results]})
    count = len(suite.items)
    return {"items": count, "acc": correct / count, "acc_norm": correct_norm / count, "shots": suite.shots,
            "shape": suite.shape, "items_in_files": suite.items_in_files, "seed": suite.seed,
            "predictions": predictions}
