"""The compiled passes (rankzero/data/native/passes.c) as the extension module rankzero.data.native._passes, built
by `pip install` (a wheel, or `pip install -e .` as venv.sh runs it: the module then lands beside passes.c). The rest
of the project is described in pyproject.toml.

The extension is optional: where no C compiler works (a slim container), setuptools reports the failed build and the
install goes on; rankzero then runs the numpy references of the passes (native/__init__.py), and a prepare's summary
says so once. The constants passes.c reads are written into passes_constants.h at build time from their Python
definitions (rankzero/data/native/constants.py, read without importing the package), so the two cannot disagree.
"""

import hashlib
import runpy
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

NATIVE = Path("rankzero", "data", "native")


def source_digest() -> str:
    """sha256 of the C sources, as native.source_digest() computes it at run time (module.c: _passes.SOURCE_DIGEST)."""
    digest = hashlib.sha256()
    for source in sorted(NATIVE.glob("*.[ch]")):
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()


def constants_header() -> str:
    """passes_constants.h: a #define for each name of constants.C_CONSTANTS, PASSES_CONSTANTS(X), which applies X to
    each of them (module.c makes _passes.CONSTANTS of it), and the sources' digest."""
    constants = runpy.run_path(str(NATIVE / "constants.py"))
    lines = ["/* Written by setup.py from rankzero/data/native/constants.py at build time: edit that file. */",
             "#ifndef RANKZERO_PASSES_CONSTANTS_H", "#define RANKZERO_PASSES_CONSTANTS_H"]
    for name in constants["C_CONSTANTS"]:
        value = constants[name]
        assert isinstance(value, int) and 0 <= value < 2**64, (name, value)
        # ULL only where the value needs it: a small one compares with passes.c's signed counters as it is.
        lines.append(f"#define {name} {value:#x}ULL" if value > 0x7FFFFFFF else f"#define {name} {value}")
    lines.append("#define PASSES_CONSTANTS(X) " + " ".join(f"X({name})" for name in constants["C_CONSTANTS"]))
    lines.append(f'#define PASSES_SOURCE_DIGEST "{source_digest()}"')
    lines.append("#endif")
    return "\n".join(lines) + "\n"


class BuildWithConstants(build_ext):
    """build_ext with passes_constants.h written into its temporary directory first (never into the source tree)."""

    def build_extension(self, extension):
        include = Path(self.build_temp, "include")
        include.mkdir(parents=True, exist_ok=True)
        (include / "passes_constants.h").write_text(constants_header(), encoding="utf-8")
        extension.include_dirs = [str(include), *extension.include_dirs]
        super().build_extension(extension)


setup(
    ext_modules=[Extension(
        "rankzero.data.native._passes",
        sources=[str(NATIVE / "module.c"), str(NATIVE / "passes.c")],
        depends=[str(NATIVE / "passes.h"), str(NATIVE / "constants.py")],
        include_dirs=[str(NATIVE)],
        # -O3: the passes are loops over every code point; no -march=native: a wheel runs on other CPUs too.
        extra_compile_args=["-O3", "-std=c99"],
        optional=True,
    )],
    cmdclass={"build_ext": BuildWithConstants},
)
