"""A checkpoint as one plain Hugging Face model dir: safetensors, config, tokenizer.

    python scripts/export_checkpoint.py runs/8b-cont/checkpoint-2000 exports/step-2000
    python -c "from transformers import AutoModelForCausalLM; AutoModelForCausalLM.from_pretrained('exports/step-2000')"

For FSDP runs, whose checkpoints hold the weights as DCP shards (one file per rank) that only a run of
the same job can resume from; any other checkpoint is re-saved as it is. The checkpoint is verified first
(as `--resume_from_checkpoint` does), and its config.json must describe the model its shards hold (every
tensor's name and shape); one process, no GPU, the whole model in host memory (fp32: 4 bytes
per parameter). Tied embeddings are written once. A finished run's --output_dir is already such a dir.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="a checkpoint-N dir")
    parser.add_argument("output_dir", help="a new (or empty) dir for the model")
    args = parser.parse_args(argv)
    checkpoint, output_dir = Path(args.checkpoint), Path(args.output_dir)
    if output_dir.exists() and (not output_dir.is_dir() or any(output_dir.iterdir())):
        parser.error(f"{output_dir} exists and is not an empty dir: choose a new output_dir")

    from rankzero.train.checkpoints.verify import verify_checkpoint
    from rankzero.train.checkpoints.sharded import export_checkpoint, export_problems

    problems = verify_checkpoint(checkpoint)
    problems = problems or export_problems(checkpoint)  # config.json against the shards' tensors
    if problems:
        parser.error(f"{checkpoint} cannot be exported: {'; '.join(problems)}")
    export_checkpoint(checkpoint, output_dir)
    print(f"exported {checkpoint} to {output_dir} (AutoModelForCausalLM.from_pretrained loads it)", flush=True)
    return 0


if __name__ == "__main__":
    from rankzero.errors import run_cli

    sys.exit(run_cli(lambda: main()))
