"""Where a change comes from, checked across its fields: its upstream PR (state, merge commit, the PR's commits,
what it is stacked on, the files it adds). A fork's own facts are not a change's: `fork:` in a change file is
refused, pointing at stack/fork.yaml."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ci import options
from ci.stack.change import Change

if TYPE_CHECKING:  # YAML is parsed only where a stack is loaded, not read back from the cache
    from ci.stack.yaml_lines import Loc, Source

RELEASE = options.RELEASE


def check(change: Change, src: Source) -> None:
    up = change.upstream
    if up is None:
        if change.kind == "import":
            raise src.error(
                ("upstream",),
                "an imported change names its upstream PR",
                hint="add upstream: (repo, pr, title, state, as_of), or kind: selftest | composition",
            )
        return
    if change.kind != "import":
        raise src.error(("upstream",), f"a {change.kind} change imports nothing: it names no upstream PR")
    if up.merged_on is not None and up.state != "merged":
        raise src.error(("upstream", "merged_on"), f"merged_on given but state is {up.state!r}, not 'merged'")
    if up.first_release is not None and (up.state != "merged" or not RELEASE.fullmatch(up.first_release)):
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
    _unique(src, ("upstream", "adds"), up.adds, "file")
    if up.pr in up.stacked_on:
        i = up.stacked_on.index(up.pr)
        raise src.error(("upstream", "stacked_on", i), f"#{up.pr} cannot be stacked on itself")


def refuse_fork_facts(data: dict, src: Source) -> None:
    """A change file describes the upstream change only: the commits one fork carries it by live with that fork."""
    if "fork" in data:
        raise src.error(
            ("fork",),
            "a change file describes the upstream change only; which commits a fork carries it by is found in the "
            "fork's history or recorded with the fork",
            hint="delete this fork: block (a kind: selftest or composition moves to the top level); a fork's own "
            "commits are recorded with `python -m ci fork --record` (stack/fork.yaml carries:), or by hand there",
        )


def _unique(src: Source, loc: Loc, values: Sequence[object], noun: str) -> None:
    for i, value in enumerate(values):
        if value in values[:i]:
            raise src.error((*loc, i), f"{noun} {value} listed twice", hint="keep one")
