"""Upstream's patch tried on the fork's tree, in a scratch index (ci.upstream.scratch): each commit's `vllm/` diff
in turn, first as it is (`git apply --cached`: all or nothing), else, where it reverses cleanly, already there, else
by a three-way merge of each file (`git apply --cached --3way`) from the blobs the patch names. The first commit
that leaves conflicts stops the attempt: its files' three index stages are what the hunks are read from."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ci.upstream.git_streams import last
from ci.upstream.port_source import DIFF, PACKAGE, Unit
from ci.upstream.readiness import Verdict
from ci.upstream.scratch import Scratch

_FAILED = re.compile(r"^error: (.+?): (?:patch does not apply|does not exist in index|already exists in index)$")


@dataclass(frozen=True, kw_only=True)
class Stages:
    """A conflicted file's blobs in the scratch index: upstream's before the change, the fork's, upstream's after
    ("" where the side has no such file)."""

    path: str
    base: str
    ours: str
    theirs: str


@dataclass(frozen=True, kw_only=True)
class Step:
    unit: Unit
    how: Verdict  # "clean", "clean by three-way merge" or "in the fork" (its patch already there)
    tree: str  # the tree after it ("" where trees were not asked for)


@dataclass(frozen=True, kw_only=True)
class Outcome:
    verdict: Verdict
    detail: str = ""  # git's word where it could not try (a blob the checkout lacks)
    files: tuple[str, ...] = ()
    three_way: tuple[str, ...] = ()
    steps: tuple[Step, ...] = ()  # the commits applied (or found there), in order
    stopped: Unit | None = None  # the commit that conflicts
    conflicted: tuple[Stages, ...] = ()


def attempt(sc: Scratch, head: str, units: Sequence[Unit], *, trees: bool = False) -> Outcome:
    """Apply `units` in order onto `head`'s tree, in the scratch index."""
    sc.read_tree(head)
    files: dict[str, None] = {}
    three: dict[str, None] = {}
    steps: list[Step] = []
    for unit in units:
        patch = sc.git("diff", *DIFF, unit.parent, unit.commit, "--", PACKAGE)
        if not patch.strip():
            steps.append(Step(unit=unit, how="in the fork", tree=""))
            continue
        names = sc.git("diff", "--name-only", "-z", "--no-renames", unit.parent, unit.commit, "--", PACKAGE)
        files.update(dict.fromkeys(p for p in names.split("\0") if p))
        direct = sc.run("apply", "--cached", "--whitespace=nowarn", stdin=patch, ok=(0, 1, 128))
        how: Verdict = "clean"
        if direct.returncode != 0:
            failing = [m.group(1) for line in direct.stderr.splitlines() if (m := _FAILED.match(line))]
            if sc.run("apply", "--cached", "--check", "-R", stdin=patch, ok=(0, 1, 128)).returncode == 0:
                steps.append(Step(unit=unit, how="in the fork", tree=""))
                continue
            merged = sc.run("apply", "--cached", "--3way", "--whitespace=nowarn", stdin=patch, ok=(0, 1, 128))
            three.update(dict.fromkeys(failing))
            if merged.returncode != 0:
                stages = _unmerged(sc)
                if not stages:
                    return Outcome(
                        verdict="unknown",
                        detail=f"git apply --3way of {unit.commit[:12]} failed: {last(merged.stderr)}",
                        files=tuple(files),
                        three_way=tuple(three),
                        steps=tuple(steps),
                        stopped=unit,
                    )
                three.update(dict.fromkeys(s.path for s in stages))
                return Outcome(
                    verdict="conflicts",
                    files=tuple(files),
                    three_way=tuple(three),
                    steps=tuple(steps),
                    stopped=unit,
                    conflicted=stages,
                )
            how = "clean by three-way merge"
        steps.append(Step(unit=unit, how=how, tree=sc.git("write-tree").strip() if trees else ""))
    if not files:
        return Outcome(verdict="unknown", detail="upstream's patch changes nothing under vllm/ (tests or docs only): "
                       "nothing a build runs to port", steps=tuple(steps))  # fmt: skip
    done = [s.how for s in steps]
    verdict: Verdict = (
        "in the fork"
        if all(h == "in the fork" for h in done)
        else "clean by three-way merge"
        if "clean by three-way merge" in done
        else "clean"
    )
    return Outcome(verdict=verdict, files=tuple(files), three_way=tuple(three), steps=tuple(steps))


def _unmerged(sc: Scratch) -> tuple[Stages, ...]:
    """The scratch index's conflicted files, each with its three stages."""
    by_path: dict[str, dict[str, str]] = {}
    for entry in sc.git("ls-files", "-u", "-z").split("\0"):
        if not entry:
            continue
        meta, _, path = entry.partition("\t")
        _, blob, stage = meta.split()
        by_path.setdefault(path, {})[stage] = blob
    return tuple(
        Stages(path=p, base=s.get("1", ""), ours=s.get("2", ""), theirs=s.get("3", "")) for p, s in by_path.items()
    )
