"""Why a hunk conflicts, as the kernel's backporting guide finds it (`git log -L` on the conflicting lines): the
upstream commits between where the fork left upstream and the change's parent that touched those lines (possible
prerequisites, newest first, with the PR each names and whether the fork holds it), and the fork's commits that
touched its side of them (the fork's edits in the way)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ci.upstream.checkout import Checkout
from ci.upstream.git_streams import REC, touches
from ci.upstream.port.commits import pr_of
from ci.upstream.port.scratch import Scratch
from ci.upstream.readiness import ForkEdit, Prerequisite

_PICKED = re.compile(r"cherry picked from commit ([0-9a-f]{40})")


@dataclass(frozen=True, kw_only=True)
class Line:
    commit: str
    subject: str


@dataclass(frozen=True, kw_only=True)
class ForkSide:
    """The fork's commits since it left upstream (`head ^base`): what says it holds an upstream commit."""

    subjects: frozenset[str]
    picked: frozenset[str]  # upstream commits its "(cherry picked from commit …)" lines name
    patch_ids: frozenset[str]
    own: frozenset[str]  # the fork's own commits (ci.upstream.scope.Scope.own)
    file_sets: frozenset[frozenset[str]] = frozenset()  # the files each commit changes: a patch-id needs the same


def fork_side(
    co: Checkout, head: str, since: str, own: Sequence[str], undone: frozenset[str] = frozenset()
) -> ForkSide:
    """The fork's commits since `since`: their subjects, cherry-pick lines and patch-ids, but those of a commit the
    fork took back (`undone`), which hold nothing."""
    out = co.git("log", "--no-merges", f"--format={REC}%H%x02%s%x02%b", head, f"^{since}", "--")
    subjects, picked = set(), set()
    for chunk in out.split(REC)[1:]:
        commit, subject, body = chunk.split("\x02", 2)
        if commit in undone:
            continue
        subjects.add(subject)
        picked.update(_PICKED.findall(body))
    mine = co.git("rev-list", "--no-merges", *own, "--").split()
    names = co.git(
        "log", "--no-merges", "--no-renames", f"--format={REC}%H%x02", "--name-only", "-z", head, f"^{since}", "--"
    )
    ids = co.patch_ids(head, f"^{since}")
    return ForkSide(
        subjects=frozenset(subjects),
        picked=frozenset(picked),
        patch_ids=frozenset(p for c, p in ids.items() if c not in undone),
        own=frozenset(mine),
        file_sets=frozenset(frozenset(t.files) for t in touches(names)),
    )


def touching_any(sc: Scratch, revs: Sequence[str], spans: Sequence[tuple[str, tuple[int, int]]]) -> list[Line]:
    """The commits of `revs` that changed any of `spans` ((path, (first, last)) as the range's tip has them), newest
    first: one `git log` with an -L per span (a span past its file's end: each then asked alone)."""
    if not spans:
        return []
    ranges = [f"-L{first},{last}:{path}" for path, (first, last) in spans]
    done = sc.run("log", "--no-merges", f"--format={REC}%H%x02%s", "-s", *ranges, *revs, ok=(0, 128))
    if done.returncode == 0:
        return [_line(chunk) for chunk in done.stdout.split(REC)[1:]]
    found: dict[str, Line] = {}
    for path, lines in spans:
        for x in touching(sc, revs, path, lines):
            found.setdefault(x.commit, x)
    return list(found.values())


def touching(sc: Scratch, revs: Sequence[str], path: str, lines: tuple[int, int]) -> list[Line]:
    """The commits of `revs` that changed `lines` of `path` (as the range's tip has it), newest first."""
    first, last = lines
    for span in (f"{first},{last}", f"{first},{first}"):  # a range past the file's end: its first line alone
        log = ("log", "--no-merges", f"--format={REC}%H%x02%s", "-s", f"-L{span}:{path}", *revs)
        done = sc.run(*log, ok=(0, 128))
        if done.returncode == 0:
            return [_line(chunk) for chunk in done.stdout.split(REC)[1:]]
    return []


def _line(chunk: str) -> Line:
    commit, subject = chunk.split("\n", 1)[0].split("\x02", 1)
    return Line(commit=commit, subject=subject)


def prerequisites(co: Checkout, lines: Iterable[Line], fork: ForkSide) -> tuple[Prerequisite, ...]:
    """Each commit with its PR and whether the fork holds it: a fork commit with its subject or its cherry-pick
    line, or its patch (asked only of commits that change the very files some fork commit changes: a patch-id is
    equal only then, and a far fork's prerequisites are many)."""
    found = list(lines)
    said = {x.commit for x in found if x.subject in fork.subjects or x.commit in fork.picked}
    rest = [x.commit for x in found if x.commit not in said]
    files = co.files(rest) if rest and fork.file_sets else {}
    alike = [c for c in rest if frozenset(files.get(c, ())) in fork.file_sets]
    ids = co.patch_ids(*alike, walk=False) if alike else {}
    return tuple(
        Prerequisite(
            commit=x.commit,
            subject=x.subject,
            pr=pr_of(x.subject),
            held=x.commit in said or ids.get(x.commit) in fork.patch_ids,
        )
        for x in found
    )


def fork_edits(lines: Iterable[Line], fork: ForkSide) -> tuple[ForkEdit, ...]:
    return tuple(ForkEdit(commit=x.commit, subject=x.subject, own=x.commit in fork.own) for x in lines)
