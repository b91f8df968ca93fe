"""The whole flow for one target, as the user-facing jobs run it: build and verify the target's image (a
no-op when it is current), run every suite it has rows in, one isolated process per row, and report.

`python -m ci main` runs it for this host's target (the cpu self-test where no GPU is found) and reports
every planned row; `--target`/`--suite` (what each `nox -s <target>_<suite>` session passes) narrows the
flow and its report to those rows. Where no docker engine answers, it says so in one line and runs the
suites on this host's Python instead. Where this host cannot build the image or lacks the target's
hardware, the rows are recorded as not run, with the reason and the command that makes them possible
(`not-run.json` beside rows.json, read by the report), and the exit code is 6.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ci import engine, subject
from ci.common import contract, options
from ci.common.errors import NOTHING_RAN, StackgateError, UsageError
from ci.common.tables import counted
from ci.images import build, verify
from ci.run import execute, exit_status, host, run_spec, run_verb
from ci.run.schedule import dispatch
from ci.stack import loader, plan
from ci.stack.model import Stack, Target
from ci.upstream import kept


@dataclass(frozen=True, kw_only=True)
class Blocked:
    reason: str
    fix: str


def step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def prepare_image(st: Stack, target: Target, fork: Path | None = None) -> Blocked | str:
    """Build (cached: a no-op when current) and verify; the id of the image to run, or what blocks the rows where
    this host cannot build it. `fork`: the fork's bundle (`ci fork bundle`), laid over the locked release."""
    step(f"python -m ci build {target.id}" + (" --fork" if fork else ""))
    try:
        built = build.build(target, fork_bundle=fork)
    except StackgateError as exc:
        if exc.exit_code != NOTHING_RAN:
            raise
        return Blocked(reason=exc.message, fix=exc.hint)
    print(f"image {built.tags[0]} ({built.image_id[:19]}, {built.seconds:.1f} s)")
    step(f"python -m ci verify {target.id}")
    verify.main(st, target, built.image_id, root=build.REPO_ROOT)  # by id: a tag is any checkout's on this engine
    return build.image_for(target, built.image_id)


def record_not_run(folder: Path, target: Target, suite: str, rows: list[str], why: Blocked) -> None:
    """not-run.json in the run's folder, replacing any earlier result there: nothing stale stands in."""
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("junit-*.xml"):
        stale.unlink()
    exit_status.record_not_run(folder, target.id, suite, rows, why.reason, why.fix)
    print(f"not run: {counted(len(rows), 'row')} of {target.id}/{suite}: {why.reason}\n  fix: {why.fix}", flush=True)


