"""`ci main --compare-without X [--runs N] [--aa]`: one change judged as ported, by the protocol a timing claim needs.

The fork and the fork without X are built (images, or with --host site folders over --base-site); each build is
warmed once, untimed (its first engine compiles what its kernels need); then the arms run interleaved, A B A' ... N
times over: the fork, the fork without X, and with --aa the fork again as its own side (the A/A arm, the noise
floor). Every arm run is a fresh engine process per row, each alone on its GPU (`--alone`: the schedule never packs
two on one device), across every GPU of the host. The report then judges X as ported: its allowed regression over
runs against the side without it, past the A/A floor (ci.results.run_medians, ci.results.baseline).

out/arms/<arm>/run-<i>/ holds each arm's runs (a side of the comparison: every run below it); out/warm-up/ the
untimed first runs; out/report/ the report. With --cold (host route) there is no warm-up: every run starts from an
empty caches root of its own (out/caches/<arm>/run-<i>/), JIT allowed, as a fork's user without a bake starts.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ci.common import contract, options
from ci.common.errors import NOTHING_RAN, UsageError
from ci.common.escape import command, one_line
from ci.run import execute, host, run_spec
from ci.run.schedule import rounds
from ci.stack import plan
from ci.stack.model import Stack, Target

if TYPE_CHECKING:
    from ci.fork.source import Fork
    from ci.upstream.port.tried import Tried

FORK, AA = "fork", "aa"


@dataclass(frozen=True, kw_only=True)
class Arm:
    label: str
    image: str | None = None  # the image route: the built image's id
    path: str | None = None  # the host route: PYTHONPATH (the arm's site, then the base release's)
    caches: Path | None = None  # the host route: the build's own JIT caches root, kept from its warm-up on


def main(st: Stack, args: argparse.Namespace, target: Target, rows: plan.Plan, use_host: bool) -> int:
    from ci.fork import source

    change = args.compare_without
    fork = None if args.bundles else source.from_command(st, args)
    if fork is not None and not (state := fork.state(change)).held:
        raise UsageError(
            f"--compare-without {change}: #{change} is {state.state} in {fork.name} {fork.ref}: nothing to compare",
            hint=f"{fork.scope.command('fork')} says what it holds",
        )
    timed = rows.select(targets=[target.id], changes=[change])
    if not timed.rows:
        raise UsageError(f"no row of #{change} planned on {target.id}", hint=f"python -m ci plan --change {change}")
    preflight(args, target, use_host, "--compare-without")
    builds = _builds(st, args, target, fork, change, use_host)
    arms = [builds[FORK], builds[change]] + ([replace(builds[FORK], label=AA)] if args.aa else [])
    labels = [FORK if a.label == FORK else AA if a.label == AA else f"without-{change}" for a in arms]
    sides = [Side(label=label, parts=(Part(arm=arm, rows=timed),)) for arm, label in zip(arms, labels, strict=True)]
    codes = protocol(st, args, target, timed.rows, sides, sides[:2], use_host)
    from ci.report import write as report

    out = args.out
    _step(f"{command(['python', '-m', 'ci', 'report', out / 'arms' / FORK])} --compare ... -> {out / 'report'}")
    paths = [out / "arms" / label for label in labels]
    rep = report.build(
        args.stack, [paths[0]], None, targets=[target.id], changes=[change], compare_paths=paths[1:], labels=labels
    )
    report.write(rep, out / "report")
    print(report.summary(rep, out / "report"))
    failing = [c for cs in codes.values() for c in cs if c not in (0, NOTHING_RAN)]
    return max(failing) if failing else 0


def preflight(args: argparse.Namespace, target: Target, use_host: bool, flag: str, pipeline: str = "") -> None:
    """What the protocol refuses before anything is built: --aa-runs without --aa, or a count its rounds cannot
    spread; --cold on images; an --out holding an earlier protocol's runs; a host without the target's hardware."""
    if args.aa_runs is not None and not args.aa:
        raise UsageError(
            "--aa-runs is the A/A arm's count of runs", hint="add --aa (the floor: an interval over 2 or more runs)"
        )
    rounds.aa_rounds(args.runs, args.aa_runs if args.aa else 0)
    if args.cold and not use_host:
        raise UsageError(
            "--cold starts each run from an empty JIT caches root on this host",
            hint="add --host (an image carries the caches its build baked)",
        )
    _fresh(args.out)
    if not host.present(target):
        raise UsageError(
            f"{flag} times rows on {target.name}, and this host has none ({host.describe()})",
            hint=f"run it on a host with {target.a_short}; ci pipeline {pipeline or flag} does, on queue "
            f"{target.queue}",
        )


@dataclass(frozen=True, kw_only=True)
class Part:
    """One build's rows within an arm: they run on `arm` into the arm's run folder, or a sub-folder `name` of it."""

    arm: Arm
    rows: plan.Plan
    name: str = ""


@dataclass(frozen=True, kw_only=True)
class Side:
    """An arm of the protocol, by its label: one build (the fork; the fork without X), or several, each running its
    own rows (the ports tried, each on its own build: `ci main --try-port`)."""

    label: str
    parts: tuple[Part, ...]


def protocol(
    st: Stack,
    args: argparse.Namespace,
    target: Target,
    rows: tuple[plan.Row, ...],
    sides: list[Side],
    warmed: list[Side],
    use_host: bool,
) -> dict[str, list[int]]:
    """Each build of `warmed` warmed once, untimed (unless --no-warm-up or --cold); then the sides' runs interleaved,
    --runs rounds (the A/A side in the rounds --aa-runs keeps), every run alone on its GPU, each into
    out/arms/<label>/run-<i>/[<part>/]. Each side's exit codes, by its label."""
    aa_rounds = rounds.aa_rounds(args.runs, args.aa_runs if args.aa else 0)
    schedule = run_spec.Schedule(
        gpus=tuple(g.strip() for g in (args.gpus or "").split(",") if g.strip()),
        gpu_memory_gib=args.gpu_memory,
        alone=True,
    )
    out = args.out
    codes: dict[str, list[int]] = {side.label: [] for side in sides}
    if not (args.no_warm_up or args.cold):  # --cold: every run is the first, from empty caches
        for side in warmed:
            for part in side.parts:
                label = "/".join(x for x in (side.label, part.name) if x)
                _step(f"warm-up of {label} (untimed: its first engine compiles)")
                # its costs are a bake's (the first engine compiles), never a timed run's: the projection reads runs
                warm = _run(
                    st, target, part.rows, out / "warm-up" / label, part.arm, schedule, args, use_host, phase="bake"
                )
                codes[side.label].append(warm)
    clock = rounds.Clock({s.label: len(aa_rounds) if s.label == AA else args.runs for s in sides})
    print(rounds.before(rows, clock.total, out, cold=args.cold), flush=True)
    for i in range(1, args.runs + 1):
        for side in sides:
            if side.label == AA and i not in aa_rounds:
                continue
            _step(f"run {i} of {args.runs}: {side.label}" + (" (cold: empty caches, JIT allowed)" if args.cold else ""))
            started = time.monotonic()
            for part in side.parts:
                arm, folder = part.arm, out / "arms" / side.label / f"run-{i}" / part.name
                if args.cold:  # a caches root of its own, empty: the first request as a user without a bake meets it
                    arm = replace(arm, caches=(out / "caches" / side.label / f"run-{i}" / part.name).resolve())
                codes[side.label].append(_run(st, target, part.rows, folder, arm, schedule, args, use_host))
            print(clock.ran(side.label, time.monotonic() - started), flush=True)
    return codes


