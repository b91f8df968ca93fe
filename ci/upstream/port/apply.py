"""Upstream's patch tried on the fork's tree, in a scratch index (ci.upstream.port.scratch): each commit's `vllm/` diff
in turn, its files read against the tree first (ci.upstream.port.patch_files: a file the fork holds under another name
is followed there; one it lacks stops the attempt, as needing prerequisites), then applied as it is (`git apply
--cached`: all or nothing), else, where it reverses cleanly, found already there, else by a three-way merge of each file
(`git apply --cached --3way`) from the blobs the patch names. The first commit that leaves conflicts stops the attempt:
its files' three index stages are what the hunks are read from. A file the patch adds that the fork has already (with
other contents), one it deletes that the fork changed, and one the fork holds as a symlink where upstream has a file (or
the other way) conflict as a whole (git merges none of them)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ci.upstream.git_streams import last
from ci.upstream.port import patch_files
from ci.upstream.port.commits import PORT_DIFF, Unit
from ci.upstream.port.scratch import Scratch
from ci.upstream.readiness import Verdict

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
    how: Verdict  # "clean", "clean by three-way merge", "in the fork" (its patch already there); "conflicts": forced
    tree: str  # the tree after it ("" where trees were not asked for)
    moved: tuple[tuple[str, str], ...] = ()  # (upstream's path, the fork's) of the files followed to another name
    forced: tuple[str, ...] = ()  # the files it conflicted in (or lacked), taken as upstream has them to go on


@dataclass(frozen=True, kw_only=True)
class Outcome:
    verdict: Verdict
    detail: str = ""  # git's word where it could not try (a blob the checkout lacks)
    files: tuple[str, ...] = ()
    three_way: tuple[str, ...] = ()
    steps: tuple[Step, ...] = ()  # the commits applied (or found there), in order
    stopped: Unit | None = None  # the commit that conflicts, or needs files the fork lacks
    conflicted: tuple[Stages, ...] = ()
    missing: tuple[str, ...] = ()  # needs prerequisites: the files the stopped commit changes that the fork lacks
    moved: tuple[tuple[str, str], ...] = ()  # every file followed to the fork's name, in order


def attempt(sc: Scratch, head: str, units: Sequence[Unit], *, trees: bool = False) -> Outcome:
    """Apply `units` in order onto `head`'s tree, in the scratch index."""
    sc.read_tree(head)
    return resume(sc, units, trees=trees)


def resume(
    sc: Scratch,
    units: Sequence[Unit],
    *,
    trees: bool = False,
    done: Sequence[Step] = (),
    on_step: Callable[[Step], None] | None = None,
    force: frozenset[str] = frozenset(),
) -> Outcome:
    """Apply `units` in order onto the scratch index as it is (`done`: the steps that made it so); `on_step` is
    told of each commit applied (or found there), the index then holding it. A commit in `force` that conflicts (or
    lacks files) does not stop it: those files are taken as upstream has them after the commit, as a maintainer
    resolving the conflict upstream's way would, and the rest goes on (what the commits after it need is found so)."""
    files: dict[str, None] = {}
    three: dict[str, None] = {}
    moved: dict[tuple[str, str], None] = dict.fromkeys(m for s in done for m in s.moved)
    steps: list[Step] = list(done)
    for unit in units:
        found = patch_files.changes(sc, unit)
        if not found:
            steps.append(Step(unit=unit, how="in the fork", tree=""))
            if on_step is not None:
                on_step(steps[-1])
            continue
        files.update(dict.fromkeys(c.path for c in found))
        read = patch_files.read(sc, unit, found)
        followed = tuple(read.moved.items())
        moved.update(dict.fromkeys(followed))
        lacking = [c for c in found if c.needs in read.missing]
        if read.missing and unit.commit not in force:
            return Outcome(
                verdict="needs prerequisites",
                files=tuple(files),
                three_way=tuple(three),
                steps=tuple(steps),
                stopped=unit,
                missing=read.missing,
                moved=tuple(moved),
            )
        taken = [
            c for c in found if c not in lacking and (c.path not in read.present or read.present[c.path] != c.after)
        ]
        clash = [c for c in taken if c.path in read.present]  # added upstream, already the fork's with other lines
        gone = [c for c in taken if c.path in read.removed]  # deleted upstream, changed in the fork
        kinds = [c for c in taken if c.path in read.retyped]  # a symlink in the fork where upstream has a file
        apart = {*read.present, *read.removed, *read.retyped}
        apply = [p for c in taken if c.path not in apart for p in c.paths]
        how: Verdict = "in the fork"  # where every file it adds is the fork's already, as upstream has it
        stages: tuple[Stages, ...] = ()
        if apply:
            patch = sc.git("diff", *PORT_DIFF, unit.parent, unit.commit, "--", *(f":(literal){p}" for p in apply))
            how, merged, stages, said = _apply(sc, patch_files.rewrite(patch, read.moved))
            three.update(dict.fromkeys(merged))
            if how == "unknown":
                return Outcome(
                    verdict="unknown",
                    detail=f"upstream's {unit.commit[:12]} cannot be merged here: {said}",
                    files=tuple(files),
                    three_way=tuple(three),
                    steps=tuple(steps),
                    stopped=unit,
                    moved=tuple(moved),
                )
        stages += tuple(Stages(path=c.path, base="", ours=read.present[c.path], theirs=c.after) for c in clash)
        stages += tuple(Stages(path=c.path, base=c.before, ours=read.removed[c.path], theirs="") for c in gone)
        stages += tuple(Stages(path=c.path, base=c.before, ours=read.retyped[c.path], theirs=c.after) for c in kinds)
        if stages:
            three.update(dict.fromkeys(s.path for s in stages))
            if unit.commit not in force:
                return Outcome(
                    verdict="conflicts",
                    files=tuple(files),
                    three_way=tuple(three),
                    steps=tuple(steps),
                    stopped=unit,
                    conflicted=stages,
                    moved=tuple(moved),
                )
        forced = (*(s.path for s in stages), *read.missing)
        if forced:
            whole = any(not (s.base or s.ours or s.theirs) for s in stages)  # git merged none of it: take it all
            _upstreams(sc, unit, apply if whole else [s.path for s in stages], lacking)
            how = "conflicts"
        tree = sc.git("write-tree").strip() if trees and how != "in the fork" else ""
        steps.append(Step(unit=unit, how=how, tree=tree, moved=followed, forced=forced))
        if on_step is not None:
            on_step(steps[-1])
    if not files:
        return Outcome(
            verdict="unknown",
            detail="upstream's patch changes nothing under vllm/ (tests or docs only): nothing a build runs to port",
            steps=tuple(steps),
        )
    done_how = [s.how for s in steps]
    verdict: Verdict = (
        "conflicts"
        if "conflicts" in done_how
        else "in the fork"
        if all(h == "in the fork" for h in done_how)
        else "clean by three-way merge"
        if "clean by three-way merge" in done_how
        else "clean"
    )
    return Outcome(verdict=verdict, files=tuple(files), three_way=tuple(three), steps=tuple(steps), moved=tuple(moved))


