"""A loaded stack kept between commands, under `$XDG_CACHE_HOME/stackgate/stack` ($STACKGATE_CACHE overrides).

Every command loads the stack: the YAML parsed, pydantic imported and eight validators built, ~0.13 CPU-seconds
before any work. A stack whose folder and loader are what they were when it was last loaded is read back instead
(one pickle). The key is content, never time: the folder's path and every file below it, name and bytes, and the
source of this stage's modules and the suites' registry of the names a change file may give its probe and engine
options (`ci.stack.suite_names`), so that an edited stack file, a new file beside them or a changed loader is loaded
anew; each part is framed by its length, so that no two sets of files make one key. A stack that does not load is
never kept (its error is raised every time). A cache that cannot be read or written is a miss, never an error.

A pickle runs code as it loads, so the cache is read only from a folder nobody but this user (and root) could have
written (`ci.common.owned`): one another user can write to, or reached through another user's symlink, is not used at
all, and a warning says so once."""

from __future__ import annotations

import copyreg
import functools
import hashlib
import io
import os
import pickle
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ci.common import options, owned
from ci.stack import suite_names

if TYPE_CHECKING:
    from ci.stack.model import Stack

_CODE = Path(__file__).parent  # this stage's modules: the model, its validation and the loader's checks
KEPT = 64  # stack folders kept: past that, the least recently loaded anew go (tests load hundreds of copies)


def loaded(root: Path, load: Callable[[Path], Stack], *, cached: bool = True) -> Stack:
    """The stack kept for `root` where it is still what `load(root)` makes; else `load(root)`, then kept."""
    made = key(root)
    stack = read(root, made) if cached else None
    if stack is None:
        stack = load(root)
        write(root, made, stack)
    return stack


def key(root: Path) -> bytes:
    """What a kept stack must match: the folder as given, every file below it, the code that loads it, and the names
    the suites hold that it checks change files against."""
    h = hashlib.sha256()
    tracked = suite_names.TRACKED.read_bytes() if suite_names.TRACKED.is_file() else b""
    for part in (str(sys.version_info[:2]).encode(), os.fsencode(root), _code(_CODE), tracked):
        _framed(h, part)
    _files(h, root, "**/*")
    return h.digest()


def _framed(h: Any, data: bytes) -> None:
    """`data` with its length before it: names and contents may hold any byte, NUL included."""
    h.update(len(data).to_bytes(8, "big") + data)


@functools.cache
def _code(folder: Path) -> bytes:
    """The loader's source, hashed once a process: the code that runs is the code that was imported."""
    return _files(hashlib.sha256(), folder, "**/*.py").digest()  # its concept folders too (ci.stack.checks)


def _files(h: Any, folder: Path, pattern: str) -> Any:
    for path in sorted(p for p in folder.glob(pattern) if p.is_file()):
        _framed(h, os.fsencode(path.relative_to(folder)))
        _framed(h, hashlib.sha256(path.read_bytes()).digest())
    return h


def read(root: Path, wanted: bytes) -> Stack | None:
    """The stack kept for `root` under `wanted` (`key`), or None."""
    try:
        data = owned.read_kept(_file(root), "the stack cache")
        if data is None or data[: len(wanted)] != wanted:
            return None
        return pickle.loads(data[len(wanted) :])  # type: ignore[no-any-return]
    except Exception:  # unreadable, cut short, or of another version of the model: a miss
        return None


def write(root: Path, made: bytes, stack: Stack) -> None:
    """Keep `stack`, loaded from `root` as it was under `made` (`key`): one file per stack folder, replaced whole."""
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = {**copyreg.dispatch_table, MappingProxyType: _reduce_proxy}
    try:
        pickler.dump(stack)
        path = _file(root)
        owned.make(path.parent)
        if not owned.usable(path.parent, "the stack cache"):
            return
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(made + buf.getvalue())
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        _prune(path.parent)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        return  # not kept: the next command loads it again


def _prune(folder: Path) -> None:
    def age(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except OSError:
            return 0.0  # gone already: another process pruned it

    for old in sorted(folder.glob("*.pickle"), key=age, reverse=True)[KEPT:]:
        old.unlink(missing_ok=True)


def _file(root: Path) -> Path:
    where = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:24]
    return options.cache_home() / "stack" / f"{where}.pickle"


def _reduce_proxy(proxy: MappingProxyType[Any, Any]) -> tuple[Any, tuple[dict[Any, Any]]]:
    return _proxy, (dict(proxy),)


def _proxy(items: dict[Any, Any]) -> MappingProxyType[Any, Any]:
    """A read-only mapping again, unpickled (pickle cannot name mappingproxy's own class)."""
    return MappingProxyType(items)
