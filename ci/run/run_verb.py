"""`python -m ci run`: the verb's options, checked, and the run they describe (`ci.run.execute`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ci.common import options
from ci.common.errors import UsageError
from ci.run import execute, host, run_spec
from ci.run.artefact import baked_rows
from ci.stack import loader as stack
from ci.stack import plan
from ci.stack.model import Target


def main(args: argparse.Namespace) -> int:
    st = stack.load(args.stack)
    suites_root = args.suites_dir or execute.DEFAULT_SUITES
    if not (suites_root / args.suite).is_dir():
        raise UsageError(f"no suite {args.suite!r} in {suites_root}", hint="name a folder of the suites tree")
    target = st.targets[args.target]
    rows = baked_only(execute.select_rows(st, args.target, args.suite, args.rows), args)
    spec = run_spec.RunSpec(
        target=target,
        suite=args.suite,
        rows=rows,
        out=args.out.resolve(),
        suites_dir=args.suites_dir.resolve() if args.suites_dir else None,
        timeout_s=args.timeout,
        shard=args.shard,
        caches=args.caches,
        unbaked=args.unbaked,
        keep_caches=args.keep_caches,
        schedule=schedule(args, target),
    )
    for flag, given in (("--caches", args.caches is not None), ("--unbaked", args.unbaked)):
        if given and not args.host:
            raise UsageError(f"{flag} is about this host's JIT caches", hint="add --host (an image carries its caches)")
    if args.caches is not None and args.unbaked:
        raise UsageError("--caches and --unbaked contradict each other", hint="give one: the artefact, or none")
    if args.keep_caches and not args.unbaked:
        raise UsageError("--keep-caches is about an --unbaked run's caches", hint="add --unbaked --host")
    return execute.run_rows(st, spec, host=args.host, image=args.image)


def baked_only(rows: tuple[plan.Row, ...], args: argparse.Namespace) -> tuple[plan.Row, ...]:
    """`rows`, narrowed by `--rows-baked` to those the `--caches` artefact's bake ran (refused without one)."""
    if not args.rows_baked:
        return rows
    if args.caches is None:
        raise UsageError("--rows-baked chooses the rows a --caches artefact baked", hint="add --caches ARTEFACT --host")
    return baked_rows.only_baked(rows, args.caches)


def add_caches_options(p: argparse.ArgumentParser, caches_help: str) -> None:
    """--caches and --rows-baked, on `ci run` and `ci main`."""
    p.add_argument("--caches", type=Path, metavar="ARTEFACT", help=caches_help)
    p.add_argument(
        "--rows-baked",
        action="store_true",
        help="with --caches: only the chosen rows its bake ran to a result (a bake stopped at its --deadline "
        "records those it finished); the rest are named, not run",
    )


def schedule(args: argparse.Namespace, target: Target) -> run_spec.Schedule | None:
    """Rows are scheduled over the host's devices (each its own session) where this host has the target's GPUs, or
    where an option of the schedule is given; otherwise they run in one session, one after another."""
    chosen = tuple(g.strip() for g in (args.gpus or "").split(",") if g.strip())
    alone = getattr(args, "alone", False)
    asked = bool(chosen) or args.gpu_memory is not None or args.resume or args.deadline is not None or args.isolate
    asked = asked or alone
    if args.one_session:
        if asked:
            raise UsageError(
                "--one-session runs every row in one session: --gpus, --gpu-memory, --resume, "
                "--deadline, --isolate and --alone schedule rows",
                hint="drop one or the other",
            )
        return None
    gpu_target = bool(target.detect.nvidia_compute_capability or target.detect.amdgpu_gfx)
    if not asked and not (gpu_target and host.present(target)):
        return None  # one session: the cpu target, or a host without the target's GPUs (its rows say so, skipped)
    return run_spec.Schedule(
        gpus=chosen,
        gpu_memory_gib=args.gpu_memory,
        resume=args.resume,
        deadline_s=args.deadline,
        isolate=args.isolate,
        alone=alone,
    )


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = options.verb(
        sub,
        "run",
        help="run a target's rows of one suite in its image (or --host) and write JUnit",
        codes=(0, 1, 2, 4, 6, 9, 130, 143),
    )
    p.add_argument("target", help="a target id, e.g. cpu, cuda-sm121a")
    p.add_argument("suite", help="a suite the stack names (spec_decode, sparse_mla, selftest) or a --suites-dir folder")
    options.add_filters(p, "rows")
    p.add_argument("--image", help="image reference (default: the target's image as ci build or ci bake made it)")
    p.add_argument("--host", action="store_true", help="run on this host's Python, without docker")
    p.add_argument("--suites-dir", type=Path, help="another suites tree (default: the image's, or ./suites)")
    p.add_argument(
        "--timeout",
        type=options.seconds,
        default=options.DEFAULT_TIMEOUT_S,
        help="seconds per test item (default: %(default)s)",
    )
    p.add_argument(
        "--shard", type=options.whole(0, 9999), default=0, help="shard index, part of the JUnit file and suite name"
    )
    add_caches_options(
        p,
        "with --host: install a bake artefact (ci bake TARGET --host --out DIR) first; refused where it was made "
        "for another host",
    )
    p.add_argument(
        "--unbaked",
        action="store_true",
        help="with --host: no AOT bake and no artefact; refused unless the target's runtime caches "
        "root ($STACKGATE_RUNTIME_CACHES/<target>) is empty (the control of a bake A/B)",
    )
    p.add_argument(
        "--keep-caches",
        action="store_true",
        help="with --unbaked: the root may hold what earlier --unbaked runs here compiled, reused "
        "(the rows say their caches were 'as found'); for runs about anything but JIT",
    )
    add_schedule_options(p)
    p.add_argument("--out", type=Path, required=True, help="results folder: rows.json, JUnit, logs")
    p.set_defaults(func=main)


def add_schedule_options(p: argparse.ArgumentParser, *, bake: bool = False) -> None:
    """The options of `schedule`, on `ci run` and `ci main`; `bake`: those a host bake takes (`ci bake --host`)."""
    p.add_argument(
        "--gpus",
        metavar="IDS",
        help="schedule the rows on these GPUs (indices or UUIDs, comma-separated; default: every GPU of "
        "the target on this host)",
    )
    p.add_argument(
        "--gpu-memory",
        type=options.gib,
        metavar="GIB",
        help="each GPU's memory for packing rows (default: what the GPU reports; a GB10 counts the "
        "host's): random-weight rows take their model's KV budget and 6 GiB (18 by default, 8 for a tiny "
        "model), hub-weight rows whole GPUs",
    )
    p.add_argument(
        "--resume", action="store_true", help="skip rows with a result in --out; run again the one a stop interrupted"
    )
    p.add_argument(
        "--deadline",
        type=options.seconds,
        metavar="SECONDS",
        help="stop starting rows in time for every JUnit to be written within SECONDS of the start "
        "(exit 9 where rows were left: --resume runs them)",
    )
    if bake:
        return
    p.add_argument(
        "--isolate",
        action="store_true",
        help="every row a process of its own (the control): by default the random-weight rows of one model and "
        "change share one process, its imports and its engines, and a row that crashes there fails alone",
    )
    p.add_argument(
        "--alone",
        action="store_true",
        help="each row a process of its own with its GPUs to itself, as timings want (by default rows pack beside "
        "each other, and a row that shared its GPU records with what: stackgate.gpu_shared_with, which the report "
        "never judges timings from)",
    )
    p.add_argument(
        "--one-session",
        action="store_true",
        help="every row in one harness session, one after another, on whatever GPUs it sees (the cpu target's default)",
    )
