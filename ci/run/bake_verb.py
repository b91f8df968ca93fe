"""`python -m ci bake <target>`: warm the target's caches on its devices, once, for every row after it.

Two routes, one verb: in the target's image, committing the caches as a new image (`ci.images.baked_layer`), or with
`--host` on this host's Python and GPUs, packing them as a portable artefact that `ci run --host --caches` installs
(`ci.run.artefact.jit_caches`). Both warm the same rows (the target's, narrowed by --suite, --change and --rows), each
engine configuration built once: the host bake is scheduled as `ci run` is (shared processes, packed over the GPUs,
--resume, --deadline, its costs measured), the image bake runs each group of rows in one process."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from lxml import etree

from ci import engine as container
from ci.common import contract, files, options, revision, signals
from ci.common.errors import NOTHING_RAN, BuildError, StackgateError, UsageError, os_said
from ci.common.tables import counted
from ci.images import baked_layer, build
from ci.run import execute, finished, harness_env, run_spec, run_verb
from ci.run.artefact import host_aot, jit_caches, read
from ci.run.schedule.dispatch import DeadlineReached
from ci.stack import loader, plan, rows_json
from ci.stack.model import Stack, Target

BAKE_TIMEOUT_S = 1800.0  # the warm-up starts every row's engine once: far longer than one test item


def cmd_bake(args: argparse.Namespace) -> int:
    if args.aot_only and not args.host:
        raise UsageError("--aot-only packs a host bake", hint="add --host (an image's AOT layer is its build)")
    if args.host and args.out is None:
        raise UsageError("ci bake --host needs --out DIR", hint="python -m ci bake TARGET --host --out DIR")
    host_only = {
        "--from": args.seed,
        "--suites-dir": args.suites_dir,
        "--gpus": args.gpus,
        "--gpu-memory": args.gpu_memory,
        "--deadline": args.deadline,
        "--resume": args.resume or None,
    }
    for flag, given in host_only.items():
        if given is not None and not args.host:
            raise UsageError(f"{flag} is about a host bake", hint="add --host")
    st = loader.load(args.stack)
    target = st.targets[args.target]
    rows = bake_rows(st, target.id, args)
    if not rows and not args.aot_only:
        raise UsageError(
            f"no row of {target.id} to warm with these filters",
            hint=f"python -m ci plan --target {target.id} lists its rows (or bake --aot-only: the kernel lists alone)",
        )
    return _on_host(target, st, rows, args) if args.host else _in_image(target, st, rows, args)


def bake_rows(st: Stack, target: str, args: argparse.Namespace) -> tuple[plan.Row, ...]:
    """The rows a bake warms: the target's, narrowed by --suite, --change and --rows."""
    chosen = plan.build(st).select(targets=[target], suites=args.suite, changes=args.change)
    return chosen.pick(args.rows, where=f"{target}/{','.join(args.suite) or '*'}")


def _in_image(target: Target, st: Stack, rows: tuple[plan.Row, ...], args: argparse.Namespace) -> int:
    image = args.image or f"{build.image_name(target)}:latest"
    with tempfile.TemporaryDirectory(prefix="stackgate-bake-") as tmp:
        path = _rows_json(st, target, rows, Path(tmp), {"ref": image})
        baked = baked_layer.bake(target, image, command=args.command, tag=args.tag, rows=path)
    print(f"image {baked.tag}\nid    {baked.image_id}")
    return 0