def _upstreams(sc: Scratch, unit: Unit, paths: Sequence[str], lacking: Sequence[patch_files.Change]) -> None:
    """`paths` (conflicting) and the files of `lacking` set in the scratch index as upstream has them after `unit`:
    its blob and mode, or no entry where it deleted the file."""
    wanted = [*paths, *(c.path for c in lacking), *(c.old for c in lacking if c.status == "R")]
    out = sc.git("ls-tree", "-z", unit.commit, "--", *(f":(literal){p}" for p in dict.fromkeys(wanted)))
    after = {}
    for entry in out.split("\0"):
        meta, _, path = entry.partition("\t")
        if path:
            mode, _, blob = meta.split()
            after[path] = (mode, blob)
    info = "".join(
        f"{after[p][0]} {after[p][1]}\t{p}\n" if p in after else f"0 {'0' * 40}\t{p}\n" for p in dict.fromkeys(wanted)
    )
    sc.git("update-index", "--index-info", stdin=info)


def _apply(sc: Scratch, patch: str) -> tuple[Verdict, tuple[str, ...], tuple[Stages, ...], str]:
    """One patch onto the scratch index: as it is, else found already there (it reverses), else three ways. How it
    went, the files that took a three-way merge, the stages of those left conflicting, and git's last word where the
    merge could not be tried ("unknown": a blob the checkout lacks)."""
    direct = sc.run("apply", "--cached", "--whitespace=nowarn", stdin=patch, ok=(0, 1, 128))
    if direct.returncode == 0:
        return "clean", (), (), ""
    if sc.run("apply", "--cached", "--check", "-R", stdin=patch, ok=(0, 1, 128)).returncode == 0:
        return "in the fork", (), (), ""
    failing = tuple(m.group(1) for line in direct.stderr.splitlines() if (m := _FAILED.match(line)))
    merged = sc.run("apply", "--cached", "--3way", "--whitespace=nowarn", stdin=patch, ok=(0, 1, 128))
    if merged.returncode == 0:
        return "clean by three-way merge", failing, (), ""
    said = last(merged.stderr)
    stages = _unmerged(sc)
    if stages:
        return "conflicts", failing, stages, said
    if "lacks the necessary blob" in merged.stderr or "unable to read" in merged.stderr:
        return "unknown", failing, (), said
    # no stages, yet no merge: a file git merges only whole (binary, a mode or a symlink); it conflicts as a whole
    named = [m.group(1) for line in merged.stderr.splitlines() if (m := _FAILED.match(line))] or list(failing)
    return "conflicts", failing, tuple(Stages(path=p, base="", ours="", theirs="") for p in named), said


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
