"""What `ci main` judges: the fork where one is configured ($STACKGATE_FORK, or stack/fork.yaml whose checkout exists)
or named (--fork, --without), else the locked stock release (and --stock says so where a fork is configured).

The fork is judged on every target that runs rows of changes imported from upstream; a target that runs none (the
cpu self-test, which judges the harness) runs its rows as they are, said in one line, unless the fork was named.
The report judges the fork all the same: its first line names it, and each change leads with its state in the fork
and whether it ports (`nox -s main` on a laptop judges the fork, not the stock release). Its base release is checked
against each target's lock before any work where its rows run here (only there is it needed); where they cannot
(this host lacks the target's hardware), the re-lock goes first in the command that runs them, with the fork's
options repeated: run anywhere, it judges the same fork.
"""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ci.common import escape
from ci.common.errors import UsageError
from ci.common.escape import command
from ci.common.tables import counted
from ci.images import build, lock
from ci.run import host
from ci.stack import plan
from ci.stack.model import Stack, Target
from ci.upstream import scope

if TYPE_CHECKING:
    from ci.fork.source import Fork


@dataclass(frozen=True, kw_only=True)
class Subject:
    fork: Fork | None = None  # the fork judged (the report's subject), whether or not a target here takes it
    over: frozenset[str] = frozenset()  # the targets whose images take the fork
    stock: bool = False  # the locked release, by --stock, where a fork is configured
    relock: dict[str, str] = field(default_factory=dict)  # target -> the command that re-locks it for the fork

    def takes(self, target: Target) -> bool:
        return self.fork is not None and target.id in self.over

    def session(self, target: Target, suite: str) -> str:
        """The command that runs the target's rows of `suite` elsewhere, judging the same fork (its lock first where
        it must be re-locked for the fork's base)."""
        command = f"nox -s {target.sessions[0]}_{suite}"
        if self.takes(target):
            assert self.fork is not None
            command += " -- " + escape.command(self.fork.scope.options)
        return f"{self.relock[target.id]}, then {command}" if target.id in self.relock else command


def resolve(st: Stack, targets: list[Target], args: argparse.Namespace, use_host: bool, p: plan.Plan) -> Subject:
    """The fork (or none) the run judges, checked against each target before any work."""
    if not scope.wanted(st, args):
        return Subject(stock=bool(getattr(args, "stock", False)))
    from ci.fork import fork_plan, source

    named = bool(args.fork or args.without)
    fork = source.from_command(st, args)
    judged_on = fork_plan.judged_on(st, p)
    over = []
    for target in targets:
        if target.id not in judged_on and not named:
            gpu = next((t for t in st.targets.values() if t.id in judged_on), None)
            there = f" (rows of its changes need a GPU target: {_session(gpu, p, fork)})" if gpu else ""
            print(
                f"{target.id} runs no imported change's rows: they run as they are; the report judges the fork "
                f"{fork.name} {fork.ref}{there}",
                flush=True,
            )
            continue
        over.append(target)
    if not over:
        print(f"judging the fork {fork.describe()} (--stock: the locked release instead)", flush=True)
        return Subject(fork=fork)
    base = fork.base  # a fork whose base release is not known stops here, saying what makes it known
    here = [t for t in over if host.present(t)]
    if use_host and here:
        raise UsageError(
            "the fork is built into the target's image, and this run has no image: it runs on this host's Python "
            "(--host, or no docker engine answers)",
            hint=f"on a bare host: {fork.scope.command('fork build --host', '--base-site', 'SITE', '--site', 'DIR')}"
            ", then run with PYTHONPATH=DIR:SITE (docs/upstream.md, 'A bare GPU host'); or start the docker engine; "
            "or --stock",
        )
    relock = {}
    for target in over:
        if target in here:
            lock.require_base(target, f"{fork.name} {fork.ref}", base.version, build.REPO_ROOT)
        elif lock.locked_vllm(target, build.REPO_ROOT) != base.version:
            relock[target.id] = escape.command(["python", "-m", "ci", "lock", target.id, "--vllm", base.version])
    print(f"judging the fork {fork.describe()} (--stock: the locked release instead)", flush=True)
    return Subject(fork=fork, over=frozenset(t.id for t in over), relock=relock)


def _session(target: Target, p: plan.Plan, fork: Fork) -> str:
    """The command that runs one of the target's suites on the fork, its options as given."""
    suite = next(r.suite for r in p.rows if r.target == target.id)
    return command(["nox", "-s", f"{target.sessions[0]}_{suite}", "--", *fork.scope.options])


def runs(p: plan.Plan, subject: Subject, args: argparse.Namespace) -> tuple[plan.Plan, list[Path]]:
    """The rows the fork can run, and the folders recording those it cannot (its absent changes' rows, never
    scheduled: the report lists them as not run, with the reason)."""
    if subject.fork is None:
        return p, []
    from ci.fork import fork_plan

    parts = fork_plan.split(p, subject.fork, args.without)
    asked = parts.absent.select(targets=args.target or (), suites=args.suite or ())  # what the report covers
    for (target, suite), n in Counter((r.target, r.suite) for r in asked.rows).items():
        print(f"not scheduled: {counted(n, 'row')} of {target}/{suite}, their change absent in the fork", flush=True)
    return parts.runs, [f.parent for f in parts.record(args.out)]


def bundle(st: Stack, target: Target, subject: Subject, args: argparse.Namespace) -> Path | None:
    """The fork's bundle for the target's image, where its rows run here (else nothing is built)."""
    if not subject.takes(target) or not host.present(target):
        return None
    from ci.images import image_verbs

    assert subject.fork is not None
    without = ["--without", args.without] if args.without else []
    print(f"\n== {escape.command(['python', '-m', 'ci', 'fork', 'bundle', *without])}", flush=True)
    name = "fork.tar.gz" if not args.without else f"without-{args.without}.tar.gz"
    return image_verbs.fork_bundle(st, target, subject.fork, args.without, args.out / "fork" / target.id / name)
