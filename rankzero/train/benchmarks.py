"""Multiple-choice scoring, as lm-evaluation-harness scores its Korean tasks, split over every rank.

    scores = score_suites(model, tokenizer, read_suites(paths))   # collective: every rank calls it, every rank gets
    scores["Law_test"]["acc"], scores["Law_test"]["predictions"][0]

Each choice's log-likelihood is the sum of the log-probabilities of its tokens after the prompt (lm-eval's
`loglikelihood`, with its `_encode_pair`: trailing spaces of the prompt move to the continuation, the whole string is
encoded once and the continuation is what follows the prompt's tokens). `acc` takes the most likely choice, `acc_norm`
the most likely per character of the choice. The (prompt, choice) requests of every suite are sorted by length and
dealt over the ranks, padded with repeats so that every rank runs the same number of forwards (FSDP gathers each
layer's weights in every forward, on every rank), and gathered back. Only the positions that predict a continuation
are projected to the vocabulary (`logits_to_keep`), and only those go through log-softmax in fp32.

The model is put in eval mode and back; no random stream is drawn from.
"""

from __future__ import annotations

import torch



def encode_pairs(tokenizer, pairs: list[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
    """lm-eval's `_encode_pair` for each (context, continuation), the texts encoded in two batched calls."""
    moved = []
    for context, continuation in pairs:
        spaces = len(context) - len(context.rstrip(" "))
        moved.append((context[:-spaces], context[-spaces:] + continuation) if spaces else (context, continuation))
    wholes = tokenizer([context + continuation for context, continuation in moved])["input_ids"]
    prompts = tokenizer([context for context, _ in moved])["input_ids"]
    return [(whole[:len(prompt)], whole[len(prompt):]) for whole, prompt in zip(wholes, prompts)]


@torch.no_grad()
def score_suites(model, tokenizer, suites, *, batch_size: int = 8) -> dict[str, dict]:
    requests = [(number, *request) for number, suite in enumerate(suites) for request in suite.requests()]
    encoded = encode_pairs(tokenizer, [(context, continuation) for *_, context, continuation in requests])
    # One forward per distinct row: KMMLU's four letters follow the same prompt, and their rows (the last token
    # predicts nothing) are the prompt alone.
    rows: dict[tuple[int, ...], list[int]] = {}
    for index, (context, continuation) in enumerate(encoded):
        rows.setdefault(tuple(context + continuation[:-1]), []).append(index)
    order = sorted(rows, key=len, reverse=True)
    rank, world = _rank_and_world()
    mine = order[rank::world]
    share = -(-len(order) // world)
    mine += [order[0]] * (share - len(mine))  # a repeat, dropped below: the same forwards on every rank
    was_training = model.training
    model.eval()
    try:
        found = {}
        for start in range(0, share, batch_size):
            batch = mine[start:start + batch_size]
            targets = [[encoded[index][1] for index in rows[row]] for row in batch]
            for row, values in zip(batch, _log_likelihoods(model, batch, targets)):
                found.update(zip(rows[row], values))
    finally:
        model.train(was_training)
    found = _gathered([(index, found[index]) for row in dict.fromkeys(mine) for index in rows[row]], world)
    return _scores(suites, requests, found)


def _log_likelihoods(model, rows: list[tuple[int, ...]], targets: list[list[list[int]]]) -> list[list[float]]:
    """Σ log p(continuation | row) for each row's continuations, in one forward of the batch padded on the left: the
    continuations then end at the last position, and only the last `keep` positions reach the vocabulary."""
    device = next(model.parameters()).device
    length = max(map(len, rows))
    ids = torch.zeros(len(rows), length, dtype=torch.long)
    mask = torch.zeros(len(rows), length, dtype=torch.long)
    for number, tokens in enumerate(rows):
        ids[number, length - len(tokens):] = torch.tensor(tokens)
        mask[number, length - len(tokens):] = 1
    positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
    keep = max(len(continuation) for continuations in targets for continuation in continuations)
    logits = model(input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=positions.to(device),
                   logits_to_keep=keep, use_cache=False).logits
    values = []
    for number, continuations in enumerate(targets):
        row = []
        for continuation in continuations:
            predicted = logits[number, keep - len(continuation):].float().log_softmax(dim=-1)
            tokens = torch.tensor(continuation, device=predicted.device)
            row.append(float(predicted.gather(1, tokens[:, None]).sum()))
        values.append(row)
    return values


def _rank_and_world() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _gathered(pairs: list[tuple[int, float]], world: int) -> dict[int, float]:
    if world == 1:
        return dict(pairs)
    import torch.distributed as dist

    everyone = [None] * world
    dist.all_gather_object(everyone, pairs)
    return {index: value for part in everyone for index, value in part}


def _scores(suites, requests, found: dict[int, float]) -> dict[str, dict]:
    per_item: dict[tuple[int, int], dict[int, float]] = {}
    for index, (number, item, choice, _, _) in enumerate(requests):
        per_item.setdefault((number, item), {})[choice] = found[index]
    scores = {}
    for number, suite in enumerate(suites):
        predictions = []
        for index, item in enumerate(suite.items):
            likelihoods = [per_item[(number, index)][choice] for choice in range(len(item.choices))]
            lengths = [len(target) for target in item.targets()]  # characters, as lm-eval's acc_norm
            best = max(range(len(likelihoods)), key=likelihoods.__getitem__)
            best_norm = max(range(len(likelihoods)), key=lambda choice: likelihoods[choice] / lengths[choice])
            predictions.append({"where": f"{suite.path}:{item.line}", "gold": item.answer, "predicted": best,
                                "predicted_norm": best_norm, "loglikelihoods": likelihoods})
        count = len(predictions)
        scores[suite.name] = {
            "items": count, "shots": len(suite.shots), "items_in_files": suite.in_file,
            "seed": suite.settings["seed"],
            "acc": sum(p["predicted"] == p["gold"] for p in predictions) / count,
            "acc_norm": sum(p["predicted_norm"] == p["gold"] for p in predictions) / count,
            "predictions": predictions}
    return scores