def run_target(
    st: Stack,
    target: Target,
    suites: list[str],
    out: Path,
    *,
    use_host: bool,
    timeout_s: float,
    fork: Path | None = None,
    schedule: run_spec.Schedule | None = None,
    deadline_at: float | None = None,
    planned: plan.Plan | None = None,
    caches: Path | None = None,
    judged: subject.Subject | None = None,
) -> int:
    """Build, verify and run one target's suites into out/<target>-<suite>-0/; the worst exit status. `schedule`: the
    rows of every suite together over the host's devices (`ci run --gpus ...`); `deadline_at` (time.monotonic()):
    when every JUnit must be written by; `planned`: the rows to run (default every planned row of the target);
    `caches`: a bake artefact the host installs first (with `use_host`); `judged`: the fork under test, repeated in
    the command that runs the rows elsewhere."""
    # rows that cannot run here are not built for: an image takes minutes to hours, and `ci build` builds alone
    blocked = None if host.present(target) else _no_device(target, judged or subject.Subject())
    image = None
    if blocked is None and not use_host:
        prepared = prepare_image(st, target, fork)
        blocked, image = (prepared, None) if isinstance(prepared, Blocked) else (None, prepared)
    worst, specs = 0, []
    rows_of = (planned or plan.build(st)).select(targets=[target.id])
    for suite in suites:
        folder = out / contract.results_folder(target.id, suite)
        rows = rows_of.select(suites=[suite]).rows
        if blocked is not None:
            why = Blocked(reason=blocked.reason, fix=blocked.fix.replace("<suite>", suite))
            record_not_run(folder, target, suite, [r.id for r in rows], why)
            continue
        if schedule is not None and not schedule.resume:
            (folder / exit_status.NOT_RUN).unlink(missing_ok=True)
        spec = run_spec.RunSpec(
            target=target,
            suite=suite,
            rows=rows,
            out=folder.resolve(),
            suites_dir=None,
            timeout_s=timeout_s,
            caches=caches,
            schedule=schedule,
        )
        specs.append(spec)
    if not specs:
        return NOTHING_RAN
    if schedule is not None:  # the suites together, packed on the host's devices (one deadline for all)
        ran = " and ".join(f"python -m ci run {target.id} {spec.suite}" for spec in specs)
        step(f"{ran}{' --host' if use_host else ''}, in one schedule")
        left = deadline_at - time.monotonic() if deadline_at is not None else None
        if left is not None and left <= 0:  # an earlier target took the time
            why = Blocked(reason="not started before --deadline", fix="run the same command with --resume")
            for spec in specs:
                record_not_run(spec.out, target, spec.suite, [r.id for r in spec.rows], why)
            return dispatch.DEADLINE_EXIT
        given = [replace(spec, schedule=replace(schedule, deadline_s=left)) for spec in specs]
        try:
            return execute.run_scheduled(st, given, host=use_host, image=image)
        except dispatch.DeadlineReached as exc:
            print(f"{exc.message}", flush=True)  # the report still follows, in the time kept for it
            return exc.exit_code
    for spec in specs:  # one session per suite, one after another (a deadline asks for the schedule)
        step(f"python -m ci run {target.id} {spec.suite}" + (" --host" if use_host else ""))
        worst = max(worst, execute.run_rows(st, spec, host=use_host, image=image))
    return worst


def _no_device(target: Target, judged: subject.Subject) -> Blocked:
    """Why the target's rows cannot run on this host, and the command that runs them where they can (its lock first,
    where the target has none or must be re-locked for the fork: that host would stop there)."""
    there = (
        f"{judged.session(target, '<suite>')}   (on a host with {target.a_short}, "
        f"e.g. an agent of Buildkite queue {target.queue})"
    )
    if target.runs_on == "image" and not build.lock_path(target).is_file() and target.id not in judged.relock:
        there = f"python -m ci lock {target.id}   (on a host that reaches its package index), then {there}"
    return Blocked(reason=f"this host has no {target.name} ({host.describe()})", fix=there)


