"""New Korean tokens in a model that has not seen them: sub-word inits of their rows against Hugging Face's mean init.

    python bench/vocab_init_bench.py --base_steps 2000 --base_cache out/base_en     # base on English only (the issue's set-up)
    python bench/vocab_init_bench.py --base_steps 2000 --base_cache out/base_mixed --base_korean   # also on some Korean
    python bench/vocab_init_bench.py --base_cache out/base_en --inits hf_mean,subword --seed 1    # the same base again
    python bench/vocab_init_bench.py --device cuda --base_steps 3000 --corpus shared/corpora/ko_real_dev   # a GPU
    python bench/vocab_init_bench.py --whole_stdlib --hidden 256 --layers 6 --base_steps 3000 --base_cache out/base_big
                                     # a 7.2M base on 3x the English (every stdlib docstring), so it does not memorise
    python bench/vocab_init_bench.py --whole_stdlib --site_packages --hidden 256 --layers 6 --base_steps 3500 \\
        --base_cache out/base_sp      # and 6 M characters of the installed packages' docstrings: read 1.6 times

1. A byte-level BPE tokenizer (rankzero's trainer) and a small Llama (transformers' class, untied embeddings
   as in Llama-3.1-8B and Qwen2.5-7B) trained on English only: data/sample/en.txt and the docstrings of
   Python's standard library (PSF license), long enough that the embeddings carry what the model learned
   (--base_korean adds data/sample/ko.jsonl to both; --whole_stdlib and --site_packages add more English, below).
   With --base_cache the base is kept there and read back
   by later runs (whatever their --base_* flags: one directory per base).
2. The tokenizer extended with Korean tokens learned on data/sample/ko.jsonl (`train_tokenizer(...,
   base_tokenizer=...)`, as scripts/train_tokenizer.py --base_tokenizer does).
3. One copy of the base model per init (--inits; `INITS` says what each does) continues on Korean it has
   never seen, /work/shared/corpora/ko_real_dev (read from there), with the same batches (--seed) and
   optimizer (rankzero's continued-pretraining defaults). `hf_mean` is `resize_token_embeddings`' default
   (every new row at the old mean, plus 1e-9 of the covariance as noise; the base's own padding rows kept);
   `subword` is what `rankzero.train.model.match_vocabulary` does. Printed: each init's new rows' spread
   over the old rows', the loss of every step (step 1 is the loss before any update: the init alone), the
   mean of the 50, and a held-out loss on other ko_real_dev documents before and after.
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


def english_texts(whole_stdlib: bool = False, site_packages_chars: int = 0) -> list[str]:
    """data/sample/en.txt and the docstrings of STDLIB's public members; with whole_stdlib also every docstring
    in the standard library's source files (read with ast, nothing imported; ~1.4 M characters more), and with
    site_packages_chars the first that many characters of the docstrings of the packages installed beside this
    Python (~40 M characters in rankzero's venv), so that a larger base reads its text a few times, or less than
    twice, instead of memorising it."""
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
    if whole_stdlib:
        texts += stdlib_source_docstrings()
    if site_packages_chars:
        texts += site_packages_docstrings(site_packages_chars)
    texts = list(dict.fromkeys(texts))  # a docstring shared by re-exports counts once
    assert not any(HANGUL.search(text) for text in texts), "the English corpus must hold no Korean"
    return texts


def stdlib_source_docstrings() -> list[str]:
    import sysconfig

    return source_docstrings(Path(sysconfig.get_paths()["stdlib"]), {"site-packages", "dist-packages", "idlelib",
                                                                    "lib2to3", "tkinter", "turtledemo"})


def site_packages_docstrings(limit: int) -> list[str]:
    """The installed packages' own docstrings (transformers, torch, numpy, pandas, sympy, ...: BSD, Apache and
    MIT licences), read in place for this benchmark and kept nowhere: the first `limit` characters of them, the
    files in sorted path order so that every run reads the same text."""
    import sysconfig

    return source_docstrings(Path(sysconfig.get_paths()["purelib"]), {"__pycache__"}, limit)


def source_docstrings(root: Path, skipped: set[str], limit: int | None = None) -> list[str]:
    """Every docstring over 80 characters and without Hangul in the .py files under root (read with ast, nothing
    imported; a file that does not parse is passed over), test directories and `skipped` left out, until `limit`
    characters."""
    import ast

    skipped = skipped | {"test", "tests"}
    texts, seen, total = [], set(), 0
    for path in sorted(root.rglob("*.py")):
        if skipped & set(path.relative_to(root).parts):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):  # ValueError: a null byte, before Python 3.12
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc and len(doc) > 80 and doc not in seen and not HANGUL.search(doc):
                    seen.add(doc)  # copies (transformers' "Copied from" classes) count once toward the limit
                    texts.append(doc)
                    total += len(doc)
                    if limit is not None and total >= limit:
                        return texts
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


# Each init: how the new rows of the input and of the output embeddings start (`rule` below), and what it is.
INITS = {
    "hf_mean": (None, None, "Hugging Face's resize_token_embeddings default: every new row at the old mean"),
    "subword": ("pieces", "pieces", "in and out the mean of the old pieces' rows (FVT; rankzero's)"),
    "subword_first_out": ("pieces", "first", "in the pieces' mean, out the first piece's row (EEVE)"),
    "subword_mean_out": ("pieces", "mean", "in the pieces' mean, out the old mean as Hugging Face's"),
    "subword_centred_out": ("pieces", "centred", "in the pieces' mean, out the pieces' mean moved so that the "
                                                 "new rows' mean is the old mean"),
    "subword_centred": ("centred", "centred", "in and out the pieces' mean, moved so that the new rows' mean "
                                              "is the old mean"),
    "mean_in_subword_out": ("mean", "pieces", "in the old mean as Hugging Face's, out the pieces' mean"),
    "mean_in_centred_out": ("mean", "centred", "in the old mean as Hugging Face's, out the pieces' mean moved so "
                                               "that the new rows' mean is the old mean"),
}


def rule(kind: str, weight, pieces: list[list[int]], first: int):
    """The new rows of `weight` under one of INITS' rules (rows below `first` are the old ones)."""
    from rankzero.train.vocabulary import subword_means

    old_mean = weight[:first].double().mean(0).to(weight.dtype)
    if kind == "first":
        return subword_means(weight, [p[:1] for p in pieces], old_mean)
    if kind == "mean":
        return old_mean.expand(len(pieces), -1)
    rows = subword_means(weight, pieces, old_mean)
    return rows if kind == "pieces" else rows - rows.double().mean(0).to(rows.dtype) + old_mean


