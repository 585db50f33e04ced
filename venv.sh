#!/usr/bin/env bash
# Set up the project's virtual environment, .venv/, when it is missing or out of date; then run a
# command inside it. Needs nothing but bash and Python >= 3.10.
#
#   ./venv.sh ./pretrain.sh                  # the demo
#   ./venv.sh python -m pytest -q -n 2       # the tests (what .ci/run runs)
#   ./venv.sh python scripts/generate.py runs/demo/model --prompt "서울은"
#   ./venv.sh                                # set up only (then `source .venv/bin/activate` if you like)
#
# Set-up: `python -m venv .venv`; torch, the CUDA build when an NVIDIA driver is present and the CPU
# build otherwise; then `pip install -e ".[test]"`: rankzero and every extra, and its compiled passes
# (setup.py builds them where a C compiler works; elsewhere the install goes on and the numpy versions
# run). Each step is redone only when its inputs change: .venv/.rankzero-torch records the torch choice,
# .venv/.rankzero-project a checksum of pyproject.toml, setup.py, the passes' C and constants (an edit
# rebuilds them) and this script. A script, not make (absent from minimal images) nor uv
# (it resolves torch itself: PyPI's multi-GB CUDA build on Linux, whatever wheel pip would have used).
#
# Knobs (environment):
#   PYTHON           the interpreter that creates .venv (default python3)
#   TORCH_VERSION    the torch release (default 2.13.0, the one the tests ran with)
#   TORCH_BUILD      cpu or cuda (default: cuda when nvidia-smi works or /proc/driver/nvidia exists;
#                    set it on a cluster's login node, which often has no driver)
#   TORCH_INDEX_URL  an extra index for torch (default: https://download.pytorch.org/whl/cpu for the
#                    CPU build; none for CUDA, PyPI's Linux wheel is a CUDA build: for another CUDA
#                    version, e.g. https://download.pytorch.org/whl/cu126)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VENV=$HERE/.venv
EXTRAS=test,ray  # every extra in pyproject.toml but gpu (added below for CUDA): the demo and the tests share one environment
TORCH_VERSION=${TORCH_VERSION:-2.13.0}

say() { echo "venv.sh: $*" >&2; }
die() { say "error: $*"; exit 1; }
# -qq: errors only. pip's warnings (an unreachable extra index in pip.conf, deprecations of other
# packages' builds) are not the user's to act on, and would bury the demo's output.
venv_pip() { "$VENV/bin/python" -m pip -qq --disable-pip-version-check --no-input "$@"; }
# An install names what it fetches and installs as it goes (a first set-up takes minutes, and -qq kept
# every one of them silent), and shows nothing else of pip's output but its errors. The names go to fd 3,
# the script's stderr, also where a call hides pip's errors.
exec 3>&2
venv_pip_install() {
  "$VENV/bin/python" -m pip --disable-pip-version-check --no-input install --progress-bar off "$@" \
    2> >(grep -v -E '^(WARNING|DEPRECATION):' >&2) \
    | { grep --line-buffered -E '^ *(Collecting|Downloading|Processing|Installing collected packages)' || true; } \
    | sed -u 's/^ */venv.sh:   /' >&3
}

if [[ -n "${TORCH_BUILD:-}" ]]; then
  [[ "$TORCH_BUILD" == cpu || "$TORCH_BUILD" == cuda ]] || die "TORCH_BUILD=$TORCH_BUILD: use cpu or cuda"
  build=$TORCH_BUILD
elif [[ -e /proc/driver/nvidia ]] || nvidia-smi -L >/dev/null 2>&1; then
  build=cuda
else
  build=cpu
fi
if [[ "$build" == cuda ]]; then
  EXTRAS+=,gpu  # liger-kernel's fused loss (rankzero/train/losses.py): Triton kernels, CUDA only
fi
spec=torch==$TORCH_VERSION
index=${TORCH_INDEX_URL:-}
if [[ "$build" == cpu && "$(uname -s)" != Darwin ]]; then
  # PyPI's Linux torch is the CUDA build: with the +cpu label pinned, a CPU build that cannot be
  # found is an error rather than a multi-GB download. (macOS wheels are CPU builds, unlabelled.)
  spec+=+cpu
  index=${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}
