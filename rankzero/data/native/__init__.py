"""The compiled passes (passes.c): built by the system's C compiler at a process's first use, once per installation.

    passes = native.library()     # ctypes functions of passes.c, or None where no C compiler works (then numpy)

Near dedup's word hashing (dedup/kernel.py) and decontamination's scan (scan.py) are one loop per character
each. They were numba kernels; numba's start — its import, then its target's registries at the first call of
cached machine code — cost ~0.35 CPU-s and ~90 MB of llvmlite in every process that used one, which near dedup
could only afford past 40 M characters and --decontaminate paid on every prepare (bench/RESULTS.md, issues 30 and
32). The same loops in C load in under a millisecond, so every process uses them from its first character.

The library is built the way torch's inductor and triton build theirs: at first use, with `$CC` (default `cc`),
into a cache directory (table_cache.cache_directory: RANKZERO_KERNEL_CACHE, else `__pycache__` beside this
module, else the user's cache), under a name that holds a hash of everything that decides the machine code — the
source, the constants put in front of it, the flags, the platform, the pointer size, the C library — so an edited
source or another machine never loads a stale build.
The build goes to a temporary file renamed into place: ranks and Ray workers building at once never load half a
file, and a later process removes the temporary file of a build killed before its rename (one unchanged for twice
the compile timeout, by this machine's clock: on a cache shared across machines whose clocks differ by more, a build
in progress may lose its file, and then builds again). The build's xxh3-128 is written beside it first
(table_cache.record_digest) and checked before every load: a library cut short (which the loader maps and dies on,
SIGBUS) or replaced by another (which fails on its first missing symbol) is built again after one warning. Where no
cache directory is writable it is built per process in a temporary directory. Where no compiler works (a slim
container), `library()` returns None after one warning and the callers run their numpy references
(dedup/shingles.py, reference.py), which define the same numbers and are what the tests compare this
library against. ctypes releases the GIL for each call: the stage's encode threads keep running meanwhile.
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import os
import platform
import re
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np
import xxhash

from rankzero.data.native import hashing
from rankzero.data.native.table_cache import cache_directory, record_digest, recorded_digest
from rankzero.files import remove_dead_temporaries

logger = logging.getLogger(__name__)
_LOCK = threading.Lock()

SOURCE = Path(__file__).with_name("passes.c")
FLAGS = ("-O3", "-std=c99", "-shared", "-fPIC")  # no -march=native: a cache on a shared disk serves other CPUs too
COMPILE_TIMEOUT_S = 300
# ANSI/VT escape sequences and the other C0 controls but tab and newline, as a compiler's coloured stderr holds them
_TERMINAL_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]|[\x00-\x08\x0b-\x1f\x7f]")

_I64, _U8 = ctypes.c_int64, np.ctypeslib.ndpointer(np.uint8, flags="C")
_U32, _U64 = np.ctypeslib.ndpointer(np.uint32, flags="C"), np.ctypeslib.ndpointer(np.uint64, flags="C")
_I64P = np.ctypeslib.ndpointer(np.int64, flags="C")
# Argument types of each function of passes.c: ctypes checks every array's dtype and layout at the call.
SIGNATURES = {
    "word_hashes": (_I64, [_U32, _I64P, _I64, _U32, _U32, _I64, _U32, _I64, _U32, _U64, _I64, _I64P]),
    "shingle_hashes": (None, [_U64, _I64P, _I64, _U64, _I64, _U64, _I64P]),
    "scan": (None, [_U32, _I64P, _I64, _U32, _U32, _U32, _I64, _U32, _I64, _I64, _I64, _I64, _U64, _I64, _U8, _U64,
                    _U64, _I64, _U64, _I64P, _U64, _I64P, _U8, _I64P, _U8, _I64P]),
}


class CompileError(RuntimeError):
    pass


@lru_cache(maxsize=1)
def library() -> ctypes.CDLL | None:
    """passes.c, compiled and loaded, its functions typed; None (after one warning) where it cannot be built. The
    stage's encode threads may ask at once: the lock lets one build while the others wait, then load its build."""
    with _LOCK:
        return _load()


