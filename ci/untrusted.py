"""The one reader for data from elsewhere: a manifest in a bundle or an artefact, a costs file, a rows.json beside a
result, a report.json, an upstream.json. Each is read as data, never trusted for its shape:

- a regular file only (a FIFO would block the reader forever, a device never end), within its kind's size;
- strict JSON (orjson: finite numbers only, no NaN or Infinity, no number that overflows a double), nested no
  deeper than its kind allows (a document nested 100,000 deep would exhaust any recursive reader after it);
- validated against a typed model (`Record`) before anything reads it: a field of the wrong type is refused by name;
- a tar's members bounded in count and size from their headers, before a byte of them is read.

What is wrong is a `BadInput` (exit 2) naming the file, the field and what was wrong, with what to do.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import tarfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from ci import escape, files
from ci.errors import UsageError


class BadInput(UsageError):
    """Data from elsewhere that is not what its kind must be: the file, the field, what was wrong, what to do."""


class Record(BaseModel):
    """The base of every model of data from elsewhere: frozen, types as JSON has them (no "1" for 1), fields beyond
    those read are ignored (a newer writer may add some)."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)


M = TypeVar("M", bound=BaseModel)
DAMAGED = (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, OSError)  # what a cut or forged gzip'd tar raises


@dataclass(frozen=True, kw_only=True)
class Kind:
    """A kind of input: what it is called, its bounds, and what a user does about a bad one."""

    what: str  # "a bundle manifest": completes "not <what>"
    limit: int  # bytes
    fix: str
    depth: int = 24  # nesting levels of JSON


def read(path: Path, model: type[M], kind: Kind) -> M:
    """`path`, a `kind` file, as `model`; a BadInput naming the file and what was wrong otherwise."""
    return parse(read_bytes(path, kind), model, kind, str(path))


def read_bytes(path: Path, kind: Kind) -> bytes:
    """The file's bytes, at most its kind's limit, a block at a time (read(limit) would set the whole limit aside
    for every file, however small); one that grew past the limit since it was opened is refused."""
    with _opened(path, kind) as fh:
        blocks, size = [], 0
        for block in iter(lambda: fh.read(1 << 20), b""):
            size += len(block)
            if size > kind.limit:
                raise BadInput(
                    f"{escape.one_line(path)}: over the {kind.limit:,}-byte limit for {kind.what}", hint=kind.fix
                )
            blocks.append(block)
        return b"".join(blocks)


def _opened(path: Path, kind: Kind) -> BinaryIO:
    try:
        return files.open_regular(path, kind.limit)
    except FileNotFoundError:
        raise BadInput(f"{escape.one_line(path)}: not found ({kind.what} was expected there)", hint=kind.fix) from None
    except OSError as exc:
        raise BadInput(
            f"{escape.one_line(path)}: cannot be read as {kind.what}: {exc.strerror or exc}", hint=kind.fix
        ) from None


def parse(data: bytes, model: type[M], kind: Kind, where: str) -> M:
    """`data` (the bytes of `where`: a file, a member) as `model`."""
    return validated(json_value(data, kind, where), model, kind, where)


def json_value(data: bytes, kind: Kind, where: str) -> Any:
    """`data` as a JSON value: strict, finite, nested no deeper than `kind.depth`."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):  # orjson stops at 1,024 levels, before any Python recursion
            raise BadInput(
                f"{escape.one_line(where)}: nested deeper than {kind.depth} levels ({exc}): not {kind.what}",
                hint=kind.fix,
            ) from None
        if odd := not_a_number(data):  # JSON but for a number JSON has none of: named, field and value
            raise BadInput(
                f"{escape.one_line(where)}: {odd}: no JSON number (JSON has no NaN or Infinity, nor a number past a "
                f"double's range): not {kind.what}",
                hint=kind.fix,
            ) from None
        raise BadInput(f"{escape.one_line(where)}: not {kind.what}: not JSON ({exc})", hint=kind.fix) from None
    deep = too_deep(value, kind.depth)
    if deep is not None:
        raise BadInput(
            f"{escape.one_line(where)}: {deep}: nested deeper than {kind.depth} levels: not {kind.what}", hint=kind.fix
        )
    return value


class _Odd(str):
    """A number JSON has none of, as the document wrote it (NaN, -Infinity, 1e400)."""


def not_a_number(data: bytes) -> str | None:
    """Where a document that strict JSON refused holds a NaN, an Infinity or a number past a double's range (or an
    integer past 64 bits): "measured[0].further_s[1]: Infinity"; None where it is not that (or not JSON at all).
    Python's reader takes them, handed to hooks that mark them; it is only asked once orjson has refused."""

    def number(text: str) -> float | _Odd:
        value = float(text)
        return value if math.isfinite(value) else _Odd(text)

    def integer(text: str) -> int | _Odd:
        value = int(text)
        return value if -(2**63) <= value < 2**64 else _Odd(text)

    try:
        value = json.loads(data, parse_constant=_Odd, parse_float=number, parse_int=integer)
    except (ValueError, RecursionError):
        return None
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:  # depth first, in the document's order
        node, at = stack.pop()
        if isinstance(node, _Odd):
            return f"{at or '(the document)'}: {escape.one_line(node)}"
        if isinstance(node, dict):
            stack.extend(reversed([(v, f"{at}.{k}" if at else escape.one_line(k)) for k, v in node.items()]))
        elif isinstance(node, list):
            stack.extend(reversed([(v, f"{at}[{i}]") for i, v in enumerate(node)]))
    return None


