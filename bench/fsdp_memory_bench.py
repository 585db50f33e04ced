"""Host memory of FSDP's loading: peak RSS per rank while a ~100M-parameter pretrained model is loaded and
sharded, rank 0 reading the weights (rankzero's default) against every rank reading them (the baseline).

    python bench/fsdp_memory_bench.py                    # 2 gloo processes on CPU, ~110M-parameter Llama
    python bench/fsdp_memory_bench.py --rounds 3 --hidden 1024 --layers 16
    python bench/fsdp_memory_bench.py --before_repo DIR  # + a third arm: DIR's train.py (an older checkout)

A Llama of `--hidden`/`--layers` (vocab 32000, tied embeddings) is built here from a fresh init and saved
as a pretrained dir (fp32 safetensors); then `train.py --pretrained_model DIR --fsdp full_shard` runs under
torchrun with 2 processes for one step, twice per round, alternating:

- `rankzero`: the defaults (`cpu_ram_efficient_loading`): rank 0 reads the weights, rank 1 builds the model
  without weights (never-written storage) and receives only its shards from rank 0 (sharding.RankZeroWeights);
- `every rank loads` (baseline: FSDP2 before rank-0 loading, and accelerate's own default):
  `--fsdp_config '{"cpu_ram_efficient_loading": false}'`: each rank reads the whole fp32 model, then shards it;
- `before` (only with `--before_repo DIR`, a checkout of an older rankzero, e.g. cf9e447, the last commit before
  issue 31's work: `git archive cf9e447 | tar -x -C DIR`): the same command run from DIR's train.py. There
  `--fsdp full_shard` on CPU ran as DDP (accelerate enabled FSDP only on accelerators): every rank keeps the
  whole model, and DDP's wrap broadcasts rank 0's parameters into it.

Each rank records, at its first training step (the model loaded and sharded or wrapped, before any forward),
its peak RSS so far (getrusage's ru_maxrss) and the wrapper it trains; its RSS just before the model was built
(imports, data, tokenizer: the same in all); and, when build_model returns (loaded, not yet wrapped), its RSS
and peak RSS so far; at both points also the RSS's anonymous and file-backed parts (`from_pretrained` leaves
safetensors weights mapped, unread, until something touches them). cf9e447 has the same hook points
(rankzero.train.model.build_model, called through a lazy import in run.py, and RankzeroTrainer.training_step),
so every arm is measured at the same two points.
The ranks run train.main from the recording script, so under glibc malloc (train.py's tcmalloc re-exec is in
its __main__) unless LD_PRELOAD names another allocator.
Prints one JSON line per system and round, then the table with rank 1's ratios.

    python bench/fsdp_memory_bench.py --imports          # where the RSS before the model comes from

`--imports` prints, in a fresh interpreter, the RSS (resident, and its anonymous part) after each import a
training rank makes before any model exists, in the order they first happen: torch, transformers' Llama
(which imports torch._dynamo), its Trainer (which imports datasets, hence pyarrow and pandas), rankzero's
train.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

# train.py, with each rank's memory recorded: before the model is built, and the peak at its first step.
RECORDING_RANK = """
import json, os, resource, sys
sys.path.insert(0, {repo!r})
import train
from rankzero.train import model as model_module
from rankzero.train.trainer import RankzeroTrainer

def status_mb(key="VmRSS"):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(key + ":")) / 1024

def rss_mb():
    return status_mb()

def resident(when):  # safetensors weights can stay file-backed (mmap): RssFile, not RssAnon
    return {{f"anon_{{when}}_mb": status_mb("RssAnon"), f"file_{{when}}_mb": status_mb("RssFile")}}

build = model_module.build_model
before = {{}}

