"""`ci upstream --record`: write each port commit's patch-id into its change file (fork.patch_ids), from a checkout
that holds the commits, so that a later checkout where a rebase dropped them can still find their patches."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from ci.errors import StackError
from ci.stack import loader
from ci.stack.model import Stack
from ci.stack.yaml_lines import Source
from ci.upstream import where
from ci.upstream.checkout import Checkout

COMMENT = "# git patch-id --stable of each port commit: python -m ci upstream --fork CHECKOUT --record"


def record(st: Stack, co: Checkout, only: Sequence[str] = ()) -> list[str]:
    """One line per change with port commits: what was recorded, and which commits this checkout lacks."""
    said = []
    for ch in st.changes.values():
        if (only and ch.id not in only) or not ch.fork.commits:
            continue
        full = co.resolve(ch.fork.commits)
        ids = co.patch_ids(*(f for f in full.values() if f), walk=False)
        got = {c: ids[f] for c in ch.fork.commits if (f := full[c]) and f in ids}
        lacking = [c for c in ch.fork.commits if c not in got]
        src = where.change_source(st.root, ch.id)
        line = f"{src.path}: "
        if got:
            merged = {
                c: got.get(c) or ch.fork.patch_ids[c] for c in ch.fork.commits if c in got or c in ch.fork.patch_ids
            }
            changed = merged != ch.fork.patch_ids
            if changed:
                _write(src, merged, st.root)
            line += f"{'recorded' if changed else 'already recorded'} the patch-ids of {', '.join(got)}"
        else:
            line += "nothing recorded"
        if lacking:
            line += f"; not in {co.path} (or no patch): {', '.join(lacking)}"
        said.append(line)
    return said


def _write(src: Source, patch_ids: Mapping[str, str], stack_root: Path) -> None:
    lines = src.path.read_text(encoding="utf-8").splitlines(keepends=True)
    fork, commits = src.lines.get(("fork",)), src.lines[("fork", "commits")]
    if fork == commits:
        raise src.error(
            ("fork",),
            "cannot record into a fork block written on one line",
            hint="write fork: as a block, one key a line, then record again",
        )
    indent = lines[commits - 1][: len(lines[commits - 1]) - len(lines[commits - 1].lstrip())]
    block = [f"{indent}patch_ids:  {COMMENT}\n", *(f'{indent}  "{c}": "{p}"\n' for c, p in patch_ids.items())]
    old = [n for loc, n in src.lines.items() if loc[:2] == ("fork", "patch_ids")]
    if old:
        start, end = min(old), max(old)
    else:
        start = end = max(n for loc, n in src.lines.items() if loc[:2] == ("fork", "commits")) + 1
        end -= 1
    before = "".join(lines)
    after = "".join([*lines[: start - 1], *block, *lines[end:]])
    _replace(src.path, after)
    try:
        loader.load(stack_root)
    except StackError as exc:
        _replace(src.path, before)
        raise StackError(
            src.path,
            start,
            "fork.patch_ids",
            f"recording would break the file: {exc}",
            hint="record the patch-ids by hand, or restate fork: as a plain block",
        ) from None


def _replace(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(tmp, path.stat().st_mode & 0o777)
    os.replace(tmp, path)
