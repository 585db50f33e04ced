#!/usr/bin/env bash
# Time the README's two commands as a new user meets them: a fresh clone of this checkout's HEAD, no
# environment active, an empty HOME (no pip cache, no user pip.conf), PATH reduced to the system's.
# Each command runs twice in its own clone: the first run sets up .venv/; the second finds it up to
# date, which is the baseline: the same command without the set-up. Results in bench/RESULTS.md.
#
#   bench/fresh_setup.sh                                        # both commands
#   bench/fresh_setup.sh demo                                   # one: demo or test
#   PASS_ENV="PIP_FIND_LINKS TORCH_INDEX_URL" bench/fresh_setup.sh   # variables kept (a wheelhouse, an index)
#
# Knobs: PASS_ENV (names of variables passed through, default none), WORK (default a new /tmp dir).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
declare -A COMMANDS=([demo]="./venv.sh ./pretrain.sh" [test]="./venv.sh python -m pytest -q")
targets=("$@")
(( $# )) || targets=(demo test)
for each in "${targets[@]}"; do  # every argument checked before anything is made under /tmp
  if [[ $each == -h || $each == --help ]]; then
    sed -n '2,11s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
    exit 0
  fi
  [[ -n ${COMMANDS[$each]+x} ]] || { echo "fresh_setup.sh: unknown command '$each': use demo or test" >&2; exit 2; }
done
WORK=${WORK:-$(mktemp -d /tmp/rankzero-fresh-XXXX)}
kept=(HOME="$WORK/home" PATH=/usr/local/bin:/usr/bin:/bin)
for name in ${PASS_ENV:-}; do
  [[ -n "${!name+x}" ]] && kept+=("$name=${!name}")
done

echo "commit $(git -C "$HERE" rev-parse --short HEAD); environment: ${kept[*]}"
for each in "${targets[@]}"; do
  command=${COMMANDS[$each]}
  clone=$WORK/$each
  git clone -q "$HERE" "$clone"
  rm -rf "$WORK/home" && mkdir -p "$WORK/home"
  for run in 1 2; do
    log=$WORK/$each-$run.log
    started=$(date +%s.%N)
    status=0
    (cd "$clone" && env -i "${kept[@]}" $command) >"$log" 2>&1 || status=$?
    seconds=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    setup=$(grep -o 'ready in [0-9]* s' "$log" || echo "set-up skipped")
    outcome=$(grep -E 'passed|failed|^demo model:' "$log" | tail -n 1 | cut -c1-100)
    echo "$each run $run: \`$command\` exit $status, $seconds s ($setup); $outcome; log $log"
  done
done