def _load() -> ctypes.CDLL | None:
    try:
        try:
            handle = ctypes.CDLL(str(build()))
        except OSError:  # a cached file that is no library (a failed copy, another platform's build): built again
            handle = ctypes.CDLL(str(build(rebuild=True)))
    except (CompileError, OSError, ValueError) as error:
        logger.warning("rankzero: the compiled passes are unavailable (%s), so `--dedup near`, `--decontaminate` and "
                       "`--pii mask` run their numpy versions, several times slower. Install a C compiler (apt-get "
                       "install gcc libc6-dev, or set CC) or point RANKZERO_KERNEL_CACHE at a disk that allows "
                       "running code.", error)
        return None
    for name, (result, arguments) in SIGNATURES.items():
        function = getattr(handle, name)
        function.restype, function.argtypes = result, arguments
    return handle


def build(directory: Path | None = None, rebuild: bool = False) -> Path:
    """The shared library's path, compiled first unless this installation's cache holds it (or `rebuild`)."""
    source = full_source()
    compiler = shlex.split(os.environ.get("CC") or "cc")  # CC="ccache gcc" as make reads it
    # Not the compiler: any C99 compiler gives these loops the same meaning, and a cached build needs none. The C
    # library and the pointer size do decide whether a build loads (a cache on a disk shared by other machines).
    machine = [sys.platform, platform.machine(), str(struct.calcsize("P")), _libc()]
    key = xxhash.xxh3_64_hexdigest("\0".join([source, *FLAGS, *machine]).encode())
    directory = directory or cache_directory(__file__)
    if directory is None:  # nowhere to keep it: this process's own build, removed with the process
        directory = Path(tempfile.mkdtemp(prefix="rankzero-passes-"))
        atexit.register(shutil.rmtree, directory, True)
    path = directory / f"passes-{key}.so"
    # A build killed before its rename leaves `.passes-*` files; a compile writes them for at most COMPILE_TIMEOUT_S.
    remove_dead_temporaries(directory, ".passes-*", 2 * COMPILE_TIMEOUT_S)
    if not rebuild and _verified(path):
        return path
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".passes-", suffix=".so")
    os.close(handle)
    try:
        try:
            done = subprocess.run([*compiler, *FLAGS, "-x", "c", "-", "-o", temporary], input=source.encode(),
                                  capture_output=True, timeout=COMPILE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise CompileError(f"{shlex.join(compiler)}: {error}") from None
        if done.returncode != 0:
            # A compiler told to colour (CC="gcc -fdiagnostics-color=always") writes terminal escapes: not for a log
            stderr = _TERMINAL_CONTROL.sub("", done.stderr.decode(errors="replace")).strip()
            raise CompileError(f"{shlex.join(compiler)} exited {done.returncode}: {stderr[-500:]}")
        os.chmod(temporary, 0o755)  # mkstemp's 0600 would keep it from the installation's other users
        record_digest(path, xxhash.xxh3_128_hexdigest(Path(temporary).read_bytes()))
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return path


def _verified(path: Path) -> bool:
    """Whether the cached library is, byte for byte, the one built there. A file cut short behind a whole ELF header
    kills the process that maps it (SIGBUS, no message) and another library under the name fails on its first
    missing symbol, so its bytes are hashed before they are loaded; a mismatch warns and builds again."""
    try:
        content = path.read_bytes()
    except OSError:  # absent: the first build here
        return False
    expected = recorded_digest(path)
    if expected == xxhash.xxh3_128_hexdigest(content):
        return True
    if expected is not None:  # none: an older installation's build, or one whose writer died between its renames
        logger.warning("rankzero: the cached compiled passes %s are not the library built there (%s bytes that differ "
                       "from its digest: cut short or replaced), so they are built again", path, f"{len(content):,}")
    return False


def full_source() -> str:
    """passes.c behind a #define of each constant it reads, from its Python definition (hashing.C_CONSTANTS)."""
    defines = []
    for name in hashing.C_CONSTANTS:
        value = int(getattr(hashing, name))
        defines.append(f"#define {name} {value}{'ULL' if value > 0x7FFFFFFF else ''}\n")
    return "".join(defines) + SOURCE.read_text(encoding="utf-8")


def _libc() -> str:
    """glibc's version where that is the C library (os.confstr knows no other)."""
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        return ""


def code_points(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(uint32 code points of all texts back to back, int64 offsets: text i is codes[offsets[i]:offsets[i+1]])."""
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), out=offsets[1:])
    codes = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    return codes, offsets
