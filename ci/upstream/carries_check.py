"""stack/fork.yaml `carries:` records checked against the fork's history: a record names the fork's own commits,
never one its base release or upstream's main already holds (else that change would read "ported", its rows be
scheduled, and `--without` revert a file of the base release)."""

from __future__ import annotations

from collections.abc import Mapping

from ci.stack import yaml_lines
from ci.stack.model import Carried, Stack
from ci.upstream.checkout import Checkout
from ci.upstream.release import Base


def own_commits(
    st: Stack, co: Checkout, records: Mapping[str, Carried], base: Base | None, upstream: str | None
) -> None:
    """Every commit fork.yaml records carrying a change is one of the fork's own, where the checkout holds it: one
    the base release or upstream's main reaches is not the fork's work (it would make the change "ported", schedule
    its rows, and have --without revert a file of the base release). A record the checkout lacks stands: a rebase
    may have dropped it, and its patch-id is compared instead."""
    full = co.resolve(c for rec in records.values() for c in rec.commits)
    bounds = [(f"its base {base.ref}", base.commit)] if base else []
    bounds += [("upstream's main", upstream)] if upstream else []
    for change, rec in records.items():
        for i, commit in enumerate(rec.commits):
            found = full.get(commit)
            where = next((name for name, tip in bounds if found and co.is_ancestor(found, tip)), None)
            if where is not None:
                src = yaml_lines.load(st.root / "fork.yaml")
                raise src.error(
                    ("fork", "carries", change, "commits", i),
                    f"commit {commit} is in the history of {where}, not one of the fork's own commits: no record of "
                    f"the fork carrying #{change} can name it",
                    hint="record the fork's commits that carry the change (python -m ci fork --record finds them), "
                    "or drop the record where the base release holds the change",
                )
