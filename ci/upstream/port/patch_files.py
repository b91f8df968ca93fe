"""The files an upstream commit's patch changes, read against the fork's tree before it is applied: those the fork
holds under another name (git's rename detection between the patch's parent and the fork's tree: the fork moved
the file, or upstream did after the fork left it), followed there as `git cherry-pick` follows them; those it lacks
under any name, each with the upstream commits that created and changed it between where the fork left upstream
and the patch's parent (the prerequisites that bring it) or, where the file was there when the fork left, the fork's
commit that removed it; the files the patch adds (or moves to) that the fork already has; and the files it deletes
that the fork has changed (git merges no deletion three ways: that is a conflict of its own, never a failed patch).
Upstream's own renames are read as renames (`--find-renames`), as `git cherry-pick` reads them.

A patch that changes a file the fork lacks cannot apply (`git apply --3way` stops with "does not exist in index"):
that is a port that needs prerequisites, never a failure to report in git's words."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ci.upstream.git_streams import REC, touches
from ci.upstream.port.blame import ForkSide, Line, prerequisites
from ci.upstream.port.commits import PACKAGE, Unit
from ci.upstream.port.scratch import Scratch
from ci.upstream.readiness import ForkEdit, Missing

RENAME_LIMIT = "-l5000"  # sources x destinations git compares for inexact renames (a far fork has many of both)
_PLAIN = re.compile(r"^[A-Za-z0-9_./+@,=-]+$")  # a path git writes unquoted and a shell and sed take as it is


@dataclass(frozen=True, kw_only=True)
class Change:
    """One file of a patch: git's status letter (A, M, D, T, R, C), its path and its blobs before and after; a
    rename's (or copy's) source path."""

    status: str
    path: str
    before: str
    after: str
    old: str = ""
    kind: str = "100644"  # its mode before: a symlink (120000) is not merged with a file
    new_kind: str = "100644"  # its mode after

    @property
    def needs(self) -> str:
        """The path the patch needs in the fork's tree ("" for a file it adds)."""
        return "" if self.status == "A" else self.old or self.path

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.old, self.path) if self.old else (self.path,)


@dataclass(frozen=True, kw_only=True)
class Read:
    """A patch's files against the fork's tree (the scratch index)."""

    changes: tuple[Change, ...]
    moved: Mapping[str, str]  # upstream's path -> the fork's path, for files the fork holds under another name
    missing: tuple[str, ...]  # files it changes that the fork lacks under any name
    present: Mapping[str, str]  # files it adds (or moves to) that the fork has: path -> the fork's blob
    removed: Mapping[str, str]  # files it deletes that the fork changed: path -> the fork's blob
    retyped: Mapping[str, str]  # files it changes that the fork holds as another kind (a symlink): path -> its blob


def changes(sc: Scratch, unit: Unit) -> tuple[Change, ...]:
    """The `vllm/` files the unit's patch touches, its renames read as renames; one process."""
    out = sc.git(
        "diff", "--raw", "-z", "--find-renames", "--full-index", "--no-abbrev", unit.parent, unit.commit, "--", PACKAGE
    )
    parts = out.split("\0")
    found, i = [], 0
    while i < len(parts) and parts[i].startswith(":"):
        mode, new_mode, before, after, status = parts[i][1:].split(" ")
        if status[:1] in ("R", "C"):
            found.append(
                Change(
                    status=status[:1],
                    path=parts[i + 2],
                    before=before,
                    after=after,
                    old=parts[i + 1],
                    kind=mode,
                    new_kind=new_mode,
                )
            )
            i += 3
        else:
            found.append(
                Change(status=status[:1], path=parts[i + 1], before=before, after=after, kind=mode, new_kind=new_mode)
            )
            i += 2
    return tuple(found)


def read(sc: Scratch, unit: Unit, found: Sequence[Change]) -> Read:
    """`found` (the unit's files) against what the scratch index holds now."""
    modes = _index(sc, [p for c in found for p in c.paths])
    held = {p: blob for p, (_, blob) in modes.items()}
    wanted = [c.needs for c in found if c.needs and c.needs not in held]
    present = {c.path: held[c.path] for c in found if c.status in ("A", "R", "C") and c.path in held}
    removed = {c.path: held[c.path] for c in found if c.status == "D" and held.get(c.path, c.before) != c.before}
    retyped = {
        c.path: held[c.needs]
        for c in found
        if c.status != "D" and c.needs in modes and _link(modes[c.needs][0]) != _link(c.kind)
    }
    moved = _moved(sc, unit.parent, wanted) if wanted else {}
    return Read(
        changes=tuple(found),
        moved=moved,
        missing=tuple(p for p in wanted if p not in moved),
        present=present,
        removed=removed,
        retyped=retyped,
    )


def _link(mode: str) -> bool:
    return mode == "120000"


def _index(sc: Scratch, paths: Sequence[str]) -> dict[str, tuple[str, str]]:
    """path -> (mode, blob), for those of `paths` the scratch index holds."""
    if not paths:
        return {}
    out = sc.git("ls-files", "-s", "-z", "--", *(f":(literal){p}" for p in paths))
    found = {}
    for entry in out.split("\0"):
        meta, _, path = entry.partition("\t")
        if path:
            mode, blob = meta.split()[:2]
            found[path] = (mode, blob)
    return found


