"""YAML that remembers where every value came from, so errors can name the line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ci.errors import StackError

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Source:
    """A parsed YAML document and the 1-based line of every key path in it."""

    path: Path
    data: Any
    lines: dict[Loc, int]

    def line(self, loc: Loc) -> int | None:
        """The line of `loc`, or of its nearest ancestor that has one (a missing key points at its parent)."""
        for end in range(len(loc), -1, -1):
            found = self.lines.get(tuple(loc[:end]))
            if found is not None:
                return found
        return None

    def error(self, loc: Loc, message: str, *, hint: str = "") -> StackError:
        return StackError(self.path, self.line(loc), dotted(loc), message, hint=hint)


def dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def load(path: Path) -> Source:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise StackError(path, None, "", f"cannot read: {exc.strerror}", hint="check the --stack directory") from exc
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise StackError(path, line, "", f"malformed YAML: {problem}", hint="fix the YAML syntax at that line") from exc
    finally:
        loader.dispose()
    lines: dict[Loc, int] = {}
    data = _build(node, (), lines, path, loader) if node is not None else None
    return Source(path, data, lines)


def _build(node: yaml.Node, loc: Loc, lines: dict[Loc, int], path: Path, loader: Any) -> Any:
    lines.setdefault(loc, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node)
            if not isinstance(key, str):
                raise StackError(path, key_node.start_mark.line + 1, dotted(loc), f"key {key!r} is not a string")
            if key in out:
                raise StackError(
                    path, key_node.start_mark.line + 1, dotted((*loc, key)), "duplicate key", hint="keep one of them"
                )
            lines[(*loc, key)] = key_node.start_mark.line + 1
            out[key] = _build(value_node, (*loc, key), lines, path, loader)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(item, (*loc, i), lines, path, loader) for i, item in enumerate(node.value)]
    return loader.construct_object(node)
