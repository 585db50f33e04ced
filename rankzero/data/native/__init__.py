"""The compiled passes (passes.c), built into the extension module `_passes` when rankzero is installed, and the
choice between them and their numpy references.

    @native.or_reference(scan_reference)     # the pass below where the extension is built, else scan_reference
    def scan(codes, offsets, ...):
        native.passes().scan(...)             # the extension (an error saying why where there is none)
    native.missing()                          # why the numpy references run (None: the extension does): the summary's
    codes, offsets = native.code_points(texts)

Near dedup's word hashing (dedup/kernel.py) and decontamination's scan (screen/scan.py) are one loop per character
each. They were numba kernels; numba's start — its import, then its target's registries at the first call of
cached machine code — cost ~0.35 CPU-s and ~90 MB of llvmlite in every process that used one, which near dedup
could only afford past 40 M characters and --decontaminate paid on every prepare (bench/RESULTS.md, issues 30 and
32). The same loops in C load in under a millisecond, so every process uses them from its first character.

`pip install` builds them (setup.py: an optional setuptools Extension), as numpy's and rankzero's other dependencies
build theirs: nothing is compiled or written while rankzero runs, and the compiler checks every call into passes.c
against its declaration (module.c, passes.h); module.c checks each array's type and length at the call. Where no C
compiler worked at install (a slim container), the import fails and the callers' numpy references run
(dedup/shingles.py, screen/reference.py): they define the same numbers and are what the tests compare the
extension against. A prepare says so once, in its summary (report.py), never per process. RANKZERO_PASSES=numpy
runs the references where the extension is built (the tests and bench/kernels_bench.py compare the two). The
extension releases the GIL for each call: the stage's encode threads keep running meanwhile.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np

from rankzero.data.native import constants

HERE = Path(__file__).parent
SWITCH = "RANKZERO_PASSES"  # "numpy": the references, even where the extension is built


def extension() -> ModuleType | None:
    """The built passes, or None: not built (no C compiler at install), built from other sources, or turned off."""
    choice = os.environ.get(SWITCH, "")
    if choice not in ("", "compiled", "numpy"):
        raise ValueError(f"{SWITCH}={choice}: use compiled (the default, where the extension is built) or numpy")
    return None if choice == "numpy" else _built()[0]


def passes() -> ModuleType:
    """The extension, for the compiled side of an or_reference pair (and the tests that call it directly)."""
    module = extension()
    if module is None:
        raise RuntimeError(f"the compiled passes are not here: {missing() or f'{SWITCH}=numpy'}")
    return module


def missing() -> str | None:
    """Why the numpy references run in place of the extension, in words for a user; None where it runs (or where
    RANKZERO_PASSES=numpy asked for them)."""
    return None if os.environ.get(SWITCH) == "numpy" else _built()[1]


def or_reference(reference: Callable) -> Callable[[Callable], Callable]:
    """Decorates a function that calls the extension: called where it is built, `reference` (the same numbers in
    numpy, same arguments) called where it is not. Callers call the decorated function and never ask which ran; the
    two stay reachable as its `.compiled` and `.reference` (read at each call: a test may count the reference's)."""
    def decorate(compiled: Callable) -> Callable:
        @functools.wraps(compiled)
        def choose(*args, **kwargs):
            return (choose.reference if extension() is None else choose.compiled)(*args, **kwargs)
        choose.compiled, choose.reference = compiled, reference
        return choose
    return decorate


@functools.lru_cache(maxsize=1)
def _built() -> tuple[ModuleType | None, str | None]:
    try:
        module = importlib.import_module("rankzero.data.native._passes")
    except ImportError as error:
        return None, (f"the extension rankzero.data.native._passes is not built ({error}): the install found no "
                      "working C compiler. Install one (apt-get install gcc python3-dev) and reinstall rankzero "
                      "(./venv.sh after `rm .venv/.rankzero-project`, or pip install -e .)")
    expected = {name: int(getattr(constants, name)) for name in constants.C_CONSTANTS}
    digest = source_digest()
    if module.CONSTANTS != expected or digest not in (module.SOURCE_DIGEST, None):
        return None, (f"the extension {module.__file__} was built from other sources than rankzero/data/native/ "
                      "holds now (edited since the install): rebuild it (./venv.sh does when it next runs; or pip "
                      "install -e ., or python setup.py build_ext --inplace in a checkout)")
    return module, None


def source_digest() -> str | None:
    """sha256 of the C sources beside this module, as setup.py computes it for the build (None where an installation
    left them out): an editable install whose C was edited since is refused, not run."""
    digest, sources = hashlib.sha256(), sorted(HERE.glob("*.[ch]"))
    for source in sources:
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    return digest.hexdigest() if sources else None


def code_points(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(uint32 code points of all texts back to back, int64 offsets: text i is codes[offsets[i]:offsets[i+1]])."""
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), out=offsets[1:])
    codes = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    return codes, offsets
