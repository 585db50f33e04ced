"""YAML as a person writes a recipe: plain values, no aliases, no key twice.

    data = load(handle)          # yaml.safe_load's result; RecipeYAMLError (a yaml.MarkedYAMLError) names the line

yaml.safe_load accepts two things a recipe never needs and that cost a user dearly. An alias (`*name`) repeats its
anchor's value: nine levels of ten (a "billion laughs") are a few hundred bytes of file that expand to 10^9 values
when the recipe's keys are turned into flags (50 s and 3.5 GB for one level less, then memory runs out). And a key
written twice keeps the last value without a word, so an edit further down a long recipe silently undoes another.
Both are refused at the line that holds them, before anything is built from the document.
"""

from __future__ import annotations

import yaml


class RecipeYAMLError(yaml.MarkedYAMLError):
    """An alias or a duplicate key: `problem` says which, `problem_mark` where (file name and line)."""


class _Loader(yaml.SafeLoader):
    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):  # refused before the composer resolves it to its anchor's node
            event = self.peek_event()
            raise RecipeYAMLError(problem=f"an alias (*{event.anchor}) repeats another value: aliases are not "
                                          "allowed here, write the value out", problem_mark=event.start_mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # a list or mapping as a key (safe_load refuses it), or `<<`, merged by safe_load
                key = self.construct_object(key_node)  # as the dict will hold it: `1` and `0x1` are one key, "1" another
                if key in seen:
                    raise RecipeYAMLError(problem=f"the key '{key_node.value}' is given twice (first on line "
                                                  f"{seen[key] + 1}); keep one", problem_mark=key_node.start_mark)
                seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep)


def load(stream):
    """The document in `stream` (an open file or a string) as yaml.safe_load reads it, refusing aliases and duplicate
    keys with a RecipeYAMLError at their line."""
    return yaml.load(stream, Loader=_Loader)


def where(error: yaml.YAMLError, path) -> str:
    """`path:line` of a YAML error that knows its line, else `path`."""
    mark = getattr(error, "problem_mark", None)
    return f"{path}:{mark.line + 1}" if mark is not None else str(path)
