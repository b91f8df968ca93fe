"""What `ci fork port` says where the port conflicts, as the Linux stable process's failure notices do: what was
tried and where it stopped, each conflicting file and hunk, the possible prerequisites (and whether the fork holds
each), the fork's own edits in the way, and the exact commands that reproduce the conflict in a worktree of the
user's own and finish the port by hand. Nothing was made: no branch, no worktree."""

from __future__ import annotations

from pathlib import Path

from ci.escape import command, one_line, quote
from ci.fork.source import Fork
from ci.upstream import port_text
from ci.upstream.port_make import Stopped, Unit
from ci.upstream.readiness import PORTABLE, Readiness

PACKAGE = "vllm/"  # what a port carries (ci.upstream.port_source)


def notice(fork: Fork, r: Readiness, done: Stopped, branch: str, with_prerequisites: bool) -> list[str]:
    stopped = done.stopped
    what = f"{r.label} does not apply to {fork.ref} ({fork.commit[:12]})"
    if stopped is not None:
        what += f": upstream's {stopped.commit[:12]} {one_line(stopped.subject)!r} conflicts"
        if stopped.commit not in r.patch:
            what += " (a prerequisite)"
    out = [f"{what}; nothing was made (no branch {branch}, no worktree).", ""]
    if done.verdict == "unknown":
        out += [f"git could not merge it: {one_line(done.detail)}", ""]
    mine = [c for c in r.conflicts if c.commit == (stopped.commit if stopped else "")]
    if mine:
        out.append("Conflicts:")
        out += [f"  {line}" for c in mine for line in port_text.hunk_lines(c)]
    elif done.conflicted:
        out.append("Conflicts in: " + ", ".join(one_line(s.path) for s in done.conflicted))
    if r.prerequisites and not with_prerequisites:
        said = ", ".join(f"{p.commit[:12]}{f' #{p.pr}' if p.pr else ''}" for p in r.prerequisites)
        after = f" (with them first: {r.after_prerequisites})" if r.after_prerequisites else ""
        out += ["", f"Possible prerequisites the fork lacks, oldest first: {said}{after}"]
        if r.after_prerequisites in PORTABLE:
            out.append("  port them first: add --with-prerequisites")
    lacking = [s for s in r.stacked_on if s.lacking]
    if lacking:
        out += ["", "Stacked on: " + ", ".join(f"#{s.pr} ({s.state})" for s in lacking)]
    out += ["", "To reproduce it and finish the port by hand (in a worktree of your own):"]
    out += reproduce(fork, list(done.applied), stopped, branch)
    return out


def reproduce(fork: Fork, applied: list[Unit], stopped: Unit | None, branch: str) -> list[str]:
    """The commands, each quoted for a POSIX shell: a detached worktree of the fork's ref, the commits that apply
    committed as the port commits them, the conflicting one applied three ways for the conflicts to be resolved. The
    worktree lies beside the checkout, named by an absolute path: the user's shell may be anywhere."""
    where = str(Path(fork.checkout.path).resolve().parent / f"port-{fork.commit[:12]}")
    out = [
        f"  {fork.checkout.command('worktree', 'add', '--detach', where, fork.commit)}",
        f"  {command(['cd', where])}",
    ]
    for unit in applied:
        out += _apply(unit) + _commit(unit)
    if stopped is not None:
        out += _apply(stopped)
        out.append("  git status --short   # the files marked UU hold the conflicts: edit them, then")
        out += _commit(stopped)
    read = command(["python", "-m", "ci", "fork", "--ref", branch])
    out.append(f"  {command(['git', 'switch', '-c', branch])}   # {read} then reads it")
    return out


def _apply(unit: Unit) -> list[str]:
    diff = command(["git", "diff", "--binary", unit.parent, unit.commit, "--", PACKAGE])
    return [f"  {diff} | git apply --3way"]


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
