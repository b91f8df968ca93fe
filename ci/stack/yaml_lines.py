"""YAML that remembers where every value came from, so errors can name the line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ci.common import files
from ci.common.errors import StackError

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


MAX_BYTES = 1 << 20  # a stack file is a few kB; anything near this is not hand-written data
MAX_NODES = 200_000  # values built from one file, aliases expanded: a bomb of nested aliases stops here
_TAG = "tag:yaml.org,2002:"
_SCALARS = {_TAG + t for t in ("str", "int", "float", "bool", "null", "timestamp")}
_CONTAINERS = {yaml.MappingNode: _TAG + "map", yaml.SequenceNode: _TAG + "seq"}


def load(path: Path) -> Source:
    """Parse one stack file. Everything YAML can do beyond plain data (custom or Python tags, merge keys,
    alias bombs, bytes that are not UTF-8) is a StackError naming the line, never a traceback."""
    try:
        raw = files.read_regular(path, MAX_BYTES)
    except OSError as exc:
        raise StackError(path, None, "", f"cannot read: {exc.strerror}", hint="check the --stack directory") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise StackError(
            path, line, "", f"byte {raw[exc.start]:#04x} is not UTF-8", hint="save the file as UTF-8"
        ) from None
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise StackError(path, line, "", "a NUL character", hint="remove it: stack files are text")
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
    except yaml.YAMLError as exc:
        raise StackError(
            path, _line(exc, text), "", f"malformed YAML: {_problem(exc)}", hint="fix the YAML syntax at that line"
        ) from None
    finally:
        loader.dispose()
    lines: dict[Loc, int] = {}
    budget = [MAX_NODES]
    data = _build(node, (), lines, path, loader, budget) if node is not None else None
    return Source(path, data, lines)


def _line(exc: yaml.YAMLError, text: str) -> int | None:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is not None:
        return mark.line + 1
    position = getattr(exc, "position", None)  # the reader's errors carry a character offset instead
    return text[:position].count("\n") + 1 if isinstance(position, int) else None


def _problem(exc: yaml.YAMLError) -> str:
    return str(getattr(exc, "problem", None) or getattr(exc, "reason", None) or exc).splitlines()[0]


def _build(node: yaml.Node, loc: Loc, lines: dict[Loc, int], path: Path, loader: Any, budget: list[int]) -> Any:
    line = node.start_mark.line + 1
    lines.setdefault(loc, line)
    budget[0] -= 1
    if budget[0] < 0:
        raise StackError(
            path,
            line,
            dotted(loc),
            f"more than {MAX_NODES} values (nested aliases?)",
            hint="write the data out; stack files need no anchors or aliases",
        )
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and node.tag != _CONTAINERS[type(node)]:
        raise StackError(path, line, dotted(loc), f"tag {node.tag!r} is not allowed", hint="remove the tag")
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key_line = key_node.start_mark.line + 1
            if key_node.tag == _TAG + "merge":
                raise StackError(
                    path, key_line, dotted(loc), "merge keys (<<) are not allowed", hint="write the keys out"
                )
            key = _scalar(key_node, loc, path, loader)
            if not isinstance(key, str):
                raise StackError(path, key_line, dotted(loc), f"key {key!r} is not a string")
            if key in out:
                raise StackError(path, key_line, dotted((*loc, key)), "duplicate key", hint="keep one of them")
            lines[(*loc, key)] = key_line
            out[key] = _build(value_node, (*loc, key), lines, path, loader, budget)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(item, (*loc, i), lines, path, loader, budget) for i, item in enumerate(node.value)]
    return _scalar(node, loc, path, loader)


def _scalar(node: yaml.Node, loc: Loc, path: Path, loader: Any) -> Any:
    line = node.start_mark.line + 1
    if not isinstance(node, yaml.ScalarNode) or node.tag not in _SCALARS:
        what = "a mapping or list" if not isinstance(node, yaml.ScalarNode) else f"tag {node.tag!r}"
        raise StackError(
            path,
            line,
            dotted(loc),
            f"{what} is not allowed here",
            hint="plain strings, numbers, booleans, dates and null only",
        )
    try:
        return loader.construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
        problem = _problem(exc) if isinstance(exc, yaml.YAMLError) else str(exc)
        kind = node.tag.rsplit(":", 1)[1]
        raise StackError(
            path,
            line,
            dotted(loc),
            f"{node.value!r} is not a valid {kind}: {problem}",
            hint="quote it to make it a string, or correct the value",
        ) from None