def main(args: argparse.Namespace) -> int:
    st = loader.load(args.stack)
    targets = [st.targets[t] for t in args.target] or [host.detect(st)]
    use_host = args.host
    if not use_host:
        why = engine.unreachable()
        if why:
            print(f"{why.splitlines()[0]}: running the suites on this host's Python instead (--host)", flush=True)
            use_host = True
    if args.caches is not None and not use_host:
        raise UsageError("--caches is about this host's JIT caches", hint="add --host (an image carries its caches)")
    p = _narrowed(plan.build(st), args, targets)
    if args.cold and not (args.compare_without or args.try_port):
        raise UsageError("--cold is a way to run the timing protocol", hint="add --compare-without CHANGE --host")
    if args.try_port:  # changes the fork lacks, each ported on a scratch ref and timed against the fork as it is
        from ci.arms import try_port

        if args.compare_without or args.without or args.stock:
            given = "--compare-without" if args.compare_without else "--without" if args.without else "--stock"
            raise UsageError(f"--try-port and {given} exclude each other", hint="give one of them")
        if len(targets) != 1:
            raise UsageError("--try-port times one target's rows", hint="give one --target")
        return try_port.main(st, args, targets[0], p, use_host)
    if args.keep_port_branch or args.port_tip:
        given = "--keep-port-branch keeps" if args.keep_port_branch else "--port-tip names the tip of"
        raise UsageError(f"{given} the port --try-port makes", hint="add --try-port CHANGE")
    if args.compare_without:  # the timing protocol for one change (it implies --fork)
        from ci.arms import compare_without

        if len(targets) != 1:
            raise UsageError("--compare-without times one target's rows", hint="give one --target")
        return compare_without.main(st, args, targets[0], p, use_host)
    judged = subject.resolve(st, targets, args, use_host, p)  # every base checked before any build
    runs, set_apart = subject.runs(p, judged, args)
    bundles = {t.id: subject.bundle(st, t, judged, args) for t in targets}
    deadline_at = time.monotonic() + args.deadline if args.deadline is not None else None
    codes: list[int] = []
    folders: list[Path] = []
    for target in targets:
        suites = sorted({r.suite for r in runs.select(targets=[target.id], suites=args.suite).rows})
        print(f"target: {target.id} ({target.name}); suites: {', '.join(suites) or 'none'}", flush=True)
        codes.append(
            run_target(
                st,
                target,
                suites,
                args.out,
                use_host=use_host,
                timeout_s=args.timeout,
                fork=bundles[target.id],
                schedule=run_verb.schedule(args, target),
                deadline_at=deadline_at,
                planned=runs,
                caches=args.caches,
                judged=judged,
            )
        )
        folders += [args.out / contract.results_folder(target.id, s) for s in suites]
    folders += set_apart
    from ci.report import write as report  # junitparser and lxml load only when a report is written

    step(f"python -m ci report -> {args.out / 'report'}")
    # The report covers the rows asked for; `main` alone reports every planned row (what remains unproven).
    fork = judged.fork
    rep = report.build(
        args.stack,
        folders,
        None,
        targets=args.target,
        suites=args.suite,
        changes=args.change,
        loaded=(st, p),
        subject=kept.answer(st, fork.scope) if fork else None,  # what it lacks, whether it ports (kept per tip)
        stock=judged.stock,
        history=options.history_path(args, args.out),
    )
    report.write(rep, args.out / "report")
    if rep.history is not None:
        from ci.report import across

        across.remember(rep.history, rep.verdicts)
    print(report.summary(rep, args.out / "report"))
    failing = [c for c in codes if c not in (0, NOTHING_RAN)]
    if failing:
        return max(failing)
    return NOTHING_RAN if codes and all(c == NOTHING_RAN for c in codes) else 0


def _narrowed(p: plan.Plan, args: argparse.Namespace, targets: list[Target]) -> plan.Plan:
    """The plan `--change`, `--rows` and `--rows-baked` narrow `ci main` to (a campaign's rows): an unknown row id
    is an error."""
    p = p.select(changes=args.change)
    if not args.rows and not args.rows_baked:
        return p
    where = f"{','.join(t.id for t in targets)}/{','.join(args.suite) or '*'}"
    chosen = p.select(targets=[t.id for t in targets], suites=args.suite).pick(args.rows, where=where)
    picked = {r.id for r in run_verb.baked_only(chosen, args)}
    return plan.Plan(tuple(r for r in p.rows if r.id in picked), ())


def add_parser(sub: argparse._SubParsersAction) -> None:
    m = options.verb(
        sub,
        "main",
        help="the whole flow (build, verify, run, report) for this host's target, or for --target",
        codes=(0, 1, 2, 3, 4, 5, 6, 9, 130, 143),
    )
    options.add_filters(m, "target", "suite", "change", "rows")
    m.add_argument(
        "--out",
        type=Path,
        default=Path("out"),
        help="results (<target>-<suite>-0/) and the report (report/) (default: %(default)s)",
    )
    options.add_history(m, "history.sqlite in --out: out/history.sqlite")
    m.add_argument("--host", action="store_true", help="no docker: run the suites on this host's Python")
    run_verb.add_caches_options(
        m, "with --host: install a bake artefact (ci bake TARGET --host --out DIR) before the rows run"
    )
    options.add_fork(m, switch=True)
    m.add_argument("--without", metavar="CHANGE", help="the fork without this imported change (implies --fork)")
    m.add_argument(
        "--timeout",
        type=options.seconds,
        default=options.DEFAULT_TIMEOUT_S,
        help="seconds per test item (default: %(default)s)",
    )
    run_verb.add_schedule_options(m)
    from ci.arms import compare_without, try_port

    compare_without.add_options(m)
    try_port.add_options(m)
    m.set_defaults(func=main)