def validated(value: Any, model: type[M], kind: Kind, where: str) -> M:
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise BadInput(
            f"{escape.one_line(where)}: {field(first['loc'])}: {_problem(first)}: not {kind.what}", hint=kind.fix
        ) from None


# pydantic's error types in JSON's words: what the field should have been
_SHOULD = {
    "model_type": "an object",
    "dict_type": "an object",
    "list_type": "a list",
    "string_type": "a string",
    "int_type": "a whole number",
    "float_type": "a number",
    "bool_type": "true or false",
}
_JSON_TYPES = {
    dict: "an object",
    list: "a list",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
}


def _problem(error: Any) -> str:
    if error["type"] == "missing":
        return "missing"
    found = _JSON_TYPES.get(type(error.get("input")), "null")
    if error["type"] in _SHOULD:
        return f"should be {_SHOULD[error['type']]}, not {found}"
    return escape.one_line(error["msg"][:1].lower() + error["msg"][1:])


def field(loc: Sequence[int | str]) -> str:
    """A pydantic location as a reader writes it: files[3].sha256."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f"{'.' if out else ''}{escape.one_line(part)}"
    return out or "(the document)"


def too_deep(value: Any, depth: int) -> str | None:
    """Where `value` nests deeper than `depth` levels (the path to the first such place), or None. Iterative: a
    recursive walk is what such a document breaks."""
    stack: list[tuple[Any, int, str]] = [(value, 1, "")]
    while stack:
        node, level, at = stack.pop()
        if level > depth:
            return at or "(the document)"
        if isinstance(node, dict):
            stack.extend((v, level + 1, f"{at}.{k}" if at else str(k)) for k, v in node.items() if _nests(v))
        elif isinstance(node, list):
            stack.extend((v, level + 1, f"{at}[{i}]") for i, v in enumerate(node) if _nests(v))
    return None


def _nests(v: Any) -> bool:
    return isinstance(v, (dict, list))


@contextlib.contextmanager
def opened_tar(path: Path, kind: Kind) -> Iterator[tarfile.TarFile]:
    """`path` (a regular file within `kind.limit`) open as a gzip'd tar; a BadInput where it cannot be."""
    with _opened(path, kind) as fh:
        try:
            tar = tarfile.open(fileobj=fh, mode="r:gz")  # noqa: SIM115 (closed by the with below)
        except DAMAGED as exc:
            raise BadInput(
                f"{escape.one_line(path)}: not {kind.what}, or a damaged one ({exc})", hint=kind.fix
            ) from None
        with tar:
            yield tar


@dataclass(frozen=True, kw_only=True)
class Bounds:
    """What a tar from elsewhere may hold: members, the bytes of one, the bytes of all."""

    count: int
    member: int
    total: int


def members(tar: tarfile.TarFile, bounds: Bounds, where: str, fix: str) -> Iterator[tarfile.TarInfo]:
    """The members of `tar`, each checked against `bounds` from its header before its data is read."""
    total, n, listed = 0, 0, iter(tar)
    while True:
        try:
            info = next(listed)
        except StopIteration:
            return
        except DAMAGED as exc:
            raise BadInput(
                f"{escape.one_line(where)}: a damaged archive ({type(exc).__name__}: {exc})", hint=fix
            ) from None
        n, name = n + 1, escape.one_line(info.name)
        if n > bounds.count:
            raise BadInput(f"{escape.one_line(where)}: more than {bounds.count:,} members", hint=fix)
        if info.size > bounds.member:
            raise BadInput(
                f"{escape.one_line(where)}: {name} holds {info.size:,} bytes, over the {bounds.member:,}-byte bound "
                "for one member",
                hint=fix,
            )
        total += info.size
        if total > bounds.total:
            raise BadInput(
                f"{escape.one_line(where)}: its members hold over {bounds.total:,} bytes (at {name})", hint=fix
            )
        yield info
