"""`python -m ci repro <row id>`: re-run one row from a report (`--report report.json`), or print its docker and
host lines from a results folder's rows.json (`--rows-json`).

A report comes from elsewhere (another agent, another user's PR, a download): it is read for names only
(`ci.run.rerun.report_read`), each checked, and the command is made again from them (`ci.run.rerun.lines`, which makes
every block this verb prints). The row must be one of this stack's plan, and its rows.json is written anew from the
stack; the image must be named by content and held here (or pulled, with --pull); the platform, devices and env are
the stack's target's; a suites tree is mounted only where --suites-dir names it here (a test of a suite of the run's
own is refused without it); the failing tests it re-runs are node ids of the row's suite. The line is printed, then
run (unless --print) as argv, never through a shell, exiting with its status.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from ci import engine
from ci.common import options, revision
from ci.common.errors import NotHere, RunError, UsageError
from ci.common.escape import command, one_line
from ci.run import host
from ci.run.harness_command import DEFAULT_SUITES
from ci.run.rerun import lines, report_read
from ci.run.rerun.report_read import RanBlock, RowEntry
from ci.run.rerun.rows_json_read import Image
from ci.stack import loader, plan, rows_json
from ci.stack.model import Stack, Target

# where `nox -s report` (and the pipeline's report step) and `ci main` write it
DEFAULT_REPORTS = (Path("report/report.json"), Path("out/report/report.json"))
_MACHINES = {"x86_64": "linux/amd64", "amd64": "linux/amd64", "aarch64": "linux/arm64", "arm64": "linux/arm64"}


def _check_here(target: Target, what: str) -> None:
    """Say plainly, before docker is asked, that this host lacks the target's GPU."""
    cc, gfx = target.detect.nvidia_compute_capability, target.detect.amdgpu_gfx
    if not host.has(cc, gfx):
        gpu = f"NVIDIA compute capability {cc}" if cc else f"AMD {gfx}"
        raise NotHere(
            f"{what} runs on {target.id} ({gpu}); this host has {host.describe()}",
            hint=f"run it on a {target.id} host, or add --print and paste the line there",
        )
    here = _MACHINES.get(platform.machine().lower())
    if target.platform and here and target.platform != here:
        print(
            f"note: the image is {target.platform} and this host {here}: docker runs it under emulation (binfmt) or "
            "refuses it",
            file=sys.stderr,
        )


def from_report(args: argparse.Namespace, report: Path) -> int:
    st = loader.load(args.stack)
    report = report.resolve()
    if "::" in args.row:  # a testcase outside the plan
        test = report_read.test(report, args.row)
        suite = str(test.suite)
        r = lines.rerun(st, target=str(test.target), suite=suite, test=args.row, image=_image(args, test.image, report))
        ran, rows = RanBlock(), []
        if args.suites_dir is None and not (DEFAULT_SUITES / suite).is_dir():
            raise UsageError(
                f"{one_line(args.row)} is a test of suite {one_line(suite)}, which is no suite of {DEFAULT_SUITES}: "
                "its run took it from a suites tree of its own (--suites-dir), which a report does not choose here",
                hint=f"add --suites-dir DIR, the tree holding {one_line(suite)}/, on this host",
            )
        entry_dir = None
    else:
        lines.check_row_id(args.row)
        entry = report_read.row(report, args.row)
        ran, entry_dir = entry.rows_json or RanBlock(), entry.suites_dir
        row = _planned(st, args.row, report)
        rows = [row]
        if not args.image and _on_host(ran):
            if ran.suites_dir and args.suites_dir is None:
                raise UsageError(
                    f"{args.row} ran from a suites tree of its own, which a report does not choose here",
                    hint="add --suites-dir DIR: the tree to run, on this host",
                )
            return _on_this_host(args, st, row, entry, report)
        r = lines.rerun(
            st,
            target=row.target,
            suite=row.suite,
            row=row.id,
            tests=report_read.node_ids(entry, row.suite),
            image=_image(args, ran.image, report),
            timeout_s=ran.timeout_s,
        )
    if args.suites_dir is not None:
        r = replace(r, suites_dir=args.suites_dir.resolve())
    elif ran.suites_dir or entry_dir:
        raise UsageError(
            f"{args.row} ran from a suites tree of its own, which a report does not choose here",
            hint="add --suites-dir DIR: the tree to mount, on this host",
        )
    out = (args.out or lines.default_out(r.name)).resolve()
    digest = r.image.rpartition("@")[2]
    doc = rows_json.document(
        st,
        r.target,
        r.suite,
        rows,
        image={"ref": r.image, "digest": digest, "id": digest},
        git_revision=revision.git_revision(),
        timeout_s=r.timeout_s,
        suites_dir=str(r.suites_dir) if r.suites_dir else None,
    )
    spec = lines.docker_spec(r, rows_json.write(out / "rows.json", doc), out)
    print(lines.join(spec.argv()), flush=True)
    print(
        f"wrote {one_line(out / 'rows.json')} (from {one_line(st.root)}); the re-run's JUnit: "
        f"{one_line(out)}/junit-repro-{r.name}.xml",
        file=sys.stderr,
    )
    if args.print_only:
        return 0
    _check_here(r.target, args.row)
    if not shutil.which("docker"):
        raise RunError("no docker client on PATH", hint="install docker, or add --print and run the line elsewhere")
    _held(args, r.image)
    return subprocess.run(spec.argv(), check=False).returncode


