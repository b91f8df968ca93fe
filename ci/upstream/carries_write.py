"""`ci fork --record` (and `ci upstream --record`): what the fork carries, written with the fork (stack/fork.yaml
`carries:`), never into a change file. A change found by its patches gets the fork commits that carry it and their
patch-ids, so that a later checkout where a rebase replaced the commits still finds it; a change already recorded
keeps its commits (a prerequisite or a fix named by hand stays) and has its patch-ids refreshed from this checkout.
Converged, absent and unknown changes need no record. Entries that do not change keep their lines, comments too."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import yaml

from ci.common import files
from ci.common.errors import StackError, UsageError
from ci.stack import loader
from ci.stack.model import Carried, Stack
from ci.upstream.scope import Scope
from ci.upstream.state import Snapshot

COMMENT = "# commits of this fork that carry each change, and their patch-ids: python -m ci fork --record"


def record(st: Stack, scope: Scope, snap: Snapshot) -> list[str]:
    """One line per change recorded or refreshed; writes stack/fork.yaml where anything changed."""
    path = st.root / "fork.yaml"
    if not scope.recorded and st.fork is not None:
        raise UsageError(
            f"{path} describes the fork {st.fork.name} ({st.fork.checkout}), not {scope.co.path}: its records are "
            "that fork's",
            hint=f"point {path} at this fork (name, checkout, ref) to record its facts there",
        )
    old = dict(scope.records)
    new: dict[str, Carried] = {}
    said = []
    for state in snap.changes:
        rec = old.get(state.change)
        if rec is None and (not state.carried_by or state.state == "converged"):
            continue
        commits = rec.commits if rec else tuple(c[:12] for c in state.carried_by)
        full = scope.co.resolve(commits)
        ids = scope.co.patch_ids(*(f for f in full.values() if f), walk=False)
        patch_ids = {c: p for c in commits if (f := full[c]) and (p := ids.get(f) or (rec and rec.patch_ids.get(c)))}
        if rec and not any(full.values()):
            patch_ids = dict(rec.patch_ids)  # nothing here to compare: the record stands as it is
        new[state.change] = Carried(commits=commits, patch_ids=patch_ids)
        lacking = [c for c in commits if not full[c]]
        verb = "kept" if rec == new[state.change] else ("refreshed" if rec else "recorded")
        said.append(
            f"#{state.change}: {verb} {', '.join(commits)} ({state.state})"
            + (f"; not in {scope.co.path}: {', '.join(lacking)}" if lacking else "")
        )
    if new != old:
        _write(st, scope, path, old, new)
    return said or ["nothing to record: no change is carried by commits of the fork's own"]


def _write(st: Stack, scope: Scope, path: Path, old: Mapping[str, Carried], new: Mapping[str, Carried]) -> None:
    if not path.is_file():
        base = scope.require_base()
        fork = {
            "name": scope.name,
            "checkout": str(scope.co.path),
            "ref": scope.ref,
            "base": {"version": base.version, "ref": base.ref},
        }
        _replace(path, yaml.safe_dump({"fork": fork}, sort_keys=False) + _block("  ", {}, new))
    else:
        text = path.read_text(encoding="utf-8")
        lines = [line for line in re.split(r"(?<=\n)", text) if line]  # at newlines alone, not at U+2028
        start, end, kept = _carries(lines)
        entries = {c: kept[c] for c in old if c in new and old[c] == new[c] and c in kept}
        block = _block("  ", entries, new)
        before = "".join(lines)
        _replace(path, "".join([*lines[:start], block, *lines[end:]]))
        try:
            loader.load(st.root, cached=False)
        except StackError as exc:
            _replace(path, before)
            raise StackError(
                path,
                start + 1,
                "fork.carries",
                f"recording would break the file: {exc}",
                hint="record by hand, or write fork: as a plain block",
            ) from None


def _block(indent: str, kept: Mapping[str, str], new: Mapping[str, Carried]) -> str:
    out = [f"{indent}carries:  {COMMENT}\n"]
    for change, rec in new.items():
        if change in kept:
            out.append(kept[change])
            continue
        out.append(f'{indent}  "{change}":\n{indent}    commits: [{", ".join(rec.commits)}]\n')
        if rec.patch_ids:
            out.append(f"{indent}    patch_ids:\n")
            out += [f'{indent}      "{c}": "{p}"\n' for c, p in rec.patch_ids.items()]
    return "".join(out)


def _carries(lines: list[str]) -> tuple[int, int, dict[str, str]]:
    """Where fork.yaml's `carries:` block runs (0-based start, end), and each entry's text as written; where there
    is none, an empty block at the end of the fork mapping."""
    at = next((i for i, line in enumerate(lines) if line.startswith("  carries:")), None)
    if at is None:
        return len(lines), len(lines), {}
    end, entries, current = at + 1, {}, None
    while end < len(lines):
        line = lines[end]
        depth = len(line) - len(line.lstrip())
        if line.strip() and not line.lstrip().startswith("#") and depth <= 2:
            break
        if line.strip() and depth == 4 and not line.lstrip().startswith("#"):
            current = line.strip().split(":", 1)[0].strip("\"'")
            entries[current] = ""
        if current is not None:
            entries[current] += line
        end += 1
    return at, end, entries


def _replace(path: Path, text: str) -> None:
    """`path` holding `text`, written whole beside the file it names: a stack/fork.yaml that is a symlink (a shared
    file) gets the record, never a private copy in the link's place."""
    path = path.resolve()
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    with files.staged(path, mode) as fh:
        fh.write(text.encode("utf-8"))
