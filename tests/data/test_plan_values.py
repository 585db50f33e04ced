"""The Plan goes no further than the handoff, the pipeline and the top of each engine: every other part of
rankzero/data takes the settings it uses (plan.py's `Reading`, `Output`, `Corpus`, `ManifestSettings`, and the
`StageSpec` the plan builds), so a reader of a module sees in its signatures what it depends on."""

from __future__ import annotations

import ast
import dataclasses

from helpers import REPO, data_args, plan_of

# file → the functions there that take the Plan (every function of the file: "*")
TAKE_THE_PLAN = {
    "rankzero/data/handoff.py": "*",
    "rankzero/data/pipeline.py": {"build_dataset"},
    "rankzero/data/engines/local.py": {"build_local"},
    "rankzero/data/engines/ray_engine.py": {"build_ray"},
}


def _takes_the_plan(argument: ast.arg) -> bool:
    annotation = ast.unparse(argument.annotation).strip("'\"") if argument.annotation else ""
    return argument.arg == "plan" or annotation == "Plan"


def test_only_the_handoff_pipeline_and_engine_tops_take_the_plan():
    found = []
    for path in sorted((REPO / "rankzero").rglob("*.py")):
        name = str(path.relative_to(REPO))
        allowed = TAKE_THE_PLAN.get(name, set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                if any(_takes_the_plan(argument) for argument in arguments) and allowed != "*" \
                        and node.name not in allowed:
                    found.append(f"{name}:{node.lineno} {node.name}")
            elif isinstance(node, ast.Attribute) and node.attr == "plan" and isinstance(node.value, ast.Name) \
                    and node.value.id == "self":
                found.append(f"{name}:{node.lineno} keeps self.plan")
    assert not found, "these take or keep the Plan; give them the plan's settings they use:\n" + "\n".join(found)


def test_the_narrow_values_hold_no_plan(tmp_path, tokenizer_dir):
    """What the plan hands on holds settings and sources, never the Plan or its configs whole (but the packing
    config, which is all packing settings)."""
    from rankzero.config import DedupConfig, SourcesConfig, StageConfig, WorkersConfig
    from rankzero.data.plan import Plan

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"text": "안녕하세요. 오늘은 날씨가 좋습니다."}\n' * 3, encoding="utf-8")
    plan = plan_of(data_args(tokenizer_dir, tmp_path / "cache", [corpus],
                             validation_split_percentage=10), seed=0)
    wide = (Plan, SourcesConfig, StageConfig, DedupConfig, WorkersConfig)
    for value in (plan.reading(), plan.output(), plan.corpus(), plan.manifest_settings()):
        for field in dataclasses.fields(value):
            assert not isinstance(getattr(value, field.name), wide), (type(value).__name__, field.name)
    assert plan.output().validation and plan.corpus().validation_flags == "--validation_split_percentage 10"
    assert plan.corpus().manifest == plan.manifest_settings()


def test_both_engines_start_from_one_call():
    """The start-up both engines share (the tokenizer-engine check, the held-out documents' file, the stage) is made
    in one place, `Plan.start`: neither engine makes a step of it itself."""
    shared = {"choose_engine", "select_engine", "write_evaluation", "stage_spec"}
    for name in ("local.py", "ray_engine.py"):
        tree = ast.parse((REPO / "rankzero/data/engines" / name).read_text())
        called = {node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
                  for node in ast.walk(tree) if isinstance(node, ast.Call)}
        assert "start" in called and not called & shared, (name, sorted(called & shared))
