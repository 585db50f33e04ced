"""Run train.py under tcmalloc (or mimalloc, jemalloc) instead of glibc malloc, when one is installed.

The Rust tokenizer makes several small heap allocations per word (normalized strings, their alignment
tables, BPE words) and frees them at once, from every Rayon thread; glibc malloc is slow at that.
Under tcmalloc or mimalloc the same encode takes markedly less time and gives the same ids. Training on
the CPU is where they differ: tcmalloc keeps freed activation-sized blocks for the next step, while
glibc, mimalloc and jemalloc hand them back to the kernel and fault them in again (several times the
page faults per run), so tcmalloc comes first. The figures, re-measured: bench/RESULTS.md (issue 2 and
issue 10) and bench/train_bench.py --mallocs.

A malloc can only replace glibc's from a process's first allocation, through LD_PRELOAD, so
`train.py` re-executes itself once with the library preloaded before it imports anything heavy —
what PyTorch's CPU performance guide and Intel's PyTorch launcher do for jemalloc and tcmalloc.
Nothing is installed from Python: no maintained wheel ships one of these libraries, so this module
looks for a system or conda copy (`apt install libtcmalloc-minimal4`, `conda install -c conda-forge gperftools`).

    RANKZERO_MALLOC=auto       the first found of tcmalloc, mimalloc, jemalloc; glibc when none (default)
    RANKZERO_MALLOC=tcmalloc   that one, or an error saying how to install it (also mimalloc, jemalloc)
    RANKZERO_MALLOC=system     glibc malloc, no re-exec
    RANKZERO_MALLOC=/path/lib.so   that library

    release_free_memory()      hand the pages freed blocks sit on back to the kernel (between the prepare's phases)

Standard library only (rankzero.errors is too): this runs before anything heavy is imported.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

from rankzero.errors import RankzeroError

ENV = "RANKZERO_MALLOC"
_REEXEC_MARK = "RANKZERO_MALLOC_REEXEC"

# Preferred first (bench/RESULTS.md): tcmalloc ≈ mimalloc on the prepare and faster than both glibc
# and mimalloc on CPU training (it keeps freed blocks: far fewer page faults); jemalloc trails on both.
LIBRARIES = {
    "tcmalloc": ("libtcmalloc_minimal.so.4", "libtcmalloc.so.4", "libtcmalloc_minimal.so", "libtcmalloc.so"),
    "mimalloc": ("libmimalloc.so.2", "libmimalloc.so"),
    "jemalloc": ("libjemalloc.so.2", "libjemalloc.so"),
}
INSTALL_HINT = ("install one: `apt install libtcmalloc-minimal4` (Debian/Ubuntu), `dnf install gperftools-libs` "
                "(Fedora/RHEL), or `conda install -c conda-forge gperftools`")


class MallocError(RankzeroError):
    """RANKZERO_MALLOC names a library that is not there."""


def search_dirs() -> list[Path]:
    """Where the dynamic loader and conda put shared libraries, most specific first."""
    dirs = [entry for entry in os.environ.get("LD_LIBRARY_PATH", "").split(":") if entry]
    for prefix in (os.environ.get("CONDA_PREFIX"), sys.prefix, "/usr/local"):
        if prefix:
            dirs.append(os.path.join(prefix, "lib"))
    multiarch = sysconfig.get_config_var("MULTIARCH")
    for root in ("/usr/lib", "/lib"):
        if multiarch:
            dirs.append(f"{root}/{multiarch}")
        dirs += [f"{root}64", root]
    unique: dict[str, None] = dict.fromkeys(os.path.normpath(entry) for entry in dirs)
    return [Path(entry) for entry in unique]


def find(name: str, dirs: list[Path] | None = None) -> Path | None:
    """The first file of the named malloc in `dirs` (default: `search_dirs()`), or None."""
    for directory in dirs if dirs is not None else search_dirs():
        for filename in LIBRARIES[name]:
            candidate = directory / filename
            if candidate.is_file():
                return candidate
    return None


def resolve(choice: str, dirs: list[Path] | None = None) -> Path | None:
    """The library RANKZERO_MALLOC=`choice` asks for: a path, or None for glibc. Raises MallocError."""
    choice = choice.strip() or "auto"
    if choice == "system":
        return None
    if choice == "auto":
        for name in LIBRARIES:
            found = find(name, dirs)
            if found:
                return found
        return None
    if choice in LIBRARIES:
        found = find(choice, dirs)
        if found is None:
            raise MallocError(f"{ENV}={choice}: {choice} not found in {', '.join(map(str, dirs or search_dirs()))}; "
                              f"{INSTALL_HINT}, or set {ENV}=auto")
        return found
    path = Path(choice)
    if "/" in choice:
        if not path.is_file():
            raise MallocError(f"{ENV}={choice}: no such file")
        return path
    raise MallocError(f"{ENV}={choice}: expected auto, system, {', '.join(LIBRARIES)} or a path to a .so")


def name_of(path: str) -> str | None:
    """'tcmalloc' for '/usr/lib/.../libtcmalloc_minimal.so.4', and so on; None for any other library."""
    base = os.path.basename(path)
    return next((name for name in LIBRARIES if base.startswith(f"lib{name}")), None)


def preloaded(ld_preload: str | None = None) -> str | None:
    """The malloc named in LD_PRELOAD (tcmalloc, mimalloc, jemalloc), or None."""
    entries = (ld_preload if ld_preload is not None else os.environ.get("LD_PRELOAD", "")).replace(":", " ").split()
    return next(filter(None, map(name_of, entries)), None)


def active() -> str:
    """What serves malloc in this process: 'tcmalloc (/usr/lib/.../libtcmalloc_minimal.so.4)' or 'glibc'."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                path = "/" + line.rstrip("\n").partition("/")[2]
                name = name_of(path)
                if name:
                    return f"{name} ({path})"
    except OSError:
        pass
    return "glibc" if sys.platform == "linux" else "system"