def _on_host(ran: RanBlock) -> bool:
    """Whether the row ran on a host's Python (`ci run --host`): its rows.json names the image "host"."""
    return ran.image is not None and ran.image.ref == "host"


def _on_this_host(args: argparse.Namespace, st: Stack, row: plan.Row, entry: RowEntry, report: Path) -> int:
    """A row that ran on a host's Python re-runs on one: `ci run --host` of that row alone, from this stack, into a
    results folder (out/repro/<row>). The line to paste on a host of the row's target comes first; where this host
    lacks the target's GPU, that is said and nothing is written (exit 6)."""
    target = st.targets[row.target]
    out = (args.out or lines.default_out(row.id)).resolve()
    argv = [
        sys.executable,
        "-m",
        "ci",
        "--stack",
        str(st.root),
        "run",
        row.target,
        row.suite,
        "--host",
        "--rows",
        row.id,
        "--out",
        str(out),
    ]
    if args.suites_dir is not None:
        argv[-2:-2] = ["--suites-dir", str(args.suites_dir.resolve())]
    print(lines.on_host_block(row.id, target, report_read.builds(entry), report, argv), flush=True)
    if args.print_only:
        return 0
    _check_here(target, row.id)
    return subprocess.run(argv, check=False).returncode


def _planned(st: Stack, row_id: str, report: Path) -> plan.Row:
    """The row as this stack plans it: what re-runs is the stack's row, never the report's copy of it."""
    row = next((r for r in plan.build(st).rows if r.id == row_id), None)
    if row is None:
        raise UsageError(
            f"row {row_id} of {report} is not in the plan of {st.root}: the report was made with another stack",
            hint="pass --stack naming the stack the report was made with",
        )
    return row


def _image(args: argparse.Namespace, recorded: Image | str | None, report: Path) -> str:
    """The image to re-run in, by content: --image where given, else the one the run recorded."""
    if args.image:
        return lines.checked_image(args.image, "--image")
    found = lines.image_of(recorded.model_dump()) if isinstance(recorded, Image) else str(recorded or "")
    if not lines.IMAGE.fullmatch(found):
        raise UsageError(
            f"{one_line(report)}: {one_line(args.row)} names no image by content to re-run it in (it ran on a host's "
            "Python, or its image is not named by digest)",
            hint="add --image sha256:… or REPO@sha256:…, or: "
            f"{command(['python', '-m', 'ci', 'repro', args.row, '--rows-json', 'DIR/rows.json'])}",
        )
    return found


def _held(args: argparse.Namespace, image: str) -> str:
    """The local id of `image` where this engine holds it, pulled first with --pull; refused otherwise (a report does
    not make the engine fetch what it names)."""
    found = engine.image_id(engine.find(), image)
    if found is None and args.pull and "@" in image:
        from ci.images import push_pull

        found = push_pull.pull(image)
    if found is None:
        raise RunError(
            f"image {image} is not held by this docker engine",
            hint=f"pull it ({command(['python', '-m', 'ci', 'pull', image])}), or add --pull",
        )
    return found


def main(args: argparse.Namespace) -> int:
    if args.report is not None and args.rows_json is not None:
        raise UsageError("--report and --rows-json both name the run", hint="give one of them")
    if args.rows_json is None:
        report = args.report or next((p for p in DEFAULT_REPORTS if p.is_file()), None)
        if report is None:
            raise UsageError(
                f"no report here ({' or '.join(map(str, DEFAULT_REPORTS))})",
                hint="add --report REPORT_JSON, or --rows-json DIR/rows.json from a results folder",
            )
        return from_report(args, report)
    if not args.rows_json.exists():
        raise UsageError(f"{args.rows_json} not found", hint="point --rows-json at a results folder's rows.json")
    image = lines.checked_image(args.image, "--image") if args.image else None
    r = lines.from_rows_json(loader.load(args.stack), args.rows_json, args.row, image=image, out=args.out)
    print(r.block())
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = options.verb(
        sub,
        "repro",
        help="re-run one row as it ran: from a report (the docker line, run unless "
        "--print), or print its docker and host lines from a results folder's rows.json",
        codes=(0, 1, 2, 4, 6),
    )
    p.add_argument(
        "row",
        help="a row id, as the report or rows.json names it; or a test outside the plan "
        "(its node id, SUITE/test_FILE.py::test_NAME, or the report's classname::name)",
    )
    p.add_argument(
        "--report",
        type=Path,
        metavar="REPORT_JSON",
        help="a report.json (ci report): re-run the row from its names, checked against the stack, printing the "
        "docker line first; exit with its status (default: report/report.json, else out/report/report.json)",
    )
    p.add_argument(
        "--print", dest="print_only", action="store_true", help="print the line (and write its rows.json), run nothing"
    )
    p.add_argument(
        "--rows-json",
        type=Path,
        default=None,
        help="instead of a report: the rows.json of the run that held the row; prints its docker and "
        "host lines, runs nothing",
    )
    p.add_argument("--image", help="another image than the one the run recorded, by content (sha256:…, REPO@sha256:…)")
    p.add_argument(
        "--pull",
        action="store_true",
        help="with --report: pull the image (REPO@sha256:…) where this engine does not hold it (default: refuse)",
    )
    p.add_argument(
        "--suites-dir",
        type=Path,
        help="the suites tree to mount (a run from a tree of its own needs it: a report "
        "never chooses a host path to mount)",
    )
    p.add_argument(
        "--out", type=Path, help="results folder for the re-run (default: out/repro/<row> under this folder)"
    )
    p.set_defaults(func=main)
