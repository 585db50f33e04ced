"""New Korean tokens in a model that has not seen them: rankzero's sub-word init against Hugging Face's mean init.

    python bench/vocab_init_bench.py                     # base on English only (the issue's set-up), ~5 min on 2 cores
    python bench/vocab_init_bench.py --base_korean       # base also trained on some Korean (as Llama-3 or Qwen were)
    python bench/vocab_init_bench.py --base_steps 300 --steps 50 --seed 1
    python bench/vocab_init_bench.py --device cuda --base_steps 3000 --corpus shared/corpora/ko_real_dev   # a GPU

1. A byte-level BPE tokenizer (rankzero's trainer) and a small Llama (transformers' class, untied embeddings
   as in Llama-3.1-8B and Qwen2.5-7B) trained on English only: data/sample/en.txt and the docstrings of
   Python's standard library (PSF license), long enough that the embeddings carry what the model learned
   (--base_korean adds data/sample/ko.jsonl to both).
2. The tokenizer extended with Korean tokens learned on data/sample/ko.jsonl (`train_tokenizer(...,
   base_tokenizer=...)`, as scripts/train_tokenizer.py --base_tokenizer does).
3. Two copies of the base model continue on Korean it has never seen, /work/shared/corpora/ko_real_dev
   (read from there), with the same seed, batches and optimizer (rankzero's continued-pretraining
   defaults): one with `resize_token_embeddings`' default (every new row at the old mean, plus 1e-9 of
   the covariance as noise), one with `rankzero.train.model.match_vocabulary` (each new row the mean of its
   old pieces' rows). Printed: the loss of every step (step 1 is the loss before any update: the init
   alone), the mean of the 50, and a held-out loss on other ko_real_dev documents before and after.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import inspect
import json
import math
import platform
import re
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
KO_REAL_DEV = Path("/work/shared/corpora/ko_real_dev")
HANGUL = re.compile(r"[\u1100-\u11ff\u3130-\u318f\uac00-\ud7a3]")
STDLIB = ("os re json collections itertools functools pathlib argparse logging subprocess threading asyncio email "
          "http.client urllib.request unittest typing dataclasses decimal fractions statistics random datetime "
          "calendar textwrap string shutil tarfile zipfile csv sqlite3 socket ssl hashlib inspect ast pickle copy "
          "heapq bisect enum contextlib abc io tempfile glob configparser difflib pprint traceback warnings "
          "weakref math operator queue sched selectors multiprocessing concurrent.futures xml.etree.ElementTree "
          "html.parser mailbox smtplib ftplib imaplib zlib gzip bz2 lzma base64 struct codecs array uuid "
          "ipaddress doctest pdb timeit trace tracemalloc platform turtle").split()


def say(what: str, started: float) -> None:
    print(f"[{time.perf_counter() - started:6.0f} s] {what}", file=sys.stderr, flush=True)


def english_texts() -> list[str]:
    texts = (REPO / "data" / "sample" / "en.txt").read_text(encoding="utf-8").splitlines()
    for name in STDLIB:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for member, value in inspect.getmembers(module):
            doc = None if member.startswith("_") else inspect.getdoc(value)
            if doc and len(doc) > 200:
                texts.append(doc)
    texts = list(dict.fromkeys(texts))  # a docstring shared by re-exports counts once
    assert not any(HANGUL.search(text) for text in texts), "the English corpus must hold no Korean"
    return texts


def jsonl_texts(path: Path) -> list[str]:
    return [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def blocks(tokenizer, texts: list[str], length: int):
    import torch

    ids = []
    for text in texts:
        ids += tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]
    usable = len(ids) // length * length
    return torch.tensor(ids[:usable]).view(-1, length)


def make_optimizer(model, lr: float, steps: int, warmup: float, min_lr_rate: float | None):
    import torch
    from transformers import get_scheduler

    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]  # norms: no decay, as the HF Trainer does
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                                  lr=lr, betas=(0.9, 0.95))
    kind, extra = ("cosine_with_min_lr", {"min_lr_rate": min_lr_rate}) if min_lr_rate else ("cosine", None)
    scheduler = get_scheduler(kind, optimizer, num_warmup_steps=max(1, math.ceil(warmup * steps)),
                              num_training_steps=steps, scheduler_specific_kwargs=extra)
    return optimizer, scheduler


def train(model, data, steps: int, batch: int, optimizer, scheduler, seed: int, device: str,
          report=None) -> list[float]:
    import torch

    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(data), generator=generator)
    losses = []
    model.train()
    for step in range(steps):
        rows = order[(step * batch) % len(data):][:batch]
        if len(rows) < batch:
            rows = order[:batch]
        inputs = data[rows].to(device)
        loss = model(input_ids=inputs, labels=inputs).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if report is not None and (step + 1) % 25 == 0:
            report(step + 1, sum(losses[-25:]) / 25)
    return losses


def held_out_loss(model, data, batch: int, device: str) -> float:
    import torch

    model.eval()
    with torch.no_grad():
        total = [model(input_ids=data[i:i + batch].to(device), labels=data[i:i + batch].to(device)).loss.item()
                 for i in range(0, len(data), batch)]
    model.train()
    return sum(total) / len(total)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base_steps", type=int, default=400)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--base_vocab", type=int, default=4000)
    parser.add_argument("--new_tokens", type=int, default=2000)
    parser.add_argument("--base_korean", action="store_true", help="train the base on some Korean too")
    parser.add_argument("--eval_blocks", type=int, default=64, help="held-out blocks evaluated")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--corpus", type=Path, default=KO_REAL_DEV, help="ko_real_dev's directory")
    args = parser.parse_args()

    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from rankzero.tokenizer_trainer import train_tokenizer
    from rankzero.train.model import match_vocabulary, padded_vocabulary
    from rankzero.train.training_args import (CONTINUED_MIN_LR_RATE, CONTINUED_RATE_SHARE, WARMUP_FRACTION,
                                              learning_rate_for)

    torch.set_num_threads(args.threads)
    seq, batch, device = args.seq, args.batch, args.device
    started = time.perf_counter()
    korean_sample = jsonl_texts(REPO / "data" / "sample" / "ko.jsonl")
    base_texts = english_texts() + (korean_sample if args.base_korean else [])
    real = [text for name in ("encyclopedia", "dialogue", "qa") for text in jsonl_texts(args.corpus / f"{name}.jsonl")]
    held_out, continued = real[::10], [text for i, text in enumerate(real) if i % 10]
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        say(f"{len(base_texts)} base texts, {sum(map(len, base_texts)):,} chars", started)
        base_tokenizer = train_tokenizer(base_texts, args.base_vocab, scratch / "base")
        say("base tokenizer", started)
        extended = train_tokenizer(korean_sample, len(base_tokenizer) + args.new_tokens, scratch / "extended",
                                   base_tokenizer=scratch / "base")
        say("extended tokenizer", started)
        extended = AutoTokenizer.from_pretrained(scratch / "extended")

        torch.manual_seed(args.seed)
        config = LlamaConfig(vocab_size=padded_vocabulary(len(base_tokenizer)), hidden_size=args.hidden,
                             intermediate_size=3 * args.hidden, num_hidden_layers=args.layers, num_attention_heads=4,
                             num_key_value_heads=4,
                             max_position_embeddings=seq, tie_word_embeddings=False,
                             bos_token_id=base_tokenizer.bos_token_id, eos_token_id=base_tokenizer.eos_token_id)
        base = LlamaForCausalLM(config).to(device)
        parameters = base.num_parameters()
        base_data = blocks(base_tokenizer, base_texts, seq)
        say(f"base data: {base_data.numel():,} tokens; training {parameters:,} parameters", started)
        optimizer, scheduler = make_optimizer(base, learning_rate_for(parameters), args.base_steps, WARMUP_FRACTION, None)
        base_losses = train(base, base_data, args.base_steps, batch, optimizer, scheduler, args.seed, device,
                            report=lambda step, loss: say(f"base step {step}: loss {loss:.3f}", started))
        base_state = {name: value.detach().clone() for name, value in base.state_dict().items()}
        base_seconds = time.perf_counter() - started
        say(f"base model: loss {base_losses[0]:.2f} → {base_losses[-1]:.2f}", started)

        data, evaluation = blocks(extended, continued, seq), blocks(extended, held_out, seq)[:args.eval_blocks]
        tokens = {name: sum(len(t.encode(text, add_special_tokens=False)) for text in held_out)
                  for name, t in (("base", base_tokenizer), ("extended", extended))}
        results = {}
        for init in ("hf_mean", "subword"):
            model = LlamaForCausalLM(copy.deepcopy(config)).to(device)  # a resize changes its config in place
            model.load_state_dict(base_state)
            if init == "hf_mean":
                model.resize_token_embeddings(padded_vocabulary(len(extended)))  # its default: mean_resizing=True
            else:
                extension = match_vocabulary(model, extended, None, "base", base_tokenizer)
            rate = float(f"{learning_rate_for(model.num_parameters()) * CONTINUED_RATE_SHARE:.2g}")
            optimizer, scheduler = make_optimizer(model, rate, args.steps, WARMUP_FRACTION, CONTINUED_MIN_LR_RATE)
            before = held_out_loss(model, evaluation, batch, device)
            losses = train(model, data, args.steps, batch, optimizer, scheduler, args.seed + 1, device)
            say(f"{init}: step 1 loss {losses[0]:.3f}, mean {sum(losses) / len(losses):.3f}", started)
            results[init] = {"losses": losses, "held_out_before": before,
                             "held_out_after": held_out_loss(model, evaluation, batch, device), "lr": rate}

    report = {
        "machine": (torch.cuda.get_device_name() if device.startswith("cuda") else
                    f"{platform.machine()} CPU, {args.threads} thread(s)") + f", torch {torch.__version__}",
        "base": {"texts": len(base_texts), "korean_in_base": args.base_korean, "tokens": base_data.numel(),
                 "steps": args.base_steps, "parameters": parameters, "loss_first": round(base_losses[0], 3),
                 "loss_last10": round(sum(base_losses[-10:]) / 10, 3), "seconds": round(base_seconds)},
        "tokenizer": {"base": len(base_tokenizer), "extended": len(extended),
                      "held_out_chars_per_token": {name: round(sum(map(len, held_out)) / count, 2)
                                                   for name, count in tokens.items()}},
        "vocabulary": extension.describe("the base"),
        "continued": {"documents": len(continued), "held_out_documents": len(held_out), "blocks": len(data),
                      "seq": seq, "batch": batch, "steps": args.steps, "seed": args.seed},
    }
    for init, result in results.items():
        losses = result["losses"]
        report[init] = {"lr": result["lr"], **{f"step{s}": round(losses[s - 1], 3) for s in sorted({1, 2, 5, 10, 25, args.steps}) if s <= args.steps},
                        f"mean_{args.steps}": round(sum(losses) / len(losses), 3),
                        "held_out_before": round(result["held_out_before"], 3),
                        "held_out_after": round(result["held_out_after"], 3), "curve": [round(x, 3) for x in losses]}
    print(json.dumps(report, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
