"""The house's layers, checked from its imports (module-level and inside functions alike).

A module may import from its own layer or a lower one, never from a higher one, and the imports form
no cycle. docs/design.md ("Layers") describes the same table.
"""

from __future__ import annotations

import ast
import fnmatch

from helpers import REPO

LAYERS = [  # lowest first
    ("base", ["errors", "runtime", "files", "malloc", "logging_utils", "config", "trainer_flags", "strict_yaml"]),
    ("data: native passes", ["data", "data.native", "data.native.*"]),
    ("data: inputs", ["data.inputs", "data.inputs.*"]),
    ("data: judges", ["data.quality", "data.quality.*", "data.screen", "data.screen.*", "data.dedup", "data.dedup.*",
                      "data.split", "data.space"]),
    ("data: tokens and rows", ["data.fastokens_ahead", "data.encode", "data.pack", "data.shards", "data.mixing",
                               "tokenizer_trainer"]),
    ("data: the stage and its plan", ["data.stage", "data.plan", "data.published"]),
    ("data: engines", ["data.engines", "data.engines.*", "data.pipeline"]),
    ("data: the handoff", ["data.heartbeat", "data.handoff", "data.report"]),
    ("training: checkpoints for resume", ["train.checkpoints", "train.checkpoints.*"]),
    ("training", ["train", "train.*", "recipe"]),
    ("command line", ["checks", "args"]),
]


def layer_of(module: str) -> int:
    name = module.removeprefix("rankzero.")
    for index, (_, patterns) in enumerate(LAYERS):
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns):
            return index
    raise AssertionError(f"rankzero.{name} is in no layer: add it to LAYERS here and to docs/design.md")


def imports() -> dict[str, set[str]]:
    """module → the rankzero modules it imports (anywhere in its body)."""
    graph = {}
    for path in sorted((REPO / "rankzero").rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rankzero"):
                for alias in node.names:  # `from package import submodule` imports the submodule
                    submodule = f"{node.module}.{alias.name}"
                    found.add(submodule if (REPO / submodule.replace(".", "/")).with_suffix(".py").exists()
                              else node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names if alias.name.startswith("rankzero"))
        graph[module] = found - {module, "rankzero"}
    return graph


def test_every_import_goes_to_the_same_or_a_lower_layer():
    upward = [f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
              for module, targets in imports().items() for target in sorted(targets)
              if layer_of(target) > layer_of(module)]
    assert not upward, "imports against the layers:\n" + "\n".join(upward)


def test_the_imports_have_no_cycle():
    graph = imports()
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                raise AssertionError("import cycle: " + " → ".join(path[path.index(target):] + [target]))
            if target in graph and state.get(target) is None:
                visit(target, path + [target])
        state[module] = 2

    for module in graph:
        if module not in state:
            visit(module, [module])