def recording_build(*args, **kwargs):
    before.setdefault("rss_before_model_mb", rss_mb())
    built = build(*args, **kwargs)
    before.setdefault("rss_after_model_mb", rss_mb())
    before.setdefault("peak_after_model_mb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    for key, value in resident("after_model").items():
        before.setdefault(key, value)
    return built

step = RankzeroTrainer.training_step

def recording_step(self, model, inputs, num_items_in_batch=None):
    if self.state.global_step == 0 and not hasattr(self, "recorded"):
        self.recorded = dict(before, peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                             wrapper=type(model).__name__, **resident("at_step"))
        with open(os.path.join({out!r}, f"memory-{{os.environ['RANK']}}.json"), "w") as handle:
            json.dump(self.recorded, handle)
    return step(self, model, inputs, num_items_in_batch)

model_module.build_model = recording_build
RankzeroTrainer.training_step = recording_step
sys.exit(train.main(sys.argv[1:]))
"""

SYSTEMS = {"rankzero": [], "every_rank_loads": ["--fsdp_config", '{"cpu_ram_efficient_loading": false}']}
NAMES = {"rankzero": "rank 0 reads, sends shards (rankzero)", "every_rank_loads": "every rank reads (baseline)",
         "before": "--before_repo (every rank reads; DDP)"}


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--work_dir", default=None)
    parser.add_argument("--before_repo", default=None,
                        help="a checkout of an older rankzero (e.g. cf9e447): a third arm, its train.py")
    parser.add_argument("--imports", action="store_true", help="only the RSS after each import a rank makes")
    return parser.parse_args()


IMPORTS = """
import importlib, json, sys
sys.path.insert(0, {repo!r})

def rss_mb():
    with open("/proc/self/status") as status:
        fields = dict(line.split(":", 1) for line in status)
    return {{key: round(int(fields[key].split()[0]) / 1024) for key in ("VmRSS", "RssAnon")}}

print(json.dumps({{"import": "(interpreter)", **rss_mb()}}))
for name in ("torch", "transformers", "transformers.models.llama.modeling_llama", "transformers.trainer", "train"):
    importlib.import_module(name)
    print(json.dumps({{"import": name, **rss_mb(), "modules": len(sys.modules),
                      "with": [m for m in ("torch._dynamo", "datasets", "pyarrow", "pandas") if m in sys.modules]}}))
"""


def import_floor() -> None:
    subprocess.run([sys.executable, "-c", IMPORTS.format(repo=str(REPO))], check=True,
                   env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)})


def pretrained(args, work: Path) -> tuple[Path, int]:
    """A Llama of the bench's size, saved as an HF dir; its parameter count."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    directory = work / f"llama-{args.hidden}x{args.layers}"
    config = LlamaConfig(vocab_size=32000, hidden_size=args.hidden, intermediate_size=args.hidden * 8 // 3 // 64 * 64,
                         num_hidden_layers=args.layers, num_attention_heads=args.hidden // 64,
                         num_key_value_heads=args.hidden // 64, max_position_embeddings=2048, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    if not (directory / "config.json").is_file():
        model.save_pretrained(directory)
    return directory, model.num_parameters()


def run_system(args, work: Path, model_dir: Path, tokenizer: str, system: str) -> dict:
    repo = Path(args.before_repo).resolve() if system == "before" else REPO
    out = work / system
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    script = work / f"recording_rank-{system}.py"
    script.write_text(RECORDING_RANK.format(repo=str(repo), out=str(out)))
    cache = work / ("cache-before" if system == "before" else "cache")  # its own cache format
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
               str(free_port()), str(script), "--dataset", str(REPO / "data/sample/ko.jsonl"), "--tokenizer_path",
               tokenizer, "--cache_dir", str(cache), "--max_seq_length", "128", "--pretrained_model",
               str(model_dir), "--output_dir", str(out), "--fsdp", "full_shard", "--max_steps", "1",
               "--per_device_train_batch_size", "1", "--save_strategy", "no", "--report_to", "none",
               "--dataloader_num_workers", "0", *SYSTEMS.get(system, [])]
    result = subprocess.run(command, capture_output=True, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(repo)})
    if result.returncode != 0:
        sys.stderr.write(result.stdout[-2000:] + result.stderr[-6000:])
        raise SystemExit(f"{system} failed")
    ranks = [json.loads((out / f"memory-{rank}.json").read_text()) for rank in (0, 1)]
    return {"system": system, **{f"rank{rank}_{key}": value if isinstance(value, str) else round(value, 1)
                                 for rank, record in enumerate(ranks) for key, value in record.items()}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def tokenizer_dir(work: Path) -> str:
    directory = work / "tokenizer"
    if not (directory / "tokenizer.json").is_file():
        subprocess.run([sys.executable, str(REPO / "scripts/train_tokenizer.py"), "--dataset",
                        str(REPO / "data/sample/ko.jsonl"), str(REPO / "data/sample/en.txt"), "--vocab_size", "2048",
                        "--output_dir", str(directory)], check=True, capture_output=True)
    return str(directory)


def main() -> None:
    import torch
    import transformers

    from _measure import machine_info

    args = parse()
    if args.imports:
        return import_floor()
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="fsdp_memory_bench-"))
    model_dir, parameters = pretrained(args, work)
    tokenizer = tokenizer_dir(work)
    print(json.dumps({**machine_info(), "torch": torch.__version__, "transformers": transformers.__version__,
                      "parameters": parameters, "weights_mb": round(parameters * 4 / 2**20, 1)}), flush=True)
    arms = [*SYSTEMS, *(["before"] if args.before_repo else [])]
    rounds = []
    for index in range(args.rounds):
        systems = arms if index % 2 == 0 else arms[::-1]
        results = {system: run_system(args, work, model_dir, tokenizer, system) for system in systems}
        for system in arms:
            print(json.dumps({"round": index + 1, **results[system]}), flush=True)
        rounds.append(results)

    def median(system, key):
        return statistics.median(r[system][key] for r in rounds)

    print(f"\n{'system':<42} {'rank 1 peak RSS MB':>19} {'over its pre-model RSS':>23} {'rank 1 RSS built':>17} "
          f"{'peak built':>11} {'rank 0 peak':>12}")
    for system in arms:
        grown = statistics.median(r[system]["rank1_peak_rss_mb"] - r[system]["rank1_rss_before_model_mb"]
                                  for r in rounds)
        print(f"{NAMES[system]:<42} {median(system, 'rank1_peak_rss_mb'):>19,.0f} {grown:>23,.0f} "
              f"{median(system, 'rank1_rss_after_model_mb'):>17,.0f} "
              f"{median(system, 'rank1_peak_after_model_mb'):>11,.0f} "
              f"{median(system, 'rank0_peak_rss_mb'):>12,.0f}")
    if args.before_repo:
        ratio = statistics.median(r["rankzero"]["rank1_peak_rss_mb"] / r["before"]["rank1_peak_rss_mb"] for r in rounds)
        print(f"rank 1, rankzero ÷ --before_repo (medians of per-round ratios): peak RSS {ratio:.2f}")
    ratio = statistics.median(r["rankzero"]["rank1_peak_rss_mb"] / r["every_rank_loads"]["rank1_peak_rss_mb"]
                              for r in rounds)
    grown = statistics.median((r["rankzero"]["rank1_peak_rss_mb"] - r["rankzero"]["rank1_rss_before_model_mb"])
                              / (r["every_rank_loads"]["rank1_peak_rss_mb"]
                                 - r["every_rank_loads"]["rank1_rss_before_model_mb"]) for r in rounds)
    print(f"rank 1, rankzero ÷ baseline (medians of per-round ratios): peak RSS {ratio:.2f}, "
          f"its growth over the pre-model RSS {grown:.2f}")


if __name__ == "__main__":
    main()
