"""venv.sh, the set-up behind the README's two commands, and .ci/run, which must run the second.

The set-up logic runs for real against a virtual environment whose `pip` and `torch` are stand-ins:
pip logs its arguments and "installs" a torch module that reports the version and build it was asked
for. That keeps these tests offline and under a few seconds; the real installation is what CI runs
(`.ci/run` is the README's second command on a clean clone).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

FAKE_PIP = '''
import json, os, shutil, sys
from pathlib import Path

site = Path(__file__).resolve().parents[1]
options = ("-qq", "--disable-pip-version-check", "--no-input", "--progress-bar", "off")
args = [a for a in sys.argv[1:] if a not in options]
with open(os.environ["FAKE_PIP_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
if args and args[0] == "install" and "-qq" not in sys.argv:  # what pip says at its usual verbosity
    print("Looking in indexes: https://pypi.org/simple")
    print("Collecting " + " ".join(a for a in args[1:] if not a.startswith("-")))
    print("  Downloading some_wheel-1.0-py3-none-any.whl (12 kB)")
    print("WARNING: an unreachable extra index", file=sys.stderr)
if args and args[0] == "uninstall":
    shutil.rmtree(site / "torch", ignore_errors=True)
    sys.exit(0)
spec = next((a for a in args if a.startswith("torch==")), None)
if spec is None:
    sys.exit(0)  # the editable install of the project
if spec.endswith("+cpu") and "--extra-index-url" not in args and not os.environ.get("FAKE_PIP_WHEELHOUSE"):
    sys.exit(1)  # PyPI has no +cpu build
cuda = None if spec.endswith("+cpu") or os.environ.get("FAKE_PIP_ONLY_CPU") else "12.8"
(site / "torch").mkdir()
(site / "torch" / "__init__.py").write_text(
    f"__version__ = {spec[len('torch=='):]!r}\\nclass version:\\n    cuda = {cuda!r}\\n")
'''


@pytest.fixture
def checkout(tmp_path):
    """A copy of venv.sh and what it checksums (pyproject.toml, setup.py, the compiled passes' sources) with a .venv
    whose pip and torch are the stand-ins."""
    repo = tmp_path / "repo"
    native = Path("rankzero", "data", "native")
    (repo / native).mkdir(parents=True)
    sources = [path.relative_to(REPO) for path in (REPO / native).glob("*.[ch]")]
    for name in ("venv.sh", "pyproject.toml", "setup.py", native / "constants.py", *sources):
        shutil.copy2(REPO / name, repo / name)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", repo / ".venv"], check=True)
    site = next((repo / ".venv" / "lib").glob("python3*/site-packages"))
    (site / "pip").mkdir()
    (site / "pip" / "__init__.py").write_text("")
    (site / "pip" / "__main__.py").write_text(FAKE_PIP)
    return repo


def setup(repo: Path, *command: str, expect: int = 0, **env: str):
    """Run `venv.sh COMMAND`; return its result and the pip calls it made (options dropped)."""
    log = repo / "pip-calls.jsonl"
    log.unlink(missing_ok=True)
    environ = {**os.environ, "TORCH_BUILD": "cpu", "FAKE_PIP_LOG": str(log), **env}
    for name in ("TORCH_VERSION", "TORCH_INDEX_URL"):
        if name not in env:
            environ.pop(name, None)
    result = subprocess.run([str(repo / "venv.sh"), *command], capture_output=True, text=True, env=environ,
                            timeout=60)
    assert result.returncode == expect, result.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return result, calls


def torch_installs(calls) -> list[list[str]]:
    return [c for c in calls if c[0] == "install" and any(a.startswith("torch==") for a in c)]


def project_installs(calls) -> list[list[str]]:
    return [c for c in calls if c[0] == "install" and "-e" in c]


PREFIX = ["python", "-c", "import sys; print(sys.prefix)"]


def test_set_up_once_then_only_what_its_changed_inputs_need(checkout):
    venv = checkout / ".venv"
    result, calls = setup(checkout, *PREFIX, FAKE_PIP_WHEELHOUSE="1")
    assert torch_installs(calls) == [["install", "torch==2.13.0+cpu"]]  # found by pip alone: no index asked
    (extras,) = re.findall(r"^EXTRAS=(\S+)", (REPO / "venv.sh").read_text(), re.MULTILINE)
    assert project_installs(calls) == [["install", "--constraint", calls[-1][2], "-e", f"{checkout}[{extras}]"]]
    assert result.stdout.strip() == str(venv)  # the command ran inside .venv
    # What is being installed is named as pip goes, and nothing else of pip's output but its errors.
    assert "venv.sh:   Collecting torch==2.13.0+cpu\nvenv.sh:   Downloading some_wheel-1.0-py3-none-any.whl" in result.stderr
    assert "Looking in indexes" not in result.stderr and "WARNING" not in result.stderr

    result, calls = setup(checkout, *PREFIX)
    assert calls == [] and result.stderr == "" and result.stdout.strip() == str(venv)

    with open(checkout / "pyproject.toml", "a") as f:
        f.write("\n# a dependency changed\n")
    _, calls = setup(checkout, "true")
    assert torch_installs(calls) == [] and len(project_installs(calls)) == 1
    # An edited pass: the install builds the extension again (setup.py), else native/ refuses the stale one.
    with open(checkout / "rankzero" / "data" / "native" / "passes.c", "a") as f:
        f.write("\n/* edited */\n")
    _, calls = setup(checkout, "true")
    assert torch_installs(calls) == [] and len(project_installs(calls)) == 1

    _, calls = setup(checkout, "true", TORCH_VERSION="2.14.0", FAKE_PIP_WHEELHOUSE="1")
    assert calls[0] == ["uninstall", "--yes", "torch"]
    assert torch_installs(calls) == [["install", "torch==2.14.0+cpu"]] and project_installs(calls) == []

    setup(checkout, "python", "-c", "raise SystemExit(3)", TORCH_VERSION="2.14.0", expect=3)


def test_the_cpu_build_comes_from_pytorchs_cpu_index_when_pip_alone_cannot_find_it(checkout):
    _, calls = setup(checkout, "true")
    assert torch_installs(calls) == [
        ["install", "torch==2.13.0+cpu"],
        ["install", "torch==2.13.0+cpu", "--extra-index-url", "https://download.pytorch.org/whl/cpu"],
    ]
    _, calls = setup(checkout, "true", TORCH_INDEX_URL="https://mirror.example/cpu")
    assert torch_installs(calls)[-1] == ["install", "torch==2.13.0+cpu", "--extra-index-url", "https://mirror.example/cpu"]


def test_the_cuda_build_comes_from_pypi_and_a_cpu_build_in_its_place_is_an_error(checkout):
    result, calls = setup(checkout, "true", TORCH_BUILD="cuda", FAKE_PIP_ONLY_CPU="1", expect=1)
    assert torch_installs(calls) == [["install", "torch==2.13.0"]]
    assert "a cpu build, not the cuda build of 2.13.0" in result.stderr and "TORCH_INDEX_URL" in result.stderr
    assert not (checkout / ".venv" / ".rankzero-torch").exists()  # so the next run tries again

    _, calls = setup(checkout, "true", TORCH_BUILD="cuda")
    assert torch_installs(calls) == [["install", "torch==2.13.0"]] and len(project_installs(calls)) == 1
    assert project_installs(calls)[0][-1] == f"{checkout}[test,ray,gpu]"  # liger-kernel: a CUDA build's extra
    _, calls = setup(checkout, "true", TORCH_BUILD="cuda", TORCH_INDEX_URL="https://download.pytorch.org/whl/cu126")
    assert torch_installs(calls) == [
        ["install", "torch==2.13.0", "--extra-index-url", "https://download.pytorch.org/whl/cu126"]]


def test_every_extra_in_pyproject_is_installed():
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (line,) = re.findall(r"^EXTRAS=(\S+)", (REPO / "venv.sh").read_text(), re.MULTILINE)
    assert sorted(line.split(",") + ["gpu"]) == sorted(extras)  # gpu: with the CUDA build only (test below)


def test_readme_opens_with_two_commands_and_ci_runs_the_second():
    block = (REPO / "README.md").read_text().split("```")[1]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["./venv.sh ./pretrain.sh", "./venv.sh python -m pytest -q -n 2"]
    ci = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.lstrip().startswith("#")]
    assert ci[-1] == commands[1]
