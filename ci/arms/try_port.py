"""`ci main --try-port X[,Y] [--runs N] [--aa] [--keep-port-branch NAME]`: a change the fork lacks, tried as a port
before anyone makes it, judged by its own acceptance criteria on the fork's build.

Each change named must port cleanly onto the fork's ref, as it is or after its prerequisite chain (ci fork says which);
one that does not stops the command before anything is built, with its readiness (what conflicts, what it needs, where
the chain stops) and the fix (exit 2). Each port is made on a scratch ref of stackgate's own (ci.fork.port_trial: never
a branch; the user's branches, index and work tree stay as they were), pinned, so that the same fork commit and upstream
commits make the same commit ids wherever it runs; it is removed when the command ends, unless --keep-port-branch NAME
keeps it as a branch. Then, as `--compare-without` does (ci.arms.compare_without): the fork with each port is built (an
image, or with --host a site folder over --base-site), and the fork as it is (the side without the change: the fork
itself); each build warmed once, untimed; the arms run interleaved, --runs times over: each port's rows on its build
(side `port`), the same rows on the fork (side `fork`), and with --aa the fork again (the A/A arm, the noise floor);
every run alone on its GPU. The report judges each change on the port build, its timing criteria against the fork's
build past the A/A floor, and leads with it: "not in the fork; tried as a port (clean, 2 prerequisites): ready", per
target, with the command that makes the port for real where it held, and what failed where not. report.json records the
port's commits and prerequisites (ids) and the builds compared.

The candidates and their rows are counted before anything runs ("2 candidates, 8 rows on H200"); --target, --suite and
--rows narrow them as everywhere."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ci.arms import compare_without
from ci.arms.compare_without import AA, Part, Side
from ci.common import options
from ci.common.errors import NOTHING_RAN, StoppedError, UsageError
from ci.common.escape import command, one_line
from ci.common.signals import Stopped, raising
from ci.stack import plan
from ci.stack.model import Stack, Target
from ci.upstream import kept
from ci.upstream.port.tried import Tried, triable

if TYPE_CHECKING:
    from ci.fork.source import Fork
    from ci.upstream.state import Snapshot

PORT, FORK = "port", "fork"
FAILED_ROWS = 1  # a run whose rows failed: on the fork as it is, the change's absence is that finding


def main(st: Stack, args: argparse.Namespace, target: Target, rows: plan.Plan, use_host: bool) -> int:
    from ci.fork import port_trial, source

    if args.bundles:
        raise UsageError("--try-port makes each port from the fork's checkout", hint="leave out --bundles")
    fork = source.from_command(st, args)
    snap = kept.answer(st, fork.scope)  # each change's state and port readiness, as `ci fork` says them
    wanted = [port_trial.readiness(snap, x) for x in dict.fromkeys(args.try_port)]
    refused = [r for r in wanted if not triable(r)]
    if refused:  # before anything is made or built: the readiness of each, and its fix
        said = [port_trial.refusal(snap, r) for r in refused]
        for lines, fix in said:
            print("\n".join(lines + ([f"  fix: {fix}"] if len(said) > 1 else [])), flush=True)
        names = ", ".join(f"#{r.change}" for r in refused)
        raise UsageError(
            f"--try-port: {names} {'does' if len(refused) == 1 else 'do'} not port cleanly onto {fork.name} "
            f"{fork.ref} ({fork.commit[:12]}), as it is or after a prerequisite chain: nothing was made or built",
            hint=said[0][1] if len(said) == 1 else "each change's fix is said above",
        )
    keep = port_trial.keep_name(fork, args.keep_port_branch, wanted)
    if args.port_tip and len(wanted) != 1:
        raise UsageError("--port-tip names the tip of one port", hint="give --try-port one change")
    timed = {r.change: rows.select(targets=[target.id], changes=[r.change], suites=args.suite) for r in wanted}
    for change, p in timed.items():
        if not p.rows:
            raise UsageError(
                f"--try-port {change}: no row of #{change} planned on {target.id}"
                + (f" in suite {', '.join(args.suite)}" if args.suite else ""),
                hint=f"python -m ci plan --change {change} lists its rows and targets",
            )
    print(port_trial.tally({c: p.rows for c, p in timed.items()}, {target.id: target.short}), flush=True)
    compare_without.preflight(args, target, use_host, "--try-port", "--try-ports")
    made: list[Tried] = []
    try:
        with raising():
            for r in wanted:
                t = port_trial.make(fork, r)
                made.append(t)
                port_trial.expect(t, args.port_tip)
                _step(f"the port of #{t.change} ({t.said}) on {t.ref}")
                for commit, upstream in t.commits:
                    print(f"  {commit[:12]} (cherry picked from commit {upstream[:12]})", flush=True)
            codes = _protocol(st, args, target, fork, made, timed, use_host)
    except Stopped as stop:
        raise StoppedError(stop.signum, f"stopped by {stop.name}: the scratch refs are removed") from None
    finally:
        done = [port_trial.finish(fork, t, keep) for t in made]  # the scratch refs go, whatever happened
        for scratch, t in zip(made, done, strict=True):
            left = f"kept as branch {t.ref}" if t.kept else f"{scratch.ref} removed"
            print(one_line(f"the port of #{t.change} (tip {t.tip[:12]}): {left}"), flush=True)
    return _report(args, target, snap, done, codes)


def _protocol(
    st: Stack,
    args: argparse.Namespace,
    target: Target,
    fork: Fork,
    made: list[Tried],
    timed: dict[str, plan.Plan],
    use_host: bool,
) -> dict[str, list[int]]:
    """The fork's build and each port's, then the arms: each port's rows on its build, the same rows on the fork,
    and with --aa the fork again."""
    every = plan.Plan(tuple(r for p in timed.values() for r in p.rows), ())
    base = compare_without.build(st, args, target, fork, label=FORK, name=FORK, use_host=use_host, flag="--try-port")
    ports = tuple(
        Part(
            arm=compare_without.build(
                st,
                args,
                target,
                fork,
                label=PORT,
                name=f"port-{t.change}",
                use_host=use_host,
                flag="--try-port",
                tried=t,
            ),
            rows=timed[t.change],
            name=t.change,
        )
        for t in made
    )
    sides = [Side(label=PORT, parts=ports), Side(label=FORK, parts=(Part(arm=base, rows=every),))]
    if args.aa:
        sides.append(Side(label=AA, parts=(Part(arm=base, rows=every),)))
    return compare_without.protocol(st, args, target, every.rows, sides, sides[:2], use_host)


def _report(
    args: argparse.Namespace, target: Target, snap: Snapshot, done: list[Tried], codes: dict[str, list[int]]
) -> int:
    from ci.report import write as report

    out = args.out
    labels = [PORT, FORK, *([AA] if args.aa else [])]
    paths = [out / "arms" / label for label in labels]
    _step(f"{command(['python', '-m', 'ci', 'report', paths[0]])} --compare ... -> {out / 'report'}")
    rep = report.build(
        args.stack,
        [paths[0]],
        None,
        targets=[target.id],
        changes=[t.change for t in done],
        compare_paths=paths[1:],
        labels=labels,
        subject=snap,
        tried=done,
    )
    report.write(rep, out / "report")
    print(report.summary(rep, out / "report"))
    # the port's runs say whether it holds; the fork's rows of a change it lacks fail by that absence (the finding
    # the port is judged against), so only what kept them from running at all counts there
    failing = [c for c in codes[PORT] if c not in (0, NOTHING_RAN)]
    failing += [c for label in (FORK, AA) for c in codes.get(label, ()) if c not in (0, NOTHING_RAN, FAILED_ROWS)]
    return max(failing) if failing else 0


def _step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def add_options(m: argparse.ArgumentParser) -> None:
    """`ci main`'s options for a port tried (the protocol's own: --runs, --aa, --host --base-site, ... are shared)."""
    m.add_argument(
        "--try-port",
        action=options.Csv,
        default=[],
        metavar="CHANGE",
        help="try the port of this change the fork lacks (its prerequisite chain first, where one is needed) on a "
        "scratch ref, and judge it by its rows on the fork with the port against the fork as it is (--runs each, "
        "interleaved, --aa); exit 2, building nothing, where it does not port cleanly (repeatable, or comma-separated)",
    )
    m.add_argument(
        "--port-tip",
        metavar="COMMIT",
        help="with --try-port of one change: the commit its port must end at (a port tried is pinned: the same fork "
        "commit and upstream commits make the same ids; ci pipeline --try-ports carries it): refused where it does not",
    )
    m.add_argument(
        "--keep-port-branch",
        metavar="NAME",
        help="with --try-port of one change: keep its port as the new branch NAME (else its scratch ref is removed)",
    )