def reexec_preloaded() -> None:
    """Re-execute this interpreter with the chosen malloc in LD_PRELOAD; return if there is nothing to do.

    Call it first thing in a `__main__` block: the process is replaced (same pid, so torchrun and
    schedulers keep tracking it), and anything done before is done twice. Returns without re-executing
    on a platform other than Linux, with RANKZERO_MALLOC=system, when a malloc is already preloaded, when
    none is installed (auto), or after the one re-exec. Raises MallocError for a library asked for by
    name or path that is not there.
    """
    if os.environ.pop(_REEXEC_MARK, None) is not None or sys.platform != "linux":
        return
    if preloaded() is not None:
        return
    library = resolve(os.environ.get(ENV, "auto"))
    if library is None:
        return
    environ = dict(os.environ)
    environ["LD_PRELOAD"] = " ".join(filter(None, [str(library), environ.get("LD_PRELOAD", "")]))
    environ[_REEXEC_MARK] = "1"
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], environ)
    except OSError as error:  # exec refused (noexec mount, seccomp): run on as we are
        print(f"warning: could not re-execute under {library}: {error}; running with glibc malloc",
              file=sys.stderr, flush=True)


def release_free_memory() -> str | None:
    """Return the free pages the process's malloc holds to the kernel; the call made, or None where none is known.

    A malloc keeps the pages of freed blocks for later allocations (tcmalloc's page heap, glibc's arenas),
    which only its own callers can reuse: after the near-dedup decision has freed arrays of a size that grows
    with the corpus (the band keys, ~330 bytes a document), tcmalloc held ~100 MB of free pages at 200 MiB
    while Arrow's own allocator (mimalloc, bundled in pyarrow) took fresh pages for the shuffle on top, the
    peak of the prepare. Costs one pass over the malloc's free lists (milliseconds)."""
    import ctypes  # here, not at the top: train.py imports this module first thing in every process

    # Each malloc's call that returns its free pages to the kernel, first found first: a preloaded malloc's symbol
    # comes before glibc's malloc_trim, which every glibc process has.
    calls = (("MallocExtension_ReleaseFreeMemory", ()),  # tcmalloc (gperftools' C API)
             ("mi_collect", (ctypes.c_bool(True),)),  # mimalloc: collect, force
             ("malloc_trim", (ctypes.c_size_t(0),)))  # glibc
    try:
        process = ctypes.CDLL(None)
    except OSError:
        return None
    if hasattr(process, "mallctl"):  # jemalloc: left to its decay; glibc's malloc_trim would be a no-op here
        return None
    for symbol, arguments in calls:
        function = getattr(process, symbol, None)
        if function is not None:
            function(*arguments)
            return symbol
    return None
