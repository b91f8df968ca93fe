"""Where a three-way merge conflicts, in line numbers: the changes each side made to the common file (`git diff -U0`
of the base blob against the fork's and against upstream's), grouped as git's merge (xdiff) groups them: changes
that overlap or touch in the base file conflict, unless both sides made the same change. Each group is one hunk,
with its lines in upstream's file before the change and in the fork's file."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ci.upstream.port.apply import Stages
from ci.upstream.port.scratch import Scratch

_HEAD = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True, kw_only=True)
class Change:
    """One -U0 hunk: base lines [start, end) (0-based) replaced by the side's lines [new, new + count)."""

    side: str  # "ours" (the fork) or "theirs" (upstream's change)
    start: int
    end: int
    new: int
    count: int
    body: str  # its - and + lines, to tell the same change on both sides


@dataclass(frozen=True, kw_only=True)
class Region:
    upstream: tuple[int, int]  # 1-based first and last line in the base (upstream's file before the change)
    fork: tuple[int, int]  # 1-based first and last line in the fork's file


def regions(sc: Scratch, stages: Stages) -> list[Region]:
    """The conflicting regions of one file. A file one side lacks (added on one side, deleted on the other)
    conflicts as a whole."""
    if not (stages.base and stages.ours and stages.theirs):
        ours = _lines(sc, stages.ours) if stages.ours else 0
        base = _lines(sc, stages.base) if stages.base else 0
        return [Region(upstream=(1, max(base, 1)), fork=(1, max(ours, 1)))]
    ours = changes(sc, stages.base, stages.ours, "ours")
    theirs = changes(sc, stages.base, stages.theirs, "theirs")
    return group(ours, theirs)


def changes(sc: Scratch, a: str, b: str, side: str) -> list[Change]:
    """The -U0 hunks of blob `a` against blob `b`, in the base's (a's) 0-based lines."""
    out = sc.git("diff", "-U0", "--no-color", "--no-ext-diff", "--no-textconv", "--diff-algorithm=myers", a, b)
    heads: list[tuple[int, int, int, int]] = []
    bodies: list[list[str]] = []
    for line in out.splitlines():
        if m := _HEAD.match(line):
            old_start, old_n = int(m.group(1)), int(m.group(2) or 1)
            new_start, new_n = int(m.group(3)), int(m.group(4) or 1)
            # a hunk with no old lines inserts after line old_start: its place is old_start, 0-based
            heads.append(
                (old_start if old_n == 0 else old_start - 1, old_n, new_start if new_n == 0 else new_start - 1, new_n)
            )
            bodies.append([])
        elif bodies and line[:1] in ("+", "-"):  # (the ---/+++ header comes before the first hunk)
            bodies[-1].append(line)
    return [
        Change(side=side, start=start, end=start + n, new=new, count=count, body="\n".join(body))
        for (start, n, new, count), body in zip(heads, bodies, strict=True)
    ]


def group(ours: list[Change], theirs: list[Change]) -> list[Region]:
    """Changes chained where they overlap or touch in the base; a chain holding both sides conflicts."""
    every = sorted([*ours, *theirs], key=lambda c: (c.start, c.end))
    chains: list[list[Change]] = []
    for c in every:
        if chains and c.start <= max(x.end for x in chains[-1]):
            chains[-1].append(c)
        else:
            chains.append([c])
    out = []
    for chain in chains:
        sides = {c.side for c in chain}
        if sides != {"ours", "theirs"} or _same(chain):
            continue
        lo, hi = min(c.start for c in chain), max(c.end for c in chain)
        before = sum(c.count - (c.end - c.start) for c in ours if c.end <= lo and c not in chain)
        mine = [c for c in chain if c.side == "ours"]
        f_lo = lo + before
        f_hi = hi + before + sum(c.count - (c.end - c.start) for c in mine)
        out.append(Region(upstream=_span(lo, hi), fork=_span(f_lo, f_hi)))
    return out


def _same(chain: list[Change]) -> bool:
    """Both sides made one and the same change: the merge takes it once."""
    if len(chain) != 2:
        return False
    a, b = chain
    return (a.start, a.end, a.body) == (b.start, b.end, b.body)


def _span(lo: int, hi: int) -> tuple[int, int]:
    """0-based [lo, hi) as 1-based first and last line; an empty range (an insertion) as the lines around it."""
    if hi > lo:
        return lo + 1, hi
    return max(lo, 1), lo + 1


def _lines(sc: Scratch, blob: str) -> int:
    return sc.git("cat-file", "blob", blob).count("\n")