def initialise(model, init: str, extended, base_tokenizer, rows: int):
    """One arm's new rows. Each arm sets both matrices itself, so that it means the same whatever rankzero's
    default is."""
    import torch

    from rankzero.train.model import match_vocabulary
    from rankzero.train.vocabulary import token_pieces

    if init == "hf_mean":
        model.resize_token_embeddings(rows)  # its default: mean_resizing=True
        return None
    extension = match_vocabulary(model, extended, None, "base", base_tokenizer)
    first = extension.first_new_row
    pieces = list(token_pieces(extended, base_tokenizer, first).values())
    new = torch.arange(first, first + len(pieces))
    with torch.no_grad():
        for weight, kind in zip((model.get_input_embeddings().weight, model.get_output_embeddings().weight),
                                INITS[init][:2]):
            weight[new] = rule(kind, weight, pieces, first)
    return extension


def new_rows_spread(model, first: int, count: int) -> dict[str, float]:
    """The mean per-dimension standard deviation of the new rows over the old rows' (the issue's "spread")."""
    spread = {}
    for name, weight in (("in", model.get_input_embeddings().weight), ("out", model.get_output_embeddings().weight)):
        old, new = weight[:first].detach(), weight[first:first + count].detach()
        spread[name] = round((new.std(dim=0).mean() / old.std(dim=0).mean()).item(), 3)
    return spread


