"""Print a sample continuation from a trained model dir (the demo's last step).

    python scripts/generate.py runs/demo/model --prompt "대한민국의 수도는" --max_new_tokens 40
"""

from __future__ import annotations

import argparse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir")
    parser.add_argument("--prompt", default="대한민국의 수도는")
    parser.add_argument("--max_new_tokens", type=int, default=40)
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    model = AutoModelForCausalLM.from_pretrained(args.model_dir).eval()
    inputs = tokenizer(args.prompt, return_tensors="pt", add_special_tokens=False)
    torch.manual_seed(0)
    with torch.no_grad():
        output = model.generate(**inputs, max_new_tokens=args.max_new_tokens, do_sample=True, top_k=50,
                                temperature=0.8, pad_token_id=tokenizer.pad_token_id)
    print(f"sample: {tokenizer.decode(output[0], skip_special_tokens=True)}", flush=True)


if __name__ == "__main__":
    main()