fi

mkdir -p "$VENV"
if command -v flock >/dev/null 2>&1; then  # two launches at once (several nodes, one checkout) set up once
  exec 9<"$VENV"  # the directory itself: `venv --clear` empties it but keeps it
  flock 9
fi

if [[ ! -x "$VENV/bin/python" ]]; then
  PYTHON=${PYTHON:-python3}
  command -v "$PYTHON" >/dev/null 2>&1 || die "no $PYTHON on PATH: install Python >= 3.10, or set PYTHON=/path/to/python3"
  "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
    || die "rankzero needs Python >= 3.10 and $PYTHON is $("$PYTHON" -V 2>&1): set PYTHON=/path/to/python3.10-or-newer"
  say "creating .venv with $("$PYTHON" -c 'import sys; print(sys.executable, sys.version.split()[0])')"
  # --clear: a venv whose interpreter went away (an upgraded or removed Python) is rebuilt from scratch
  "$PYTHON" -m venv --clear "$VENV" >&2 \
    || { rm -rf "$VENV"; die "$PYTHON -m venv failed (Debian/Ubuntu: apt install python3-venv)"; }
fi

torch_key="$spec $build ${index:-pypi}"
if [[ "$(cat "$VENV/.rankzero-torch" 2>/dev/null)" != "$torch_key" ]]; then
  say "installing $spec, the $build build"
  rm -f "$VENV/.rankzero-torch"
  venv_pip uninstall --yes torch  # another build or version; a no-op in a new .venv
  # First the build pip finds by itself (a wheelhouse in PIP_FIND_LINKS or pip.conf, a mirror), so that
  # an index it cannot reach is never asked; then the index.
  if ! { [[ "$spec" == *+cpu ]] && venv_pip_install "$spec" 2>/dev/null; }; then
    venv_pip_install "$spec" ${index:+--extra-index-url "$index"} \
      || die "could not install $spec${index:+ from $index}: set TORCH_INDEX_URL to an index that has it, or TORCH_VERSION"
  fi
  got=$("$VENV/bin/python" -W ignore -c 'import torch; print(torch.__version__, "cuda" if torch.version.cuda else "cpu")')
  version=${got%% *}
  [[ "${version%%+*}" == "$TORCH_VERSION" && "${got##* }" == "$build" ]] \
    || die "pip installed torch $version, a ${got##* } build, not the $build build of $TORCH_VERSION: set TORCH_INDEX_URL (https://download.pytorch.org/whl/cpu, …/cu128) or TORCH_BUILD"
  echo "$torch_key" >"$VENV/.rankzero-torch"
  changed=1
fi

project_key="$build $(cat "$HERE/pyproject.toml" "$HERE/setup.py" "$HERE"/rankzero/data/native/*.[ch] \
  "$HERE/rankzero/data/native/constants.py" "${BASH_SOURCE[0]}" | cksum)"
if [[ "$(cat "$VENV/.rankzero-project" 2>/dev/null)" != "$project_key" ]]; then
  say "installing rankzero (editable) and its extras [$EXTRAS]"
  rm -f "$VENV/.rankzero-project"
  # Constrained to the torch above: a dependency asking for another would otherwise fetch PyPI's build.
  venv_pip_install --constraint <(echo "$spec") -e "$HERE[$EXTRAS]"
  echo "$project_key" >"$VENV/.rankzero-project"
  changed=1
fi
if [[ -n "${changed:-}" ]]; then
  say "ready in ${SECONDS} s: $("$VENV/bin/python" -c 'from importlib.metadata import version as v
print(", ".join(f"{name} {v(name)}" for name in ("torch", "transformers", "datasets", "tokenizers")))')"
fi

exec 9>&-  # the lock guards the set-up, not the command
if (( $# == 0 )); then
  say ".venv is up to date: ./venv.sh COMMAND runs a command in it, or \`source .venv/bin/activate\`"
  exit 0
fi
export VIRTUAL_ENV=$VENV PATH=$VENV/bin:$PATH PYTHON=$VENV/bin/python
unset PYTHONHOME
exec "$@"