def _builds(
    st: Stack, args: argparse.Namespace, target: Target, fork: Fork | None, change: str, use_host: bool
) -> dict[str, Arm]:
    """The fork and the fork without `change`: images, or (--host) site folders over --base-site; from the fork's
    checkout, or from the bundles --bundles holds (made where the checkout is: a bare GPU host need not hold it)."""
    from ci.fork import bundle_pair

    given = bundle_pair.paired(args.bundles, change) if use_host and fork is None else {}
    out: dict[str, Arm] = {}
    for label, without in ((FORK, None), (change, change)):
        name = label if without is None else f"without-{change}"
        out[label] = build(
            st,
            args,
            target,
            fork,
            label=label,
            name=name,
            use_host=use_host,
            flag="--compare-without",
            without=without,
            bundle=given.get(name),
        )
    return out


def build(
    st: Stack,
    args: argparse.Namespace,
    target: Target,
    fork: Fork | None,
    *,
    label: str,
    name: str,
    use_host: bool,
    flag: str,
    without: str | None = None,
    tried: Tried | None = None,
    bundle: Path | None = None,
) -> Arm:
    """One build of the protocol, in out/builds/<name>/: the fork (`without`: without that change; `tried`: with a
    port tried on a scratch ref), as an image, or (--host) a site folder over --base-site; `bundle`: one made
    elsewhere (--bundles), where this host holds no checkout."""
    from ci.fork import fork_verbs, site

    where = args.out / "builds" / name
    if use_host:
        if args.base_site is None:
            raise UsageError(
                f"{flag} --host lays each build over the base release's install",
                hint="add --base-site SITE (the folder holding the base vLLM wheel's install)",
            )
        if bundle is None:
            assert fork is not None
            site.require_base(args.base_site, f"{fork.name} {fork.ref}", fork.base.version)
            bundle = fork_verbs.make_bundle(st, fork, where / "bundle.tar.gz", without, tried)
        built = site.build(bundle, args.base_site, where / "site")
        print(f"site {where / 'site'}: vllm_build {built['vllm_build']}", flush=True)
        path = os.pathsep.join([str(where / "site"), str(args.base_site)])
        return Arm(label=label, path=path, caches=(args.out / "caches" / name).resolve())
    if fork is None:
        raise UsageError("--bundles is the --host route's", hint="images are built from the checkout: --fork")
    from ci.images import build as images
    from ci.images import image_verbs, verify

    made = image_verbs.fork_bundle(st, target, fork, without, where / "bundle.tar.gz", tried)
    built = images.build(target, fork_bundle=made)  # a host that cannot build it stops here (exit 6)
    verify.main(st, target, built.image_id, root=images.REPO_ROOT)
    print(f"image {images.image_for(target, built.image_id)}: {name}", flush=True)
    return Arm(label=label, image=images.image_for(target, built.image_id))


