"""Whether upstream has settled a change, before a fork ports it: merged (when, and whether the upstream ref here
holds the merge), still open and moving, or closed; the follow-ups merged after it; a revert on upstream's main
(a commit after the merge naming it: git's "This reverts commit <id>", or a subject `Revert "<its subject>"`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from ci.stack.change import FollowUp, Upstream
from ci.upstream.checkout import Checkout
from ci.upstream.git_streams import REC
from ci.upstream.readiness import Stability
from ci.upstream.scope import Scope


def of_change(scope: Scope, up: Upstream, merge: str, subject: str) -> Stability:
    """`merge`: upstream's merge commit, full, where the checkout holds it ("" else); `subject`: its subject."""
    if up.state != "merged":
        if up.state == "open":
            return Stability(upstream=f"open upstream (as of {up.as_of}): still moving, not settled")
        instead = ", ".join(f"#{p}" for p in up.superseded_by)
        road = f"; upstream took another road: {instead}" if instead else ""
        return Stability(upstream=f"closed unmerged (as of {up.as_of}){road}")
    return _merged(scope, up.merge_commit or "", up.merged_on, merge, subject, up.follow_ups)


def of_follow_up(scope: Scope, f: FollowUp, merge: str, subject: str) -> Stability:
    if not f.merge_commit:
        return Stability(upstream="not merged upstream: still moving")
    return _merged(scope, f.merge_commit, f.merged_on, merge, subject, ())


def _merged(
    scope: Scope, short: str, on: dt.date | None, merge: str, subject: str, follow_ups: Sequence[FollowUp]
) -> Stability:
    when = f" on {on}" if on else ""
    where = ""
    reverted = ""
    if merge and scope.upstream:
        held = scope.co.is_ancestor(merge, scope.upstream)
        where = f", on {scope.upstream_ref}" if held else f", not on {scope.upstream_ref} here"
        if held and (hit := reverts(scope.co, scope.upstream, merge, subject)):
            reverted = f"reverted upstream by {hit[0][:12]} {hit[1]!r}"
    after = tuple(
        f"{f.ref.rsplit('/', 1)[-1]} merged{f' on {f.merged_on}' if f.merged_on else ''}, after it: {f.what}"
        for f in follow_ups
        if f.merge_commit and (on is None or f.merged_on is None or f.merged_on >= on)
    )
    return Stability(
        upstream=f"merged{when} as {short}{where}", follow_ups=after, reverted=reverted, stable=not reverted
    )


def reverts(co: Checkout, tip: str, merge: str, subject: str) -> tuple[str, str] | None:
    """The newest commit after `merge` up to `tip` that reverts it, or None; one process."""
    greps = [f"--grep=This reverts commit {merge}"] + ([f'--grep=Revert "{subject}'] if subject else [])
    out = co.git("log", "--fixed-strings", f"--format={REC}%H%x02%s", *greps, tip, f"^{merge}", "--")
    for chunk in out.split(REC)[1:]:
        commit, _, said = chunk.strip("\n").partition("\x02")
        return commit, said
    return None
