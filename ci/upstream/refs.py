"""A ref as the user types it, in a fork's checkout: a branch, tag or commit it resolves, or a branch that exists
only as one remote's (a fresh clone holds every branch but its default as origin/NAME), taken and said in one line
as `git switch` says it; an ambiguous name lists the remotes that have it; a name nothing resolves lists the branches
there are."""

from __future__ import annotations

import sys

from ci.common.errors import UsageError
from ci.upstream.checkout import Checkout


def commit(co: Checkout, ref: str, flag: str) -> str:
    found = co.commit(ref)
    if found is None:
        known = co.refs()
        shown = ", ".join(known[:10]) + (", …" if len(known) > 10 else "") if known else "none"
        raise UsageError(
            f"{flag} {ref!r} names no commit in {co.path}",
            hint=f"pass {flag} a branch, tag or commit it holds (branches here: {shown}), or fetch it",
        )
    return found


def as_typed(co: Checkout, ref: str, flag: str) -> str:
    """The ref as a user types it: a branch that exists only as one remote's (`origin/NAME`, as a fresh clone has
    every branch but its default) is that one, said in one line as `git switch` says it; where several remotes have
    it, the candidates are listed. Anything the checkout resolves is taken as it is."""
    if co.commit(ref) is not None or ref.startswith("-"):
        return ref
    out = co.git("for-each-ref", "--format=%(refname:short)", "refs/remotes")
    remotes = co.remotes()
    found = [
        name for name in out.split("\n") if name and name.split("/", 1)[0] in remotes and name.split("/", 1)[-1] == ref
    ]
    if len(found) > 1:
        raise UsageError(
            f"{flag} {ref!r} names no branch in {co.path}, and {len(found)} remotes have one of that name: "
            f"{', '.join(found)}",
            hint=f"pass {flag} one of them: {' or '.join(f'{flag} {f}' for f in found)}",
        )
    if found:
        print(
            f"{flag} {ref}: no branch of that name here; taking {found[0]}, the one remote branch of that name",
            file=sys.stderr,
        )
        return found[0]
    return ref
