"""Sample from a trained model dir: a continuation of a prompt, or with --chat an answer to it.

    python scripts/generate.py runs/demo/model --prompt "대한민국의 수도는"
    python scripts/generate.py runs/sft/model --chat --prompt "김치찌개 끓이는 법을 알려 줘" --max_new_tokens 200
    python scripts/generate.py runs/demo/model --greedy          # the most likely tokens, no sampling

The text printed is whole characters: a byte-level tokenizer can stop (or a small model can wander)
in the middle of a multi-byte UTF-8 character, which would decode to U+FFFD; those unfinished
sequences are left out rather than shown as replacement characters.
"""

from __future__ import annotations

import argparse


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("model_dir", help="a dir with the model and its tokenizer (a run's --output_dir)")
    parser.add_argument("--prompt", default="대한민국의 수도는", help="the text to continue (or, with --chat, to answer)")
    parser.add_argument("--chat", action="store_true",
                        help="send the prompt as a user turn through the tokenizer's chat template")
    parser.add_argument("--max_new_tokens", type=int, default=40, help="tokens to generate at most")
    parser.add_argument("--greedy", action="store_true", help="always the most likely token (ignores the sampling flags)")
    parser.add_argument("--temperature", type=float, default=0.8, help="sampling temperature (> 0)")
    parser.add_argument("--top_k", type=int, default=50, help="sample among the k most likely tokens (0: all)")
    parser.add_argument("--top_p", type=float, default=1.0, help="nucleus sampling: the smallest set with this mass")
    parser.add_argument("--repetition_penalty", type=float, default=1.0, help="> 1 discourages repeats")
    parser.add_argument("--seed", type=int, default=0, help="for sampling")
    args = parser.parse_args(argv)
    for name, ok in (("max_new_tokens", args.max_new_tokens >= 1), ("temperature", args.temperature > 0),
                     ("top_k", args.top_k >= 0), ("top_p", 0 < args.top_p <= 1),
                     ("repetition_penalty", args.repetition_penalty > 0)):
        if not ok:
            parser.error(f"--{name} {getattr(args, name)} is out of range")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rankzero.train.evaluation import whole_characters  # the evaluations' samples are shown the same way

    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    model = AutoModelForCausalLM.from_pretrained(args.model_dir).eval()
    if args.chat:
        if not tokenizer.chat_template:
            raise SystemExit(f"{args.model_dir}: its tokenizer has no chat template; drop --chat to continue the prompt")
        inputs = tokenizer.apply_chat_template([{"role": "user", "content": args.prompt}], add_generation_prompt=True,
                                               return_tensors="pt", return_dict=True)
    else:
        inputs = tokenizer(args.prompt, return_tensors="pt", add_special_tokens=False)
    sampling = {"do_sample": False} if args.greedy else {
        "do_sample": True, "temperature": args.temperature, "top_k": args.top_k, "top_p": args.top_p}
    torch.manual_seed(args.seed)
    with torch.no_grad():
        output = model.generate(**inputs, max_new_tokens=args.max_new_tokens, repetition_penalty=args.repetition_penalty,
                                pad_token_id=tokenizer.pad_token_id, **sampling)
    new_ids = output[0, inputs["input_ids"].shape[1]:].tolist()
    generated = whole_characters(tokenizer, new_ids)
    print(f"sample: {generated.strip()}" if args.chat else f"sample: {args.prompt}{generated}", flush=True)
    if tokenizer.eos_token_id in new_ids:  # generate() stops there; an empty sample is an answer, not a fault
        print(f"(stopped at end-of-text after {new_ids.index(tokenizer.eos_token_id)} of at most "
              f"{args.max_new_tokens} new tokens)", flush=True)


if __name__ == "__main__":
    main()
