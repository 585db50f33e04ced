#!/usr/bin/env bash
# rankzero launcher: torchrun around train.py. With no arguments it runs the bundled demo.
#
#   ./pretrain.sh                                    # demo: tokenizer + data/sample + tiny model, CPU, < 5 min
#   ./pretrain.sh configs/recipes/1b-pretrain.yaml --dataset corpus/ --tokenizer_path tok/ --output_dir runs/1b
#   NGPU=4 ./pretrain.sh --dataset a.jsonl --tokenizer_path tok/ --model_config configs/model_config_125m.json --output_dir runs/x
#   NNODES=2 MASTER_ADDR=node0 MASTER_PORT=29500 ./pretrain.sh recipe.yaml    # run the same line on every node
#
# Knobs (environment):
#   NGPU         processes per node (default: visible GPUs; 1 on a CPU-only machine)
#   NNODES       nodes (default 1)
#   NODE_RANK    this node's rank (default 0; c10d assigns ranks itself, static rendezvous needs it)
#   MASTER_ADDR  rendezvous host (default localhost)
#   MASTER_PORT  rendezvous port (default: a free port on one node; 29500 with several)
#   RDZV_BACKEND c10d (default) or static;   RDZV_ID  job id shared by the nodes (default rankzero)
#   PYTHON       interpreter (default: python3 of the active virtualenv, else .venv/ beside this script
#                when it exists (what ./venv.sh sets up), else python3);   DEMO_DIR  demo output (default runs/demo)
#   PET_SIGNALS_TO_HANDLE           signals torchrun forwards to the ranks: torchrun's own list plus SIGUSR1
#                                   (Slurm's --signal=USR1@90); on SIGTERM/SIGUSR1 every rank saves a checkpoint
#   TORCH_ELASTIC_SHUTDOWN_TIMEOUT  seconds torchrun waits for the ranks to save before SIGKILL (default 120)
#
# Exit status: 0 done; 2 a mistake in the flags (one line); 1 a failure at run time; 128 + N after signal N
# reached the launcher (143 for SIGTERM: the ranks saved a checkpoint and printed how to resume).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ -z "${PYTHON:-}" && -z "${VIRTUAL_ENV:-}" && -x "$HERE/.venv/bin/python" ]]; then
  PYTHON=$HERE/.venv/bin/python  # README's commands work without `source .venv/bin/activate`
fi
PYTHON=${PYTHON:-python3}

visible_gpus() {
  if [[ -n "${CUDA_VISIBLE_DEVICES+x}" ]]; then
    [[ -z "$CUDA_VISIBLE_DEVICES" ]] && { echo 0; return; }
    awk -F, '{print NF}' <<<"$CUDA_VISIBLE_DEVICES"
  elif command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true
  else
    echo 0
  fi
}

NGPU=${NGPU:-$(visible_gpus)}
NPROC=$(( NGPU > 0 ? NGPU : 1 ))
# Thread counts planned for fewer processes (optimize_env.sh sourced with another NGPU) oversubscribe the cores.
CORES=$(env -u OMP_NUM_THREADS nproc 2>/dev/null || echo 0)
if [[ "${OMP_NUM_THREADS:-}" =~ ^[0-9]+$ ]] && (( CORES > 0 && OMP_NUM_THREADS * NPROC > CORES )); then
  echo "pretrain.sh: warning: OMP_NUM_THREADS=$OMP_NUM_THREADS x $NPROC processes > $CORES cores; run" \
    "'NGPU=$NPROC source optimize_env.sh' (or unset OMP_NUM_THREADS) before launching" >&2
fi
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
MASTER_ADDR=${MASTER_ADDR:-localhost}
if (( NNODES == 1 )); then
  MASTER_PORT=${MASTER_PORT:-$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')}
else
  MASTER_PORT=${MASTER_PORT:-29500}
fi
RDZV_BACKEND=${RDZV_BACKEND:-c10d}
RDZV_ID=${RDZV_ID:-rankzero}
export PET_SIGNALS_TO_HANDLE=${PET_SIGNALS_TO_HANDLE:-SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1}
export TORCH_ELASTIC_SHUTDOWN_TIMEOUT=${TORCH_ELASTIC_SHUTDOWN_TIMEOUT:-120}

if [[ "$RDZV_BACKEND" == static ]]; then
  RENDEZVOUS=(--node_rank "$NODE_RANK" --master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT")
else
  RENDEZVOUS=(--rdzv_backend "$RDZV_BACKEND" --rdzv_endpoint "$MASTER_ADDR:$MASTER_PORT" --rdzv_id "$RDZV_ID")
fi
# torchrun, but a rank's one-line user error (exit 2) ends the launch with that code and no traceback.
TORCHRUN=("$PYTHON" "$HERE/scripts/torchrun.py" --nnodes "$NNODES" --nproc_per_node "$NPROC" "${RENDEZVOUS[@]}")

if (( $# > 0 )); then
  # exec: torchrun is then the process a scheduler signals and waits for. Under a shell, Slurm would count
  # the task as ended when the shell dies of SIGUSR1 and kill the ranks mid-save; as a container's PID 1
  # bash ignores SIGTERM.
  exec "${TORCHRUN[@]}" "$HERE/train.py" "$@"
fi

# The demo: everything from the repository, nothing from a hub.
DEMO_DIR=${DEMO_DIR:-runs/demo}
if [[ ! -f "$DEMO_DIR/tokenizer/tokenizer.json" ]]; then
  "$PYTHON" "$HERE/scripts/train_tokenizer.py" --dataset "$HERE/data/sample/ko.jsonl" "$HERE/data/sample/en.txt" \
    --vocab_size 2048 --output_dir "$DEMO_DIR/tokenizer"
fi
rm -rf "$DEMO_DIR/model"  # the demo trains from scratch every time (its tokenizer and prepared data are reused)
"${TORCHRUN[@]}" "$HERE/train.py" "$HERE/configs/recipes/demo.yaml" \
  --dataset "$HERE/data/sample/ko.jsonl" "$HERE/data/sample/en.txt" \
  --model_config "$HERE/configs/model_config_tiny.json" --tokenizer_path "$DEMO_DIR/tokenizer" \
  --output_dir "$DEMO_DIR/model" --cache_dir "$DEMO_DIR/cache"
echo "demo model: $DEMO_DIR/model  (AutoModelForCausalLM.from_pretrained / AutoTokenizer.from_pretrained)"
"$PYTHON" "$HERE/scripts/generate.py" "$DEMO_DIR/model" --prompt "대한민국의 수도는"