def base_model(args, base_texts, scratch: Path, started: float):
    """The base tokenizer and model, trained here or read back from --base_cache (both arms of a scenario and
    any later run with other --inits start from the same one)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from rankzero.tokenizer_trainer import train_tokenizer
    from rankzero.train.model import padded_vocabulary
    from rankzero.train.training_args import WARMUP_FRACTION, learning_rate_for

    cache = args.base_cache
    if cache and (cache / "model" / "config.json").is_file():
        say(f"base read from {cache}", started)
        meta = json.loads((cache / "base.json").read_text())
        return (AutoTokenizer.from_pretrained(cache / "tokenizer"),
                LlamaForCausalLM.from_pretrained(cache / "model", dtype=torch.float32).to(args.device), meta)
    directory = cache or scratch
    base_tokenizer = train_tokenizer(base_texts, args.base_vocab, directory / "tokenizer")
    say("base tokenizer", started)
    torch.manual_seed(args.seed)
    config = LlamaConfig(vocab_size=padded_vocabulary(len(base_tokenizer)), hidden_size=args.hidden,
                         intermediate_size=3 * args.hidden, num_hidden_layers=args.layers, num_attention_heads=4,
                         num_key_value_heads=4, max_position_embeddings=args.seq, tie_word_embeddings=False,
                         bos_token_id=base_tokenizer.bos_token_id, eos_token_id=base_tokenizer.eos_token_id)
    base = LlamaForCausalLM(config).to(args.device)
    parameters = base.num_parameters()
    base_data = blocks(base_tokenizer, base_texts, args.seq)
    say(f"base data: {base_data.numel():,} tokens; training {parameters:,} parameters", started)
    optimizer, scheduler = make_optimizer(base, learning_rate_for(parameters), args.base_steps, WARMUP_FRACTION, None)
    losses = train(base, base_data, args.base_steps, args.batch, optimizer, scheduler, args.seed, args.device,
                   report=lambda step, loss: say(f"base step {step}: loss {loss:.3f}", started))
    say(f"base model: loss {losses[0]:.2f} → {losses[-1]:.2f}", started)
    meta = {"texts": len(base_texts), "chars": sum(map(len, base_texts)), "korean_in_base": args.base_korean,
            "whole_stdlib": args.whole_stdlib,
            "site_packages_chars": args.site_packages_chars if args.site_packages else 0,
            "hidden": args.hidden, "layers": args.layers, "tokens": base_data.numel(),
            "steps": args.base_steps, "batch": args.batch, "parameters": parameters,
            "loss_first": round(losses[0], 3), "loss_last10": round(sum(losses[-10:]) / 10, 3),
            "seconds": round(time.perf_counter() - started)}
    if cache:
        base.save_pretrained(cache / "model")
        (cache / "base.json").write_text(json.dumps(meta))
    return base_tokenizer, base, meta


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base_steps", type=int, default=400)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--base_vocab", type=int, default=4000)
    parser.add_argument("--new_tokens", type=int, default=2000)
    parser.add_argument("--base_korean", action="store_true", help="train the base on some Korean too")
    parser.add_argument("--whole_stdlib", action="store_true",
                        help="the base also reads every docstring of the standard library's source (~3x the English)")
    parser.add_argument("--site_packages", action="store_true",
                        help="the base also reads the docstrings of the packages installed beside this Python")
    parser.add_argument("--site_packages_chars", type=int, default=6_000_000,
                        help="how many characters of them (the first, in sorted path order; ~40 M in all)")
    parser.add_argument("--base_cache", type=Path, help="keep the base here (trained once, read back after)")
    parser.add_argument("--inits", default=",".join(INITS),
                        help="comma-separated, of: " + "; ".join(f"{name} ({what[2]})" for name, what in INITS.items()))
    parser.add_argument("--eval_blocks", type=int, default=64, help="held-out blocks evaluated")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--corpus", type=Path, default=KO_REAL_DEV, help="ko_real_dev's directory")
    args = parser.parse_args()
    inits = args.inits.split(",")
    if unknown := set(inits) - set(INITS):
        parser.error(f"--inits: unknown {', '.join(sorted(unknown))}; choose from {', '.join(INITS)}")

    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    from rankzero.tokenizer_trainer import train_tokenizer
    from rankzero.train.model import padded_vocabulary
    from rankzero.train.training_args import CONTINUED_MIN_LR_RATE, CONTINUED_RATE_SHARE, WARMUP_FRACTION, learning_rate_for

    torch.set_num_threads(args.threads)
    seq, batch, device = args.seq, args.batch, args.device
    started = time.perf_counter()
    korean_sample = jsonl_texts(REPO / "data" / "sample" / "ko.jsonl")
    base_texts = (english_texts(args.whole_stdlib, args.site_packages_chars if args.site_packages else 0)
                  + (korean_sample if args.base_korean else []))
    real = [text for name in ("encyclopedia", "dialogue", "qa") for text in jsonl_texts(args.corpus / f"{name}.jsonl")]
    held_out, continued = real[::10], [text for i, text in enumerate(real) if i % 10]
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        say(f"{len(base_texts)} base texts, {sum(map(len, base_texts)):,} chars", started)
        base_tokenizer, base, meta = base_model(args, base_texts, scratch, started)
        base_state = {name: value.detach().clone() for name, value in base.state_dict().items()}
        train_tokenizer(korean_sample, len(base_tokenizer) + args.new_tokens, scratch / "extended",
                        base_tokenizer=(args.base_cache or scratch) / "tokenizer")
        extended = AutoTokenizer.from_pretrained(scratch / "extended")
        say("extended tokenizer", started)

        data, evaluation = blocks(extended, continued, seq), blocks(extended, held_out, seq)[:args.eval_blocks]
        tokens = {name: sum(len(t.encode(text, add_special_tokens=False)) for text in held_out)
                  for name, t in (("base", base_tokenizer), ("extended", extended))}
        results, described = {}, None
        for init in inits:
            model = LlamaForCausalLM(copy.deepcopy(base.config)).to(device)  # a resize changes its config in place
            model.load_state_dict(base_state)
            extension = initialise(model, init, extended, base_tokenizer, padded_vocabulary(len(extended)))
            described = described or (extension and extension.describe("the base"))
            rate = float(f"{learning_rate_for(model.num_parameters()) * CONTINUED_RATE_SHARE:.2g}")
            optimizer, scheduler = make_optimizer(model, rate, args.steps, WARMUP_FRACTION, CONTINUED_MIN_LR_RATE)
            spread = new_rows_spread(model, len(base_tokenizer), len(extended) - len(base_tokenizer))
            before = held_out_loss(model, evaluation, batch, device)
            losses = train(model, data, args.steps, batch, optimizer, scheduler, args.seed + 1, device)
            say(f"{init}: held-out before {before:.3f}, step 1 loss {losses[0]:.3f}, mean {sum(losses) / len(losses):.3f}",
                started)
            results[init] = {"losses": losses, "held_out_before": before, "spread": spread,
                             "held_out_after": held_out_loss(model, evaluation, batch, device), "lr": rate}

    report = {
        "machine": (torch.cuda.get_device_name() if device.startswith("cuda") else
                    f"{platform.machine()} CPU, {args.threads} thread(s)") + f", torch {torch.__version__}",
        "base": meta,
        "tokenizer": {"base": len(base_tokenizer), "extended": len(extended),
                      "held_out_chars_per_token": {name: round(sum(map(len, held_out)) / count, 2)
                                                   for name, count in tokens.items()}},
        "vocabulary": described,
        "continued": {"documents": len(continued), "held_out_documents": len(held_out), "blocks": len(data),
                      "held_out_blocks": len(evaluation), "seq": seq, "batch": batch, "steps": args.steps,
                      "seed": args.seed},
    }
    for init, result in results.items():
        losses = result["losses"]
        report[init] = {"lr": result["lr"], "new_rows_spread": result["spread"],
                        **{f"step{s}": round(losses[s - 1], 3) for s in sorted({1, 2, 5, 10, 25, args.steps}) if s <= args.steps},
                        f"mean_{args.steps}": round(sum(losses) / len(losses), 3),
                        "held_out_before": round(result["held_out_before"], 3),
                        "held_out_after": round(result["held_out_after"], 3), "curve": [round(x, 3) for x in losses]}
    print(json.dumps(report, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