def _on_host(target: Target, st: Stack, rows: tuple[plan.Row, ...], args: argparse.Namespace) -> int:
    """The host bake: the AOT bake, then every row's test once with JIT allowed, scheduled as `ci run` schedules
    rows (the random-weight rows of a model and change in one process, building each engine configuration once and
    running its further rows on it; packed over the GPUs by memory; --resume, --deadline), then the root packed as
    one artefact. The rows' own verdicts are not the bake's: it fails only where a row could not run at all."""
    start = time.monotonic()
    out = args.out.resolve()
    results = out / "bake-results"
    env = _bake_env(target)
    seeded, carried = _seed(target, args.seed, env) if args.seed is not None else ({}, {})
    baked = host_aot.bake(target, env, execute.DEFAULT_SUITES)
    env.update(baked)
    if args.aot_only:
        if not baked:
            where = f"stack/targets.yaml [targets: {target.id}].kernel_lists"
            raise StackgateError(
                f"the AOT bake of {target.id} wrote nothing: no artefact written",
                hint=f"{where} names what to bake; the bake's error is above",
            )
        return _packed(target, out, "aot", env, start, seeded, rows=None)
    env["STACKGATE_CACHES_FROM"] = "the bake (JIT allowed)"
    schedule = run_spec.Schedule(
        gpus=tuple(g.strip() for g in (args.gpus or "").split(",") if g.strip()),
        gpu_memory_gib=args.gpu_memory,
        resume=args.resume,
        deadline_s=args.deadline,
    )
    specs = [
        run_spec.RunSpec(
            target=target,
            suite=suite,
            rows=tuple(r for r in rows if r.suite == suite),
            out=results / contract.results_folder(target.id, suite),
            timeout_s=args.timeout,
            suites_dir=args.suites_dir.resolve() if args.suites_dir else None,
            schedule=schedule,
        )
        for suite in dict.fromkeys(r.suite for r in rows)
    ]
    try:
        code = execute.run_scheduled(st, specs, host=True, session_env=env, phase="bake")
    except DeadlineReached as exc:
        reached = {**carried, **_ran(_outcomes(specs))}
        _packed(target, out, "warm", env, start, seeded, rows=reached, results=results, partial=True)
        raise DeadlineReached(
            f"{exc.message}; the configurations finished are in the artefact above",
            hint=f"go on: the same command with --resume (on another host, add --from that artefact). {exc.hint}",
        ) from None
    outcomes = _outcomes(specs)
    unwarmed = [row for row, said in outcomes.items() if said in _UNFINISHED]
    if not unwarmed and code == NOTHING_RAN:
        raise BuildError(
            f"the bake of {target.id} warmed nothing: every row was skipped (e.g. {_skipped(specs)}): no artefact "
            "written",
            hint=f"each row's reason is in its JUnit under {results}; fix what it names, then bake again",
        )
    if unwarmed or code not in (0, 1):  # 1: some rows' verdicts failed, which is not the bake's concern
        raise BuildError(
            f"the bake of {target.id} did not run every row ({len(unwarmed)} without a result, e.g. "
            f"{(unwarmed or ['none'])[0]}; exit {code}): no artefact written",
            hint=f"each row's session log is under {results}/*/logs; go on with --resume",
        )
    return _packed(target, out, "warm", env, start, seeded, rows={**carried, **_ran(outcomes)}, results=results)


_UNFINISHED = ("missing", "interrupted")  # a row never reached, stopped in flight, or whose session died


def _outcomes(specs: list[run_spec.RunSpec]) -> dict[str, str]:
    """Every row of the bake and what its JUnit says: pass, failure, error, skipped, or unfinished (_UNFINISHED)."""
    said: dict[str, str] = {}
    for spec in specs:
        for junit in spec.out.glob("junit-*.xml"):
            said.update(finished.row_outcomes(junit))
            for tc in etree.parse(str(junit)).getroot().iter("testcase"):
                if (lost := finished.lost_row(tc)) is not None:  # the scheduler's record of a session that died
                    said[lost] = "missing"
    return {r.id: said.get(r.id, "missing") for spec in specs for r in spec.rows}


def _ran(outcomes: dict[str, str]) -> dict[str, str]:
    """The rows the bake ran to a result (of `_outcomes`), and their outcome: what the artefact records."""
    return {row: said for row, said in outcomes.items() if said not in _UNFINISHED}


def _skipped(specs: list[run_spec.RunSpec]) -> str:
    """The first skipped row and its reason, from the bake's JUnit."""
    for spec in specs:
        for junit in sorted(spec.out.glob("junit-*.xml")):
            for tc in etree.parse(str(junit)).getroot().iter("testcase"):
                for skip in tc.iter("skipped"):
                    return f"{tc.get('name')}: {skip.get('message') or 'no reason given'}"
    return "no reason in the JUnit"


def _bake_env(target: Target) -> dict[str, str]:
    """The harness session's environment for the bake: every cache in the target's root, JIT allowed."""
    spec = run_spec.RunSpec(target=target, suite="*", rows=(), out=Path("."), suites_dir=None, timeout_s=0)
    return container.without_jit_refusal({**harness_env.host_env(spec), contract.ENV_REFUSE_JIT: "0"})