def _moved(sc: Scratch, parent: str, paths: Sequence[str]) -> dict[str, str]:
    """Of `paths` (in `parent`'s tree, not in the index): those git's rename detection pairs with a file of the index
    under another name, and that name. Only a path a shell and sed take as it is is followed."""
    # only the files the index holds and the parent does not can be where they went: git is asked of those alone
    held = set(sc.git("ls-files", "-z", "--", PACKAGE).split("\0")) - {""}
    there = set(sc.git("ls-tree", "-r", "--name-only", "-z", parent, "--", PACKAGE).split("\0"))
    added = sorted(held - there)
    if not added:
        return {}
    spec = [f":(literal){p}" for p in (*paths, *added)]
    out = sc.git(
        "diff-index", "--cached", "-M", RENAME_LIMIT, "--name-status", "-z", "--diff-filter=R", parent, "--", *spec
    )
    parts = out.split("\0")
    wanted = set(paths)
    found = {}
    for i in range(0, len(parts) - 2, 3):
        _, old, new = parts[i : i + 3]
        if old in wanted and _PLAIN.match(old) and _PLAIN.match(new):
            found[old] = new
    return found


def rewrite(patch: str, moved: Mapping[str, str]) -> str:
    """`patch` (git diff output) with each moved file's header naming the fork's path: `git apply` then changes the
    file where the fork holds it."""
    if not moved:
        return patch
    out, header = [], False
    for line in patch.split("\n"):
        if line.startswith("diff --git "):
            header = True
        elif line.startswith("@@") or line.startswith("GIT binary patch"):
            header = False
        if header:
            for old, new in moved.items():
                line = re.sub(rf"(^| )(a/|b/){re.escape(old)}(?= |$)", rf"\g<1>\g<2>{new}", line)
                line = re.sub(rf"^((?:rename|copy) from ){re.escape(old)}$", rf"\g<1>{new}", line)
        out.append(line)
    return "\n".join(out)


def sed(moved: Mapping[str, str]) -> str:
    """The same rewrite as a shell command, for a recipe run by hand: `| sed -e … ` ("" where nothing moved)."""
    exprs = []
    for old, new in moved.items():
        pattern = re.sub(r"([.\[\]*^$\\/#])", r"\\\1", old)
        exprs += [
            f"s# a/{pattern}\\( \\|$\\)# a/{new}\\1#",
            f"s# b/{pattern}$# b/{new}#",
            f"s#^\\(rename\\|copy\\) from {pattern}$#\\1 from {new}#",
        ]
    where = r"/^\(diff --git\|---\|+++\|rename from\|copy from\) /"
    return "sed " + " ".join(f"-e {shlex.quote(where + e)}" for e in exprs)


def history(
    sc: Scratch, side: ForkSide, base: str, unit: Unit, head: str, paths: Iterable[str], own: frozenset[str]
) -> tuple[Missing, ...]:
    """For each path the fork lacks: the upstream commits of `base..parent` that created and changed it (oldest
    first; one process for all), each with its PR and whether the fork holds it; where none did and the file was
    there at `base`, the fork's commit that removed it."""
    wanted = list(dict.fromkeys(paths))
    if not wanted or not base:
        return tuple(Missing(file=p, commit=unit.commit) for p in wanted)
    log = sc.git(
        "log",
        "--no-merges",
        "--full-history",
        "--no-renames",
        f"--format={REC}%H%x02%s",
        "--name-only",
        "-z",
        f"{base}..{unit.parent}",
        "--",
        *(f":(literal){p}" for p in wanted),
    )
    by_path: dict[str, list[Line]] = {p: [] for p in wanted}
    for t in touches(log):
        for path in t.files:
            if path in by_path:
                by_path[path].append(Line(commit=t.commit, subject=t.subject))
    every = [x for lines in by_path.values() for x in lines]
    said = {p.commit: p for p in prerequisites(sc.co, list({x.commit: x for x in every}.values()), side)}
    out = []
    for path in wanted:
        commits = tuple(said[x.commit] for x in reversed(by_path[path]))
        removed = None if commits else _removed(sc, base, head, path, own)
        out.append(Missing(file=path, commit=unit.commit, commits=commits, removed_by=removed))
    return tuple(out)


def _removed(sc: Scratch, base: str, head: str, path: str, own: frozenset[str]) -> ForkEdit | None:
    """The newest fork commit since `base` that removed `path` (None where `base` did not have it either)."""
    out = sc.git(
        "log",
        "-1",
        "--no-merges",
        "--full-history",
        "--no-renames",
        "--diff-filter=D",
        f"--format=%H{REC}%s",
        head,
        f"^{base}",
        "--",
        f":(literal){path}",
    )
    commit, _, subject = out.strip("\n").partition(REC)
    return ForkEdit(commit=commit, subject=subject, own=commit in own) if commit else None
