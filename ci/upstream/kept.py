"""One fork's whole answer (every change's state, ci.upstream.holds.classify, and its port readiness,
ci.upstream.port.decision), kept between commands per (fork tip, upstream commit): a far fork's prerequisite chains take
seconds of git to find, and `ci fork` is asked again and again of the same two commits.

The answer is kept under `<cache home>/fork/` ($STACKGATE_CACHE, else $XDG_CACHE_HOME/stackgate): delete that folder
at will, it is made again. The key is content, never time: the code that judges (this stage's modules), the stack
(its digest over every file read: the change files and fork.yaml's records), the scope as resolved (checkout, ref and
its commit, upstream's commit and how it was found, where the ref left it, the base and how it was found, or why it
is not known, and the options that name them), and what the checkout holds of every commit the stack names (a fetch
that brings one makes another key). A kept answer is upstream.json's own JSON, read back as data through its reader
(a file that does not read is a miss, never an error), only from a folder nobody but this user could have written
(ci.common.owned): it could otherwise say a port is clean that is not."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path

from ci.common import options, owned
from ci.stack.model import Stack
from ci.upstream.holds import classify, follow_ups, found
from ci.upstream.port import decision
from ci.upstream.scope import Scope
from ci.upstream.state import Snapshot

KEPT = 256  # answers kept: past that, the least recently made go
_CODE = Path(__file__).parent


def answer(st: Stack, scope: Scope) -> Snapshot:
    """Every change's state and port readiness in `scope`, kept where the same was asked before."""
    key = _key(st, scope)
    snap = _read(key)
    if snap is None:
        snap = decision.assess(st, scope, classify.survey(st, scope))
        _write(key, snap)
    return snap


def folder() -> Path:
    return options.cache_home() / "fork"


@functools.cache
def _code() -> str:
    h = hashlib.sha256()
    for path in sorted(_CODE.rglob("*.py")):
        h.update(str(path.relative_to(_CODE)).encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def _key(st: Stack, scope: Scope) -> str:
    changes = list(st.changes.values())
    ids = [*(i for c in changes for i in found.ids(scope, c)), *follow_ups.ids(changes)]
    base = scope.base
    said = {
        "code": _code(),
        "stack": st.digest,
        "checkout": str(Path(scope.co.path).resolve()),
        "shallow": scope.co.shallow,
        "name": scope.name,
        "ref": scope.ref,
        "head": scope.head,
        "upstream": [scope.upstream_ref, scope.upstream, scope.upstream_how],
        "left": [scope.left.commit, scope.left.date, scope.left.upstream_ref] if scope.left else None,
        "base": [base.version, base.ref, base.commit, base.release_commit, base.how] if base else None,
        "base_unknown": [scope.base_problem, scope.base_fix],
        "recorded": scope.recorded,
        "options": list(scope.options),
        "held": scope.co.resolve(ids),
    }
    return hashlib.sha256(json.dumps(said, sort_keys=True).encode()).hexdigest()


def _read(key: str) -> Snapshot | None:
    try:
        data = owned.read_kept(folder() / f"{key}.json", "the fork cache")
        if data is None:
            return None
        doc = json.loads(data)
        if doc.get("key") != key:
            return None
        return Snapshot.from_json(doc["answer"])
    except Exception:  # unreadable, cut short, or of another schema: a miss
        return None


def _write(key: str, snap: Snapshot) -> None:
    where = folder()
    try:
        owned.make(where)
        if not owned.usable(where, "the fork cache"):
            return
        fd, tmp = tempfile.mkstemp(dir=where, prefix=f".{key}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump({"key": key, "answer": snap.to_json()}, fh)
            os.replace(tmp, where / f"{key}.json")
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        _prune(where)
    except OSError:
        return  # not kept: the next command finds it again


def _prune(where: Path) -> None:
    def age(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except OSError:
            return 0.0

    for old in sorted(where.glob("*.json"), key=age, reverse=True)[KEPT:]:
        old.unlink(missing_ok=True)
