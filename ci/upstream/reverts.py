"""What the fork took back: a commit of its own that reverts a patch (its message says `This reverts commit X.`, as
`git revert` writes it, or its patch is X's reversed, whatever its message) undoes X's presence; a patch applied again
after its revert is present again. Counted per patch (its patch-id) in the order the fork's own commits were made,
so a verdict never says "ported" of a change the fork carried and then reverted, nor "in the fork" of a follow-up."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ci.upstream.checkout import Checkout

_REVERTS = re.compile(r"This reverts commit ([0-9a-f]{7,40})")
_SEP = "\x01"


@dataclass(frozen=True)
class Undone:
    """The commits whose patch the fork's own commits take back (and do not apply again), and those patches' ids."""

    commits: frozenset[str] = field(default_factory=frozenset)
    patch_ids: frozenset[str] = field(default_factory=frozenset)


def undone(co: Checkout, head: str, own: Sequence[str], fwd: Mapping[str, str], wanted: Mapping[str, str]) -> Undone:
    """`own`: the fork's own commits as `git log` arguments, `fwd` their patch-ids (commit -> id); `wanted`: the
    upstream commits whose presence is asked about (a change's merge and PR commits, a follow-up's merge) and their
    patch-ids. One of those the ref reaches through history counts as applied once, before the fork's own commits.
    Reverse patch-ids are computed for the commits that matter alone: `wanted`'s, the fork's own that carry one of
    their patches, and those a revert's message names."""
    order = co.git("rev-list", "--reverse", "--topo-order", "--no-merges", *own, "--").split()
    if not order:
        return Undone()
    named: dict[str, str] = {}  # a reverting commit -> the id its message names
    said = co.git("log", "--no-merges", "--grep=This reverts commit", f"--format=%H%n%B{_SEP}", *own, "--")
    for chunk in said.split(_SEP):
        commit, _, body = chunk.strip().partition("\n")
        if m := _REVERTS.search(body):
            named[commit] = m.group(1)
    reverted = {c for c in order if any(c.startswith(n) for n in named.values())}
    patches = set(wanted.values()) | {fwd[c] for c in reverted if c in fwd}
    key_of = {**wanted, **{c: fwd[c] for c in order if fwd.get(c) in patches}}  # commit -> the patch it applies
    if not key_of:
        return Undone()
    back = {rid: key_of[c] for c, rid in co.patch_ids(*key_of, walk=False, reverse=True).items()}
    mine = set(order)
    count = {p: 0 for p in patches}
    for c, p in wanted.items():
        if c not in mine and co.is_ancestor(c, head):
            count[p] = 1
    taken: set[str] = set()  # the patches some commit of the fork takes back (others are absent, not undone)
    for c in order:
        target = next((p for k, p in key_of.items() if c in named and k.startswith(named[c])), None)
        target = target or back.get(fwd.get(c, ""))
        if target is not None:
            count[target] = count.get(target, 0) - 1
            taken.add(target)
        elif fwd.get(c) in count:
            count[fwd[c]] += 1
    gone = {p for p in taken if count.get(p, 0) <= 0}
    return Undone(commits=frozenset(c for c, p in key_of.items() if p in gone), patch_ids=frozenset(gone))
