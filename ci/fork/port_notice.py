"""What `ci fork port` says where the port conflicts, as the Linux stable process's failure notices do: what was
tried and where it stopped, each conflicting file and hunk, the possible prerequisites (and whether the fork holds
each), the fork's own edits in the way, and the exact commands that reproduce the conflict in a worktree of the
user's own and finish the port by hand. Nothing was made: no branch, no worktree."""

from __future__ import annotations

from pathlib import Path

from ci.common.escape import command, one_line, quote
from ci.fork.source import Fork
from ci.upstream.port import patch_files, words
from ci.upstream.port.make import ByHand, Stopped, Unit
from ci.upstream.readiness import PORTABLE, Readiness

PACKAGE = "vllm/"  # what a port carries (ci.upstream.port.commits)


def notice(fork: Fork, r: Readiness, done: Stopped, branch: str, with_prerequisites: bool) -> list[str]:
    stopped = done.stopped
    what = f"{r.label} does not apply to {fork.ref} ({fork.commit[:12]})"
    if stopped is not None:
        what += f": upstream's {stopped.commit[:12]} {one_line(stopped.subject)!r} conflicts"
        if stopped.commit not in r.patch:
            what += " (a prerequisite)"
    if stopped is not None and done.verdict == "needs prerequisites":
        what = what.replace(" conflicts", f" changes {', '.join(done.missing)}, which the fork lacks")
    out = [f"{what}; nothing was made (no branch {branch}, no worktree).", ""]
    if done.verdict == "unknown":
        out += [f"git could not merge it: {one_line(done.detail)}", ""]
    if done.verdict == "needs prerequisites" and stopped is not None and stopped.commit in r.patch and r.missing:
        out.append("Files it needs that the fork lacks:")
        out += [f"  {line}" for line in words.missing_lines(r.missing)]
    mine = [c for c in r.conflicts if c.commit == (stopped.commit if stopped else "")]
    if mine:
        out.append("Conflicts:")
        out += [f"  {line}" for c in mine for line in words.hunk_lines(c)]
    elif done.conflicted:
        out.append("Conflicts in: " + ", ".join(one_line(s.path) for s in done.conflicted))
    if r.prerequisites:
        said = ", ".join(f"{p.commit[:12]}{f' #{p.pr}' if p.pr else ''}" for p in r.prerequisites)
        out += ["", f"Its prerequisite chain, oldest first: {said}"]
        if r.chain:
            out.append(f"  {one_line(r.chain)}")
        if r.after_prerequisites in PORTABLE and not with_prerequisites:
            out.append("  port them first: add --with-prerequisites")
    lacking = [s for s in r.stacked_on if s.lacking]
    if lacking:
        out += ["", "Stacked on: " + ", ".join(f"#{s.pr} ({s.state})" for s in lacking)]
    out += ["", "To reproduce it and finish the port by hand (in a worktree of your own):"]
    out += reproduce(fork, done, branch)
    return out


def reproduce(fork: Fork, done: Stopped, branch: str) -> list[str]:
    """The commands, each quoted for a POSIX shell: a detached worktree of the fork's ref, then every commit the port
    takes, in order, through the change itself: each applied three ways (a file the fork moved followed to its name)
    and committed as the port commits it; where one conflicts, the files to resolve first. It ends with the change
    committed on the new branch. The worktree lies beside the checkout, named by an absolute path: the user's shell
    may be anywhere."""
    where = str(Path(fork.checkout.path).resolve().parent / f"port-{fork.commit[:12]}")
    out = [
        f"  {fork.checkout.command('worktree', 'add', '--detach', where, fork.commit)}",
        f"  {command(['cd', where])}",
    ]
    todo = done.todo or tuple(ByHand(unit=u) for u in (*done.applied, *([done.stopped] if done.stopped else ())))
    stop = done.stopped.commit if done.stopped else ""
    for step in todo:
        out += _apply(step)
        if step.unit.commit == stop:
            out.append("  git status --short   # the files marked UU hold the conflicts: edit them, then")
        out += _commit(step.unit)
    read = command(["python", "-m", "ci", "fork", "--ref", branch])
    out.append(f"  {command(['git', 'switch', '-c', branch])}   # {read} then reads it")
    return out


def _apply(step: ByHand) -> list[str]:
    """The commit's `vllm/` diff, its renames as renames, applied three ways (a moved file followed); a file it
    deletes that the fork changed is removed apart, git merging no deletion."""
    unit = step.unit
    follow = f" | {patch_files.sed(dict(step.moved))}" if step.moved else ""
    apart = [f":(exclude){p}" for p in (*step.removed, *step.retyped)]
    diff = command(["git", "diff", "--binary", "--find-renames", unit.parent, unit.commit, "--", PACKAGE, *apart])
    out = [f"  {diff}{follow} | git apply --3way"]
    out += [
        f"  {command(['git', 'rm', '-q', '--', p])}   # upstream deletes it, and the fork changed it: keep it "
        f"instead ({command(['git', 'checkout', 'HEAD', '--', p])}) where those changes still matter"
        for p in step.removed
    ]
    out += [
        f"  {command(['git', 'checkout', unit.commit, '--', p])}   # a symlink on one side, a file on the other: "
        "upstream's taken"
        for p in step.retyped
    ]
    return out


def _commit(unit: Unit) -> list[str]:
    """The commit as the port makes it: upstream's message and author, and the cherry-pick line. The shell's own
    syntax (a pipe, $(...)) is written here; every value in it is a commit id, quoted as every value is."""
    c = quote(unit.commit)
    picked = quote(f"\n(cherry picked from commit {unit.commit})\n")
    return [
        f"  {command(['git', 'add', '--', PACKAGE])}",
        f"  {{ git log -1 --format=%B {c}; printf %s {picked}; }} | git commit -q -F - "
        f'--author="$(git log -1 --format=\'%an <%ae>\' {c})" --date="$(git log -1 --format=%aI {c})"',
    ]
