"""`python -m ci pipeline`: the Buildkite pipeline made from the plan, as YAML on stdout (only the YAML:
`nox -s pipeline | buildkite-agent pipeline upload` reads it)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from ci.buildkite import gate, render, steps
from ci.common import options
from ci.common.errors import UsageError
from ci.common.escape import first_hidden, one_line
from ci.stack import loader, plan
from ci.stack.model import Stack
from ci.upstream import scope

if TYPE_CHECKING:
    from ci.fork.source import Fork


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give 1 or more")
    return value


def _plain(flag: str, value: object) -> None:
    """A value the pipeline writes into its YAML and commands: no control or line-break character (a newline, or
    U+0085, U+2028 or U+2029, which YAML reads as one, would become YAML of its own, an `env:` with LD_PRELOAD say)."""
    text = str(value)
    bad = first_hidden(text)
    if bad is not None:
        shown = options.without_secret(text) if flag == "--registry" else text  # a registry URL may carry a password
        raise UsageError(
            f"{flag} '{one_line(shown)}' holds the control character U+{ord(bad):04X} (YAML and terminals may break "
            "a line there)",
            hint="name it without control or line-break characters",
        )


def cmd_pipeline(args: argparse.Namespace) -> int:
    for flag, value in (("--stack", args.stack), ("--baseline", args.baseline)):
        if value is not None:
            _plain(flag, value)
    st = loader.load(args.stack)
    given_stack = args.stack if args.stack != options.default_stack() else None
    p = plan.build(st)
    fork_args: tuple[str, ...] = ()
    stock: frozenset[str] = frozenset()
    judged = scope.wanted(st, args)  # the fork where one is configured or named, unless --stock
    if args.compare_without and not judged:
        raise UsageError("--compare-without judges a change of the fork as ported", hint="add --fork [PATH]")
    if args.try_ports and not judged:
        raise UsageError("--try-ports tries the ports of the changes a fork lacks", hint="add --fork [PATH]")
    whole = p
    candidates: tuple[steps.Candidate, ...] = ()
    notes: list[str] = []
    if judged:
        p, fork_args, fork = _fork(st, p, args)
        if args.try_ports:
            candidates, said = _candidates(st, fork, whole, args)
            notes.append(f"Ports tried (ci main --try-port, each on its target's queue): {said}.")
            print(f"ports tried: {said}", file=sys.stderr)  # counted before anything runs
        if not (args.fork or args.without):  # configured, not named: the targets of imported changes judge it
            from ci.fork import fork_plan

            stock = frozenset(st.targets) - fork_plan.judged_on(st, p)
    chosen = p.select(targets=args.target, suites=args.suite, changes=args.change).rows
    if not chosen:
        raise UsageError(
            "no planned row matches these filters: the pipeline would run nothing",
            hint="python -m ci plan with the same --target/--suite/--change lists the rows",
        )
    in_images = any(st.targets[r.target].runs_on == "image" for r in chosen)  # host targets need no registry
    opts = steps.Options(
        targets=tuple(args.target),
        suites=tuple(args.suite),
        changes=tuple(args.change),
        shard_size=args.shard_size,
        baseline=args.baseline,
        stack=given_stack,
        registry=_registry(args) if in_images else None,
        fork=fork_args,
        stock=stock,
        without=tuple(args.without),
        compare_without=tuple(args.compare_without),
        runs=args.runs,
        test_engine=args.test_engine,
        try_ports=args.try_ports,
        candidates=candidates,
    )
    queue = next(t.queue for t in st.targets.values() if t.detect.fallback)
    sys.stdout.write(render.render(steps.steps(st, p, opts, whole), opts, args.part, queue, notes=notes))
    return 0


def _candidates(
    st: Stack, fork: Fork, whole: plan.Plan, args: argparse.Namespace
) -> tuple[tuple[steps.Candidate, ...], str]:
    """Each change the fork lacks (of --change, where given) whose port readiness is known, with its rows per target
    (of --target and --suite) and, where it ports cleanly, its pinned port's tip (made in a scratch store here and
    dropped: no ref moves); and the count of them and their rows, in a line."""
    from ci.fork import port_trial
    from ci.upstream import kept
    from ci.upstream.port import tried, words

    snap = kept.answer(st, fork.scope)
    clean, refused = port_trial.candidates(snap, args.change)
    rows = whole.select(targets=args.target, suites=args.suite)
    out, runs = [], {}
    for r in sorted(clean + refused, key=lambda r: list(st.changes).index(r.change)):
        mine = rows.select(changes=[r.change]).rows
        if not mine:
            continue
        by = {t: tuple(x.id for x in mine if x.target == t) for t in dict.fromkeys(x.target for x in mine)}
        if tried.triable(r):
            made = port_trial.make(fork, r, keep=False)
            out.append(steps.Candidate(change=r.change, tip=made.tip, said=made.said, rows=tuple(by.items())))
            runs[r.change] = mine
        else:
            said = one_line(words.cell_of(r))
            out.append(steps.Candidate(change=r.change, tip="", said=said, rows=tuple(by.items())))
    names = {t.id: t.short for t in st.targets.values()}
    return tuple(out), port_trial.tally(runs, names, [c.change for c in out if not c.tip])


def _fork(st: Stack, p: plan.Plan, args: argparse.Namespace) -> tuple[plan.Plan, tuple[str, ...], Fork]:
    """The rows the fork can run, and the fork options every step repeats, exactly as resolved here: its checkout's
    path, the ref as its commit, upstream's main and the base release as commits, so every agent builds and judges
    the same tree whatever its environment. Each --without is refused as `ci fork bundle --without` refuses it."""
    from ci.fork import ablate, fork_plan, fork_verbs, source

    fork = source.from_command(st, args)
    hosts = sorted({r.target for r in p.select(targets=args.target).rows if st.targets[r.target].runs_on == "host"})
    if hosts:
        raise UsageError(
            f"--fork builds the fork into each target's image; {', '.join(hosts)} run on a bare host, without one",
            hint="narrow the pipeline with --target to image targets; a bare host takes the fork with "
            "python -m ci fork build --host (docs/upstream.md)",
        )
    for change in dict.fromkeys((*args.without, *args.compare_without)):
        ablate.without(st, fork, change)  # the one decision: what cannot be dropped alone is refused here too
    fork_verbs.check_bundle(fork)  # what each build step's bundle would refuse (compiled sources): refused here
    base, up = fork.base, fork.scope.upstream
    given = ["--fork", str(fork.checkout.path), "--ref", fork.commit]
    given += ["--upstream-ref", up] if up else []
    given += ["--base-ref", base.commit, "--base-version", base.version]
    for flag, value in zip(given[::2], given[1::2], strict=True):
        _plain(flag, value)
    return fork_plan.split(p, fork).runs, tuple(given), fork


def _registry(args: argparse.Namespace) -> str | None:
    """Where the images go (--registry, else $STACKGATE_REGISTRY); None only for --one-agent. A pipeline whose run
    steps may land on any agent cannot work without one: it is refused here, at upload, not in every run step."""
    if args.one_agent:
        if args.registry:
            raise UsageError("--registry and --one-agent exclude each other", hint="give one of them")
        return None
    _plain("--registry", args.registry or os.environ.get(options.ENV_REGISTRY, ""))  # before it is stripped
    chosen = options.given_registry(args.registry)
    if chosen is None:
        raise UsageError(
            f"no registry: ${options.ENV_REGISTRY} is unset, and the run steps of a pipeline on several agents pull "
            "the image its build step pushed",
            hint=f"set {options.ENV_REGISTRY}=host[:port]/path in the pipeline's environment (or pass --registry); "
            "--one-agent makes a pipeline whose every step runs on one agent, building where it runs",
        )
    return chosen


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = options.verb(
        sub,
        "pipeline",
        help="print the Buildkite pipeline (YAML) made from the plan: builds on each "
        "target's queue, sharded runs, the report and the gate",
        codes=(0, 2),
    )
    options.add_filters(p, "target", "suite", "change")
    p.add_argument(
        "--shard-size",
        type=positive,
        default=steps.Options.shard_size,
        metavar="ROWS",
        help="rows per run step (default: %(default)s)",
    )
    p.add_argument(
        "--baseline",
        metavar="REPORT_JSON",
        help="a previous report.json on the report step's agent, to judge regressions against",
    )
    p.add_argument(
        "--part",
        type=positive,
        default=1,
        help="which upload of a pipeline over 500 jobs (each part's last step uploads the next; default: %(default)s)",
    )
    p.add_argument(
        "--registry",
        metavar="HOST[:PORT]/PATH",
        help="where the build steps push each image and the run steps pull it by digest (default: $STACKGATE_REGISTRY)",
    )
    options.add_fork(p, switch=True)
    p.add_argument(
        "--without",
        action=options.Csv,
        default=[],
        metavar="CHANGE",
        help="with --fork: also build the fork without this change and run its rows there; the report compares "
        "each change against the fork without it (repeatable, or comma-separated)",
    )
    p.add_argument(
        "--compare-without",
        action=options.Csv,
        default=[],
        metavar="CHANGE",
        help="with --fork: judge this change as ported by the timing protocol (ci main --compare-without: the fork "
        "and the fork without it, --runs each, interleaved, every run alone on its GPU, an A/A arm), one step per "
        "target on one agent (repeatable, or comma-separated)",
    )
    p.add_argument(
        "--try-ports",
        action="store_true",
        help="with --fork: try the port of every change the fork lacks (of --change) on each target holding its rows "
        "(ci main --try-port: the port made on the agent, pinned to the tip found here, both builds timed, the report "
        "annotated); one that does not port cleanly gets one step that says why and fails soft",
    )
    p.add_argument(
        "--runs",
        type=options.whole(1, options.RUNS_MAX),
        default=5,
        help="with --compare-without or --try-ports: runs of each arm (default: 5)",
    )
    p.add_argument(
        "--test-engine",
        action="store_true",
        help="each run step also sends its JUnit to Buildkite Test Engine (the test-collector plugin; the org's token "
        "in $BUILDKITE_ANALYTICS_TOKEN): per-test history there beside the report's own",
    )
    p.add_argument(
        "--one-agent",
        action="store_true",
        help="no registry: every step runs on one agent, and a run step builds the image where it runs",
    )
    p.set_defaults(func=cmd_pipeline)
    gate.add_parser(sub)