def _seed(target: Target, artefact: Path, env: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """The root seeded from an earlier bake's artefact (its key this host's but for the build's Python files): the
    files it put there, by path, with their sha256; and the rows it had baked, with their outcome, where it was made
    from this very build (a seed of another build's Python warmed its rows for that build: they are baked again)."""
    seed = jit_caches.install(target, artefact, env, seed=True)
    return dict(seed.files), dict(seed.rows or {}) if seed.same_build else {}


def _keep_bake_log(target: Target, results: Path) -> None:
    """The bake's compiles, with their key parts, into the root's warm-bake-jit.jsonl (what a later run that misses
    a kernel reads, harness.missed), each event once, however many times the bake was resumed."""
    log = jit_caches.root(target) / "warm-bake-jit.jsonl"
    lines = dict.fromkeys(log.read_text().splitlines() if log.is_file() else [])
    for found in sorted(results.glob("*/jit-events*.jsonl")):
        lines.update(dict.fromkeys(line for line in found.read_text(errors="replace").splitlines() if line.strip()))
    if lines:
        files.replace(log, "\n".join(lines) + "\n")


def _packed(
    target: Target,
    out: Path,
    kind: str,
    env: dict[str, str],
    start: float,
    seeded: dict[str, str],
    *,
    rows: dict[str, str] | None,
    results: Path | None = None,
    partial: bool = False,
) -> int:
    """The root packed as one artefact in `out` (after the bake's compiles are kept in the root, from `results`). A
    stop or a full disk while packing leaves no artefact and no temporary file, and says so: the rows ran, and the
    same command with --resume packs their caches without running them again."""
    again = (
        f"the warmed caches stay in {jit_caches.root(target)}: the same command with --resume packs them, "
        "no row run again"
    )
    try:
        with signals.raising():
            if results is not None:
                _keep_bake_log(target, results)
            artefact = jit_caches.pack(target, out, kind, env, rows)
    except signals.Stopped as stop:
        print(
            f"stopped by {stop.name} while packing the artefact into {out}: every row had run; no artefact was "
            f"written and no temporary file is left; {again}",
            file=sys.stderr,
            flush=True,
        )
        return 128 + stop.signum
    except OSError as exc:
        raise BuildError(
            f"the artefact could not be written into {out}: {os_said(exc)}; no artefact was written, no temporary "
            "file is left",
            hint=f"free space there or pass another --out; {again}",
        ) from None
    made = read.listing(artefact)
    what = "partial artefact" if partial else "artefact"
    holds = f", {counted(len(rows), 'row')} baked" if rows is not None else ""
    print(
        f"{what} {artefact} ({artefact.stat().st_size / 1e6:.1f} MB, {len(made)} files{holds}, "
        f"{time.monotonic() - start:.1f} s)",
        flush=True,
    )
    if seeded:
        same = sum(1 for path, digest in made.items() if seeded.get(path) == digest)
        print(
            f"re-used from --from: {same} of its {len(made)} files were the seed's, unchanged "
            f"({len(made) - same} made by this bake; {len(seeded) - same} of the seed's not kept)",
            flush=True,
        )
    return 0


def _rows_json(st: Stack, target: Target, rows: tuple[plan.Row, ...], folder: Path, image: dict) -> Path:
    doc = rows_json.document(
        st, target, "*", rows, image=image, git_revision=revision.git_revision(), timeout_s=BAKE_TIMEOUT_S
    )
    return rows_json.write(folder / "rows.json", doc)


def add_parser(sub: argparse._SubParsersAction) -> None:
    k = options.verb(
        sub,
        "bake",
        help="run the image's warm-up on the target's devices and commit the caches",
        codes=(0, 2, 3, 9, 130, 143),
    )
    k.add_argument("target", help="a target id, e.g. cuda-sm90")
    k.add_argument("--image", help="image to bake (default: stackgate/<target>:latest)")
    k.add_argument(
        "--command",
        nargs=argparse.REMAINDER,
        help="warm-up command instead of `python -m harness.warm_run` (must be last)",
    )
    k.add_argument("--tag", help="tag of the baked image (default: <image repo>:baked)")
    k.add_argument(
        "--host",
        action="store_true",
        help="no docker: warm this host's caches for the target's rows, pack them into --out",
    )
    k.add_argument("--out", type=Path, help="with --host: the folder for the caches artefact")
    k.add_argument(
        "--aot-only",
        action="store_true",
        help="with --host: pack only the AOT bake of the target's kernel lists (no warm-up, no GPU "
        "used; its key names no driver or GPU)",
    )
    k.add_argument(
        "--from",
        dest="seed",
        type=Path,
        metavar="ARTEFACT",
        help="with --host: seed the caches from an earlier bake's artefact first (its key this host's, but for a "
        "build that differs in Python files alone); the bake then compiles only what it lacks, and says how much "
        "it re-used. Also how a bake stopped at --deadline goes on, on another host",
    )
    k.add_argument("--suites-dir", type=Path, help="with --host: another suites tree (default: ./suites)")
    k.add_argument(
        "--timeout",
        type=options.seconds,
        default=BAKE_TIMEOUT_S,
        help="with --host: seconds per row (default: %(default)s)",
    )
    run_verb.add_schedule_options(k, bake=True)
    options.add_filters(k, "suite", "change", "rows")
    k.set_defaults(func=cmd_bake)