def _run(
    st: Stack,
    target: Target,
    rows: plan.Plan,
    out: Path,
    arm: Arm,
    schedule: run_spec.Schedule,
    args: argparse.Namespace,
    use_host: bool,
    *,
    phase: str = "run",
) -> int:
    specs = [
        run_spec.RunSpec(
            target=target,
            suite=suite,
            rows=rows.select(suites=[suite]).rows,
            out=(out / contract.results_folder(target.id, suite)).resolve(),
            suites_dir=None,
            timeout_s=args.timeout,
            caches=args.caches,
            unbaked=args.unbaked or args.cold,
            keep_caches=args.unbaked and not args.cold,  # --cold: each run's root is new, and must be empty
            schedule=schedule,
        )
        for suite in sorted({r.suite for r in rows.rows})
    ]
    with _environ(arm, allow_jit=args.cold):
        return execute.run_scheduled(st, specs, host=use_host, image=arm.image, phase=phase)


@contextlib.contextmanager
def _environ(arm: Arm, *, allow_jit: bool = False) -> Iterator[None]:
    """The host route: the arm's vLLM first on the path of every process its rows start, and its build's own JIT
    caches root (a build's warm-up fills it; the other build's runs never read it); `allow_jit`: the rows may compile
    (a cold run's first request compiles what the warm-up did not)."""
    given = {
        "PYTHONPATH": arm.path,
        "STACKGATE_RUNTIME_CACHES": str(arm.caches) if arm.caches else None,
        contract.ENV_REFUSE_JIT: "0" if allow_jit else None,
    }
    before = {k: os.environ.get(k) for k in given}
    if arm.path is not None:
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (arm.path, before["PYTHONPATH"]) if p)
    if arm.caches is not None:
        os.environ["STACKGATE_RUNTIME_CACHES"] = str(arm.caches)
    if allow_jit:
        os.environ[contract.ENV_REFUSE_JIT] = "0"
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _fresh(out: Path) -> None:
    """An --out that holds an earlier protocol's runs is refused: its report reads every run below arms/, and would
    pool that invocation's runs with this one's, unsaid."""
    held = [p for p in (out / "arms", out / "warm-up") if p.is_dir() and any(p.iterdir())]
    if held:
        raise UsageError(
            f"--out {one_line(out)} holds the runs of an earlier --compare-without or --try-port "
            f"({one_line(held[0])}): this one's report would pool them with its own",
            hint=f"name a new --out, or remove {one_line(out / 'arms')} and {one_line(out / 'warm-up')} first",
        )


def _step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def add_options(m: argparse.ArgumentParser) -> None:
    """`ci main`'s options for the protocol (it implies --fork)."""
    m.add_argument(
        "--compare-without",
        metavar="CHANGE",
        help="judge this change as ported: the fork and the fork without it (and --aa), --runs times each, "
        "interleaved, every run alone on its GPU; then the report over runs",
    )
    m.add_argument(
        "--runs",
        type=options.whole(1, options.RUNS_MAX),
        default=5,
        help="runs of each arm, with --compare-without or --try-port (default: %(default)s)",
    )
    m.add_argument(
        "--aa", action="store_true", help="with --compare-without or --try-port: an A/A arm, the fork again (the floor)"
    )
    m.add_argument(
        "--aa-runs",
        type=options.whole(2, options.RUNS_MAX),
        metavar="K",
        help="with --aa: the A/A arm's runs, in K of the rounds spread from the first (default: every round)",
    )
    m.add_argument(
        "--no-warm-up", action="store_true", help="with --compare-without or --try-port: no untimed first run per build"
    )
    m.add_argument(
        "--unbaked",
        action="store_true",
        help="with --compare-without --host: no AOT bake; each build's runs start from the JIT caches its warm-up "
        "compiled (JIT allowed: a timing comparison, not the no-JIT criterion)",
    )
    m.add_argument(
        "--cold",
        action="store_true",
        help="with --compare-without --host: every run starts from an empty JIT caches root of its own, JIT allowed "
        "(no warm-up run): engine start and the first request as a user without a bake meets them",
    )
    m.add_argument(
        "--bundles",
        type=Path,
        metavar="DIR",
        help="with --compare-without --host: fork.tar.gz and without-<change>.tar.gz made by ci fork bundle where the "
        "checkout is (no checkout needed here)",
    )
    m.add_argument(
        "--base-site",
        type=Path,
        metavar="SITE",
        help="with --compare-without or --try-port, and --host: the site folder holding the base release's install",
    )
