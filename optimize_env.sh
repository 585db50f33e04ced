# shellcheck shell=bash
# Thread and data-preparation settings computed from this machine. Source it, don't run it:
#
#   source optimize_env.sh                  # then ./pretrain.sh …
#   NGPU=4 source optimize_env.sh           # plan for 4 training processes on this node
#   OMP_NUM_THREADS=8 source optimize_env.sh   # values already set are kept (and reported)
#
# Rules: training threads × processes ≤ cores (OMP/MKL/RAYON = cores / processes); data preparation
# runs DATASET_NUM_PROC single-threaded workers ≤ cores, and ≤ one per ~2 GB of memory (a worker with
# Kiwi and tokenizer peaks near 1 GB); smaller batches when memory is tight.
# Knobs: NGPU (default: visible GPUs), RANKZERO_GB_PER_WORKER (2).
# Sourced into your shell, so no `set -euo pipefail` here: a failing line must not close your shell.

_rankzero_optimize_env() {
  local cores memory_gb gpus processes threads workers batch gb_per_worker
  cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || echo 1)  # nproc obeys OMP_NUM_THREADS
  memory_gb=$(awk '/^MemAvailable:/ {printf "%d", $2 / 1048576}' /proc/meminfo 2>/dev/null || echo 4)
  [[ -z "$memory_gb" || "$memory_gb" -lt 1 ]] && memory_gb=1
  if [[ -n "${NGPU:-}" ]]; then
    gpus=$NGPU
  elif [[ -n "${CUDA_VISIBLE_DEVICES+x}" ]]; then
    gpus=$(awk -F, '{print NF}' <<<"$CUDA_VISIBLE_DEVICES")
  elif command -v nvidia-smi >/dev/null 2>&1; then
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  else
    gpus=0
  fi
  processes=$(( gpus > 0 ? gpus : 1 ))
  threads=$(( cores / processes )); (( threads < 1 )) && threads=1
  gb_per_worker=${RANKZERO_GB_PER_WORKER:-2}
  workers=$(( memory_gb / gb_per_worker )); (( workers > cores )) && workers=$cores; (( workers < 1 )) && workers=1
  batch=1000; (( memory_gb < 8 )) && batch=200

  echo "optimize_env: $cores cores, ${memory_gb} GB available, $gpus GPU(s) → $processes training process(es)"
  _rankzero_set OMP_NUM_THREADS "$threads" "$cores cores / $processes processes"
  _rankzero_set MKL_NUM_THREADS "$threads" "same as OMP_NUM_THREADS"
  _rankzero_set RAYON_NUM_THREADS "$threads" "Rust tokenizers per process, same budget"
  _rankzero_set DATASET_NUM_PROC "$workers" "min(cores, ${memory_gb} GB / ${gb_per_worker} GB per worker)"
  _rankzero_set DATASET_BATCH_SIZE "$batch" "documents per worker task$( (( batch < 1000 )) && echo ', memory < 8 GB')"
  _rankzero_set DATASET_WRITER_BATCH_SIZE "$batch" "rows per Arrow record batch"
}

_rankzero_set() {  # NAME VALUE WHY: export unless already set
  if [[ -n "${!1:-}" ]]; then
    echo "  $1=${!1} (kept: already set; computed $2)"
  else
    export "$1=$2"
    echo "  $1=$2 ($3)"
  fi
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  echo "optimize_env.sh sets variables in your shell: run 'source optimize_env.sh'" >&2
  exit 1
fi
_rankzero_optimize_env
unset -f _rankzero_optimize_env _rankzero_set
