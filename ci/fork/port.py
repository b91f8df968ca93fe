"""`python -m ci fork port X`: the port of change X (or of a follow-up X of a change the fork holds) made on a new
branch, `stackgate/port-X` from the fork's ref unless `--branch` names another; never the user's branch, index or
work tree. One commit per upstream commit (a squash merge is one), each with upstream's message, author and date,
and `(cherry picked from commit …)` as `git cherry-pick -x` writes it; then the branch is judged as `ci fork` would
judge it. `--with-prerequisites` ports first the prerequisite chain the readiness names (ci.upstream.port.prerequisites:
the PRs it is stacked on, the upstream commits that bring the files it lacks and those behind its conflicting lines,
transitively), oldest first: exactly that chain, then the change.

Where anything conflicts (or lacks a file) nothing is made (no branch, no worktree, no object kept): the notice names
the files and hunks, the chain and where it stops, and the commands that reproduce it and finish the port by hand,
through the change committed on the branch; exit 2."""

from __future__ import annotations

import argparse
from dataclasses import replace

from ci.common import signals
from ci.common.errors import StoppedError, UsageError
from ci.common.escape import command, one_line
from ci.common.tables import counted
from ci.fork import port_notice, source
from ci.stack import loader
from ci.stack.model import Stack
from ci.upstream import kept
from ci.upstream.checkout import Checkout
from ci.upstream.holds import classify
from ci.upstream.port import decision, make
from ci.upstream.port.make import Made
from ci.upstream.readiness import Readiness
from ci.upstream.state import Snapshot


def find(snap: Snapshot, wanted: str) -> Readiness:
    """The readiness of change `wanted`, or of the follow-up whose PR number it is."""
    key = wanted.removeprefix("#")
    for c in snap.changes:
        if c.change == key:
            if c.port is None:
                follow = ", ".join(f"#{f.pr} ({f.verdict})" for f in c.follow_up_ports)
                more = f"; its follow-ups: {follow}" if follow else ""
                raise UsageError(
                    f"#{key} is {c.state} in the fork: there is nothing of it to port{more}",
                    hint="ci fork lists what each change lacks; port a change that is absent or partially ported, or "
                    "a follow-up by its PR number",
                )
            return c.port
        for f in c.follow_up_ports:
            if str(f.pr) == key:
                return f
    known = [c.change for c in snap.changes if c.pr] + [str(f.pr) for c in snap.changes for f in c.follow_up_ports]
    raise UsageError(f"unknown change {wanted!r}", hint=f"one of {', '.join(known)}")


def branch_name(co: Checkout, wanted: str, given: str | None) -> str:
    """The new branch: a valid name that does not exist yet (it is never moved once it exists), and that no other
    name git reads resolves to, now or after a fetch: not a tag's, a remote-tracking branch's (`upstream/main` as a
    branch would be read as upstream's main by every later `ci fork`), a remote's, HEAD or `@`."""
    name = given or f"stackgate/port-{wanted.removeprefix('#')}"
    valid = (
        name not in ("@", "HEAD")
        and co.git("check-ref-format", "--branch", name, ok=(0, 1, 128)).strip() == name
        and co.run("check-ref-format", f"refs/heads/{name}", ok=(0, 1)).returncode == 0
    )
    if not valid:
        raise UsageError(f"--branch {name!r} is not a valid branch name", hint="see git check-ref-format --branch")
    if co.commit(f"refs/heads/{name}"):
        raise UsageError(
            f"branch {name} already exists in {co.path}: a port never moves a branch",
            hint=f"delete it ({co.command('branch', '-D', name)}) or pass --branch ANOTHER",
        )
    named = co.git("rev-parse", "--verify", "--quiet", "--symbolic-full-name", "--end-of-options", name, ok=(0, 1))
    remote = next((r for r in co.remotes() if name == r or name.startswith(f"{r}/")), None)
    if named.strip() or co.commit(name) or remote:
        what = f"the remote {remote}'s" if remote else named.strip() or "a ref"
        raise UsageError(
            f"--branch {name!r} would shadow or be ambiguous with {what} in {co.path}: git, and every later ci fork, "
            f"would read {name} as either",
            hint="pass --branch a name no ref or remote of the checkout uses (the default: stackgate/port-CHANGE)",
        )
    return name


def cmd_port(args: argparse.Namespace) -> int:
    """The port, with a stop (SIGTERM, SIGINT, SIGHUP) taken where it lands: the scratch folders go with it, and what
    was made is said (the branch, where it was made before the stop; else nothing)."""
    st = loader.load(args.stack)
    fork = source.from_command(st, args)
    named: list[str] = []  # the branch, once chosen
    try:
        with signals.raising():
            return _port(st, fork, args, named)
    except signals.Stopped as stop:
        branch = named[0] if named else ""
        made = fork.checkout.commit(f"refs/heads/{branch}") if branch else None
        if made:
            read = command(["python", "-m", "ci", "fork", "--ref", branch])
            said = f"the branch {branch} ({made[:12]}) was made and holds the port ({read} reads it)"
        else:
            said = f"nothing was made (no branch {branch})" if branch else "nothing was made"
        raise StoppedError(stop.signum, f"stopped by {stop.name}: {said}; no temporary file is left") from None


def _port(st: Stack, fork: source.Fork, args: argparse.Namespace, named: list[str]) -> int:
    snap = kept.answer(st, fork.scope)
    r = find(snap, args.change_id)
    if r.verdict == "unknown":
        raise UsageError(f"{r.label} cannot be ported here: {r.detail}", hint=r.command.removeprefix("fix: ") or "—")
    if r.verdict == "in the fork":
        raise UsageError(f"{r.label} is already in {fork.ref}: {r.detail}", hint="nothing to port")
    branch = branch_name(fork.checkout, args.change_id, args.branch)
    named.append(branch)
    todo = make.units(fork.checkout, r, args.with_prerequisites)
    made = make.make(fork.checkout, fork.commit, todo, f"refs/heads/{branch}", f"stackgate: port {r.label}")
    if not isinstance(made, Made):
        print("\n".join(one_line(line) for line in port_notice.notice(fork, r, made, branch, args.with_prerequisites)))
        return 2
    if not made.commits:
        raise UsageError(f"{r.label}: every commit of it is already in {fork.ref}", hint="nothing to port")
    said = f"{branch}: {r.label} ported onto {fork.ref} ({fork.commit[:12]}) in {counted(len(made.commits), 'commit')}:"
    print(one_line(said))
    for commit, unit in made.commits:
        print(one_line(f"  {commit[:12]} {unit.subject} (cherry picked from commit {unit.commit[:12]})"))
    print(one_line(judged(st, fork, made, r)))
    return 0


def judged(st: Stack, fork: source.Fork, made: Made, r: Readiness) -> str:
    """What `ci fork --ref BRANCH` reads there for the change (and, for a follow-up, whether it is now held)."""
    scope = replace(fork.scope, ref=made.branch, head=made.tip)
    snap = decision.assess(st, scope, classify.survey(st, scope))
    state = snap.get(r.change)
    if r.follow_up:
        held = next((f.verdict for f in state.follow_up_ports if f.pr == r.pr), "not listed")
        return f"ci fork --ref {made.branch}: #{r.change} {state.state}; follow-up #{r.pr}: {held}"
    return f"ci fork --ref {made.branch}: #{r.change} {state.state} ({state.detail})"
