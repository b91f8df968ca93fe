"""The names a change file may give its `probe` and `engine_options`: the keys of `PROBES` and `OPTIONS` in
`suites/engine/tracked.py`, where the probes and the options live. Read from that file's text, never imported: the
suites run inside the image and never import `ci/`, and the host never runs their code
(`tests/unit/test_change_facts.py` holds this reading equal to the imported registry's keys)."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

from ci.common import options
from ci.common.errors import StackError

TRACKED = options.REPO / "suites" / "engine" / "tracked.py"
# the probe of a change file that imports nothing (composition, the self-test): it finds nothing, so an imported
# change may not name it (its rows would read "present" on any build)
NOTHING_IMPORTED = "nothing-imported"


@dataclass(frozen=True)
class Names:
    probes: frozenset[str]
    options: frozenset[str]


def names(path: Path | None = None) -> Names:
    """The names `path` (suites/engine/tracked.py) holds; a StackError naming it where they cannot be read."""
    path = path or TRACKED
    return _read(path, path.read_bytes() if path.is_file() else b"")


@functools.cache
def _read(path: Path, text: bytes) -> Names:
    if not text:
        raise StackError(
            path,
            None,
            "",
            "the suites' registry of probes and engine options is missing",
            hint="suites/engine/tracked.py holds PROBES and OPTIONS; restore it from git",
        )
    found: dict[str, frozenset[str]] = {}
    for node in ast.parse(text, str(path)).body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        if isinstance(target, ast.Name) and target.id in ("PROBES", "OPTIONS") and isinstance(node.value, ast.Dict):
            keys = node.value.keys
            if not all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in keys):
                raise StackError(
                    path,
                    node.lineno,
                    target.id,
                    "every key must be a string literal",
                    hint="the host reads the names without running the suites' code",
                )
            found[target.id] = frozenset(k.value for k in keys)  # type: ignore[union-attr]
    for name in ("PROBES", "OPTIONS"):
        if name not in found:
            raise StackError(
                path,
                None,
                name,
                f"no `{name} = {{...}}` with string keys at the module's top level",
                hint="the host reads the names from a dict display there",
            )
    return Names(probes=found["PROBES"], options=found["OPTIONS"])
