#!/usr/bin/env bash
# Continue from a checkpoint: continued pretraining or SFT into a new run (default), or an exact resume.
#
#   ./pretrain_cont.sh runs/demo/model                          # new weights-only run: runs/demo/model-cont-<time>
#   ./pretrain_cont.sh runs/demo/model --dataset more.jsonl --max_steps 500     # flags pass through and win
#   ./pretrain_cont.sh runs/demo/model --mode sft --dataset chats.jsonl         # SFT from it
#   ./pretrain_cont.sh runs/demo/model/checkpoint-100 --max_steps 500          # from a checkpoint: runs/demo/model-checkpoint-100-cont-<time>
#   ./pretrain_cont.sh hf_checkpoint/ --dataset a.jsonl --max_steps 1000       # any HF causal-LM dir (give the data)
#   RESUME=1 ./pretrain_cont.sh runs/demo/model/checkpoint-100  # exact resume: same run, optimizer, data order
#   RESUME=1 ./pretrain_cont.sh runs/demo/model                 # exact resume from the run's newest checkpoint
#
# A rankzero run dir holds recipe.yaml (the effective run: every flag given and every default applied,
# paths absolute), replayed from any directory. A resume replays all of it. A new run takes what still
# holds (rankzero/recipe.py: REPLAY): the tokenizer, lengths, batch and logging always; the data and its
# filters unless --dataset or --mode changes them; the schedule only from a run of the same kind (from
# scratch, continued, SFT). train.py prints what it replayed and what not. Continued pretraining never
# writes into an existing non-empty dir.
#
# Knobs (environment): RESUME (0), OUTPUT_DIR (default <source>-cont-<YYYYmmdd-HHMMSS>), plus pretrain.sh's.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if (( $# < 1 )) || [[ ! -d "$1" ]]; then
  echo "usage: $0 CHECKPOINT_OR_RUN_DIR [train.py flags…]   (see the header of $0)" >&2
  exit 2
fi
SOURCE=${1%/}
shift
RESUME=${RESUME:-0}

# A checkpoint-N dir belongs to the run dir above it; a run dir is its own.
if [[ "$(basename "$SOURCE")" == checkpoint-* ]]; then RUN_DIR=$(dirname "$SOURCE"); else RUN_DIR=$SOURCE; fi
RECIPE=()
[[ -f "$RUN_DIR/recipe.yaml" ]] && RECIPE=("$RUN_DIR/recipe.yaml")

if [[ "$RESUME" == 1 ]]; then
  if (( ${#RECIPE[@]} == 0 )); then
    echo "error: $RUN_DIR/recipe.yaml not found: an exact resume needs the run's own flags (start it with train.py)" >&2
    exit 2
  fi
  CHECKPOINT=$SOURCE
  [[ "$SOURCE" == "$RUN_DIR" ]] && CHECKPOINT=auto
  exec "$HERE/pretrain.sh" "${RECIPE[@]}" --output_dir "$RUN_DIR" --resume_from_checkpoint "$CHECKPOINT" "$@"
fi

if [[ ! -f "$SOURCE/config.json" ]] && compgen -G "$SOURCE/checkpoint-*" >/dev/null; then
  NEWEST=0
  for dir in "$SOURCE"/checkpoint-*; do
    step=${dir##*checkpoint-}
    [[ "$step" =~ ^[0-9]+$ ]] && (( step > NEWEST )) && NEWEST=$step
  done
  echo "error: $SOURCE holds checkpoints but no final model (the run did not finish): continue from one," \
    "$0 $SOURCE/checkpoint-$NEWEST, or resume the run with RESUME=1 $0 $SOURCE" >&2
  exit 2
fi
# Beside the run dir, not inside it: a new run never writes into another's.
[[ "$RUN_DIR" == "$SOURCE" ]] && NEW=$SOURCE || NEW=$RUN_DIR-$(basename "$SOURCE")
OUTPUT_DIR=${OUTPUT_DIR:-$NEW-cont-$(date +%Y%m%d-%H%M%S)}
if [[ -d "$OUTPUT_DIR" && -n "$(ls -A "$OUTPUT_DIR")" ]]; then
  echo "error: $OUTPUT_DIR exists and is not empty; set OUTPUT_DIR to a new directory" >&2
  exit 2
fi
TOKENIZER=()
[[ -f "$SOURCE/tokenizer.json" ]] && TOKENIZER=(--tokenizer_path "$SOURCE")
# --model_config "" clears the recipe's from-scratch config: the weights come from SOURCE.
exec "$HERE/pretrain.sh" "${RECIPE[@]}" --model_config "" --pretrained_model "$SOURCE" "${TOKENIZER[@]}" \
  --output_dir "$OUTPUT_DIR" "$@"
