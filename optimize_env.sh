# shellcheck shell=sh
# Thread and data-preparation settings computed from this machine. Source it, don't run it; it works
# from bash, zsh (macOS) and POSIX sh (dash):
#
#   source optimize_env.sh                  # then ./pretrain.sh …   (sh: `. ./optimize_env.sh`)
#   NGPU=4 source optimize_env.sh           # plan for 4 training processes on this node
#   OMP_NUM_THREADS=8 source optimize_env.sh   # values already set are kept (and reported)
#
# Rules: training threads × processes ≤ cores (OMP/MKL/RAYON = cores / processes); data preparation
# runs DATASET_NUM_PROC workers ≤ cores, and ≤ one per ~2 GB of memory (a worker with Kiwi and the
# tokenizer peaks near 1 GB); smaller batches when memory is tight. The data builder sizes its own
# tokenizer threads from the cores it is given, whatever RAYON_NUM_THREADS says (it is the training ranks').
# Knobs: NGPU (training processes per node, as pretrain.sh reads it; default: visible GPUs, at least 1),
# RANKZERO_GB_PER_WORKER (2): whole numbers, checked; a bad one
# exports nothing and returns 2.
# Sourced into your shell: no `set -e`, no `exit`, and only POSIX syntax (no [[ ]], (( )), arrays or
# indirect expansion), since zsh and dash read this file too.

_rankzero_whole() {  # NAME VALUE MIN: is VALUE a whole number >= MIN? (else say so)
  case "$2" in
    '' | *[!0-9]*) echo "optimize_env: $1=$2 is not a whole number; nothing exported" >&2; return 1 ;;
  esac
  if [ "$2" -lt "$3" ]; then
    echo "optimize_env: $1=$2 must be at least $3; nothing exported" >&2
    return 1
  fi
}

_rankzero_set() {  # NAME VALUE WHY: export unless already set
  eval "_rankzero_current=\${$1:-}"
  if [ -n "$_rankzero_current" ]; then
    echo "  $1=$_rankzero_current (kept: already set; computed $2)"
  else
    eval "export $1=\"\$2\""
    echo "  $1=$2 ($3)"
  fi
}

_rankzero_optimize_env() {
  # nproc obeys OMP_NUM_THREADS: ask it without; getconf where there is no nproc (macOS).
  _rankzero_cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null \
    || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
  _rankzero_memory_gb=$(awk '/^MemAvailable:/ {printf "%d", $2 / 1048576}' /proc/meminfo 2>/dev/null)
  [ -n "$_rankzero_memory_gb" ] || _rankzero_memory_gb=4
  [ "$_rankzero_memory_gb" -ge 1 ] || _rankzero_memory_gb=1
  if [ -n "${CUDA_VISIBLE_DEVICES+x}" ]; then
    _rankzero_gpus=$(printf '%s\n' "$CUDA_VISIBLE_DEVICES" | awk -F, '{print NF}')
  elif command -v nvidia-smi >/dev/null 2>&1; then
    _rankzero_gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  else
    _rankzero_gpus=0
  fi
  _rankzero_gb_per_worker=${RANKZERO_GB_PER_WORKER:-2}
  _rankzero_whole RANKZERO_GB_PER_WORKER "$_rankzero_gb_per_worker" 1 || return 2

  # NGPU is the processes pretrain.sh starts (a CPU machine runs NGPU=2 as two CPU ranks); the GPUs are
  # what is visible, whatever NGPU says.
  _rankzero_processes=$_rankzero_gpus
  _rankzero_from="visible GPUs"
  if [ -n "${NGPU:-}" ]; then
    _rankzero_whole NGPU "$NGPU" 0 || return 2
    _rankzero_processes=$NGPU
    _rankzero_from="NGPU=$NGPU"
  fi
  [ "$_rankzero_processes" -ge 1 ] || _rankzero_processes=1
  _rankzero_threads=$((_rankzero_cores / _rankzero_processes))
  [ "$_rankzero_threads" -ge 1 ] || _rankzero_threads=1
  _rankzero_workers=$((_rankzero_memory_gb / _rankzero_gb_per_worker))
  [ "$_rankzero_workers" -le "$_rankzero_cores" ] || _rankzero_workers=$_rankzero_cores
  [ "$_rankzero_workers" -ge 1 ] || _rankzero_workers=1
  _rankzero_batch=1000
  _rankzero_why="documents per worker task"
  if [ "$_rankzero_memory_gb" -lt 8 ]; then
    _rankzero_batch=200
    _rankzero_why="$_rankzero_why, memory < 8 GB"
  fi

  echo "optimize_env: $_rankzero_cores cores, ${_rankzero_memory_gb} GB available, $_rankzero_gpus GPU(s) visible" \
    "→ $_rankzero_processes training process(es) ($_rankzero_from)"
  _rankzero_set OMP_NUM_THREADS "$_rankzero_threads" "$_rankzero_cores cores / $_rankzero_processes processes"
  _rankzero_set MKL_NUM_THREADS "$_rankzero_threads" "same as OMP_NUM_THREADS"
  _rankzero_set RAYON_NUM_THREADS "$_rankzero_threads" "Rust threads per training process, same budget"
  _rankzero_set DATASET_NUM_PROC "$_rankzero_workers" \
    "min(cores, ${_rankzero_memory_gb} GB / ${_rankzero_gb_per_worker} GB per worker)"
  _rankzero_set DATASET_BATCH_SIZE "$_rankzero_batch" "$_rankzero_why"
  _rankzero_set DATASET_WRITER_BATCH_SIZE "$_rankzero_batch" "rows per Arrow record batch"
}

# Run instead of sourced, it could set nothing in the caller's shell: say so (each shell tells differently).
_rankzero_run=0
if [ -n "${ZSH_VERSION:-}" ]; then
  case "${ZSH_EVAL_CONTEXT:-}" in *:file*) ;; *) _rankzero_run=1 ;; esac
elif [ -n "${BASH_VERSION:-}" ]; then
  eval '[ "${BASH_SOURCE[0]}" = "$0" ]' && _rankzero_run=1
else
  case "$0" in *optimize_env.sh) _rankzero_run=1 ;; esac
fi
if [ "$_rankzero_run" = 1 ]; then
  echo "optimize_env.sh sets variables in your shell: run 'source optimize_env.sh' (sh: '. ./optimize_env.sh')" >&2
  unset _rankzero_run
  exit 1
fi
_rankzero_optimize_env
_rankzero_status=$?
unset -f _rankzero_optimize_env _rankzero_set _rankzero_whole
unset _rankzero_run _rankzero_current _rankzero_cores _rankzero_memory_gb _rankzero_gpus _rankzero_gb_per_worker \
  _rankzero_processes _rankzero_from _rankzero_threads _rankzero_workers _rankzero_batch _rankzero_why
eval "unset _rankzero_status; return $_rankzero_status"
