"""The flags of `transformers.TrainingArguments`, known without importing transformers.

    options = training_options()      # {"--learning_rate": ("learning_rate", "value"), "--bf16": ("bf16", "bool"), ...}

The parser (args.py) must tell a mistyped flag from a Trainer flag before torch is imported: importing
transformers costs ~1.5 s of CPU (30 s on a busy node), more than the answer is worth. So the field
names and kinds are read from the source of `transformers/training_args.py` with `ast` (~30 ms), and
the options are spelled as HfArgumentParser spells them: `--name`, `--name-with-dashes`, `--no_name`
for a boolean that defaults to True, a boolean's value optional, a `list[...]` field taking several
values. tests/test_args.py checks this table against HfArgumentParser's own, so a transformers release
that changes the class fails a test, not a run; where the source cannot be read this way the table is
built from transformers itself (slow, but right).
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
import re

BOOL, LIST, VALUE = "bool", "list", "value"  # a value that may be left out, several values, one value
NEGATIVE_NUMBER = re.compile(r"-\d|-\.\d")  # a value on a command line, not a flag


@functools.cache
def training_options() -> dict[str, tuple[str, str]]:
    """Option string → (field name, kind) for every TrainingArguments flag HfArgumentParser accepts."""
    try:
        fields = _fields_from_source()
    except (OSError, SyntaxError, StopIteration, AttributeError, ValueError):
        fields = _fields_from_transformers()
    options = {}
    for name, kind, default_true in fields:
        for option in {f"--{name}", f"--{name.replace('_', '-')}"}:
            options[option] = (name, kind)
        if kind == BOOL and default_true:
            options[f"--no_{name}"] = options[f"--no-{name.replace('_', '-')}"] = (name, BOOL)
    return options


def _fields_from_source() -> list[tuple[str, str, bool]]:
    spec = importlib.util.find_spec("transformers")
    if spec is None or spec.origin is None:
        raise ValueError("transformers is not installed")
    path = os.path.join(os.path.dirname(spec.origin), "training_args.py")
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    cls = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "TrainingArguments")
    fields = []
    for node in cls.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        keywords = {k.arg: k.value for k in node.value.keywords} if isinstance(node.value, ast.Call) else {}
        if isinstance(keywords.get("init"), ast.Constant) and keywords["init"].value is False:
            continue  # not a constructor argument, so not a flag
        default = keywords.get("default", node.value if not isinstance(node.value, ast.Call) else None)
        default_value = default.value if isinstance(default, ast.Constant) else ...
        kind = _kind(node.annotation)
        if kind == BOOL and default_value is None and _members(node.annotation) != ["bool"]:
            kind = VALUE  # `bool | None = None`: HfArgumentParser wants `--flag true|false`
        metadata = keywords.get("metadata")
        if isinstance(metadata, ast.Dict):  # an explicit nargs wins over the type ("fsdp": "?")
            for key, value in zip(metadata.keys, metadata.values):
                if isinstance(key, ast.Constant) and key.value == "nargs" and isinstance(value, ast.Constant):
                    kind = {"?": BOOL, "+": LIST, "*": LIST}.get(value.value, kind)
        fields.append((node.target.id, kind, default_value is True))
    if len(fields) < 50:  # not the class we know: read it the slow way
        raise ValueError("unexpected TrainingArguments source")
    return fields


def _kind(annotation: ast.expr) -> str:
    """HfArgumentParser's reading of a field type (hf_argparser.py `_parse_dataclass_field`), on its source text:
    a Union keeps one member (the non-str one; with None, the non-None one), then bool → optional value,
    list → several values, anything else → one value."""
    members = _members(annotation)
    if len(members) > 1:
        if "None" not in members:
            members = [members[0] if members[1] == "str" else members[1]]
        elif "bool" not in members:
            members = [members[0] if members[1] == "None" else members[1]]
        else:
            members = ["bool"]
    kind = members[0]
    if kind == "bool":
        return BOOL
    return LIST if kind.startswith(("list[", "List[")) else VALUE


def _members(annotation: ast.expr) -> list[str]:
    """The members of a union annotation as source text (`int | None` → ["int", "None"])."""
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return _members(annotation.left) + _members(annotation.right)
    if isinstance(annotation, ast.Subscript) and ast.unparse(annotation.value) in ("Optional", "typing.Optional"):
        return [ast.unparse(annotation.slice), "None"]
    if isinstance(annotation, ast.Subscript) and ast.unparse(annotation.value) in ("Union", "typing.Union"):
        elements = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
        return [ast.unparse(element) for element in elements]
    return [ast.unparse(annotation)]


def _fields_from_transformers() -> list[tuple[str, str, bool]]:
    import dataclasses

    from transformers import HfArgumentParser, TrainingArguments

    actions = HfArgumentParser(TrainingArguments)._option_string_actions
    fields = []
    for field in dataclasses.fields(TrainingArguments):
        if not field.init:
            continue
        action = actions[f"--{field.name}"]
        kind = BOOL if action.nargs == "?" else LIST if action.nargs == "+" else VALUE
        fields.append((field.name, kind, f"--no_{field.name}" in actions))
    return fields
