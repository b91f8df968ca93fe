"""stack/fork.yaml: the fork under test, validated, with what it records carrying checked against the changes (each
one an imported change of this stack, each commit listed once, a patch-id only for a commit it lists)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ci.stack.change import Change
from ci.stack.checks.provenance import RELEASE
from ci.stack.model import ForkSource
from ci.stack.schema import validate

if TYPE_CHECKING:
    from ci.stack.yaml_lines import Source


def load(path: Path, changes: Mapping[str, Change]) -> ForkSource | None:
    """The fork stack/fork.yaml names, or None where the stack names none (images then hold a stock release)."""
    if not path.is_file():
        return None
    from ci.stack import yaml_lines

    src = yaml_lines.load(path)
    if not isinstance(src.data, dict) or set(src.data) != {"fork"}:
        raise src.error((), "expected one top-level key, fork", hint="fork: {name, checkout, ref, base, carries}")
    fork = validate(src, src.data["fork"], ("fork",), ForkSource)
    check(fork, src, changes)
    return fork


def check(fork: ForkSource, src: Source, changes: Mapping[str, Change]) -> None:
    if fork.base is not None and not RELEASE.fullmatch(fork.base.version):
        raise src.error(("fork", "base", "version"), f"{fork.base.version!r} is not a release like 0.26.0")
    imported = [c for c, ch in changes.items() if ch.upstream is not None]
    for change, carried in fork.carries.items():
        where = ("fork", "carries", change)
        if change not in changes:
            raise src.error(where, f"unknown change {change!r}", hint=f"one of {', '.join(imported)}")
        if changes[change].upstream is None:
            raise src.error(where, f"#{change} imports nothing from upstream: no fork carries it")
        if not carried.commits:
            raise src.error((*where, "commits"), "a record names the fork commits that carry the change")
        for i, commit in enumerate(carried.commits):
            if commit in carried.commits[:i]:
                raise src.error((*where, "commits", i), f"commit {commit} listed twice", hint="keep one")
        for commit in carried.patch_ids:
            if commit not in carried.commits:
                raise src.error(
                    (*where, "patch_ids", commit),
                    f"patch-id recorded for {commit}, which commits lacks",
                    hint="record patch-ids with python -m ci fork --record",
                )
