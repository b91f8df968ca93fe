"""Where a change comes from, checked across its fields: its upstream PR (state, merge commit, the PR's commits,
what it is stacked on) and the fork commits that carry it (with their recorded patch-ids)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ci.stack.change import Change

if TYPE_CHECKING:  # YAML is parsed only where a stack is loaded, not read back from the cache
    from ci.stack.yaml_lines import Loc, Source

_RELEASE = re.compile(r"\d+\.\d+\.\d+(\.post\d+)?")


def check(change: Change, src: Source) -> None:
    up, fork = change.upstream, change.fork
    if up is None:
        if fork.kind not in ("selftest", "composition"):
            raise src.error(("upstream",), "an imported change names its upstream PR")
    else:
        if up.merged_on is not None and up.state != "merged":
            raise src.error(("upstream", "merged_on"), f"merged_on given but state is {up.state!r}, not 'merged'")
        if up.first_release is not None and (up.state != "merged" or not _RELEASE.fullmatch(up.first_release)):
            raise src.error(
                ("upstream", "first_release"),
                f"first_release {up.first_release!r} needs state 'merged' and a version like 0.29.0",
                hint="the oldest vLLM release whose code holds it, e.g. first_release: 0.29.0",
            )
        if up.merge_commit is not None and up.state != "merged":
            raise src.error(
                ("upstream", "merge_commit"),
                f"merge_commit given but state is {up.state!r}, not 'merged'",
                hint="record the merge commit once the PR has merged (state: merged)",
            )
        _unique(src, ("upstream", "commits"), up.commits, "commit")
        _unique(src, ("upstream", "stacked_on"), up.stacked_on, "PR")
        if up.pr in up.stacked_on:
            i = up.stacked_on.index(up.pr)
            raise src.error(("upstream", "stacked_on", i), f"#{up.pr} cannot be stacked on itself")
    if fork.kind == "port" and not fork.commits:
        raise src.error(("fork", "commits"), "a port names the fork commits that carry it")
    _unique(src, ("fork", "commits"), fork.commits, "commit")
    for commit in fork.patch_ids:
        if commit not in fork.commits:
            raise src.error(
                ("fork", "patch_ids", commit),
                f"patch-id recorded for {commit}, which fork.commits lacks",
                hint="record patch-ids with python -m ci upstream --fork CHECKOUT --record",
            )


def _unique(src: Source, loc: Loc, values: Sequence[object], noun: str) -> None:
    for i, value in enumerate(values):
        if value in values[:i]:
            raise src.error((*loc, i), f"{noun} {value} listed twice", hint="keep one")
