"""`python -m ci repro <row id>`: re-run one row from a report alone (`--report report.json`), or print its
docker and host lines from a results folder's rows.json (`--rows-json`).

report.json carries, per row that ran, the rows.json of its run narrowed to that row (`rows[].rows_json`):
the image by content, the target's platform, devices and env, the suites tree it ran from, and the row.
This writes that document as the re-run's rows.json, prints the one `docker run` line that re-runs the row's
failing tests (their pytest node ids) as the run did, and runs it unless --print, exiting with its status.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from ci import files, options
from ci.errors import NotHere, RunError, UsageError
from ci.run import host, repro
from ci.stack import rows_json

# where `nox -s report` (and the pipeline's report step) and `ci main` write it
DEFAULT_REPORTS = (Path("report/report.json"), Path("out/report/report.json"))
_MACHINES = {"x86_64": "linux/amd64", "amd64": "linux/amd64", "aarch64": "linux/arm64", "arm64": "linux/arm64"}


def _report_doc(report: Path) -> Any:
    """report.json, read as untrusted input (a regular file, within a report's size)."""
    return json.loads(files.read_regular(report, files.REPORT_JSON_MAX).decode("utf-8"))


def report_row(report: Path, row_id: str) -> dict[str, Any]:
    """The row's entry in report.json; a usage error names what is wrong with the file or the row."""
    try:
        doc = _report_doc(report)
        rows = {r["id"]: r for r in doc["rows"] if isinstance(r, dict)}
    except FileNotFoundError:
        raise UsageError(f"{report} not found", hint="point --report at a report.json (python -m ci report)") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(
            f"{report}: not a report.json written by ci report ({type(exc).__name__}: {exc})",
            hint="point --report at the report.json of a report folder",
        ) from None
    if row_id not in rows:
        failing = [i for i, r in rows.items() if r.get("status") in ("failure", "error", "conflict", "incomplete")]
        listed = ", ".join(failing[:5]) + (" …" if len(failing) > 5 else "") if failing else "none"
        raise UsageError(f"row {row_id!r} is not in {report}", hint=f"its failing rows: {listed}")
    entry = rows[row_id]
    if not entry.get("rows_json"):
        why = "it did not run" if entry.get("status") == "not run" else "its results folder held no rows.json"
        raise UsageError(
            f"{report}: row {row_id} carries no rows.json to re-run it from ({why})",
            hint=f"python -m ci repro {row_id} --rows-json DIR/rows.json, DIR the folder it ran in",
        )
    return entry


def node_ids(entry: dict[str, Any], suite: str) -> tuple[str, ...]:
    """The pytest node ids (relative to the suites root) of the row's failing runs, else of all its runs; none
    where a run names no test module of the suite (then the suite's folder is run, narrowed to the row)."""
    runs = entry.get("runs") or []
    bad = [r for r in runs if r.get("status") in ("failure", "error")] or runs
    out: list[str] = []
    for run in bad:
        node = repro.node_id(str(run.get("test", "")), suite)
        if node is None:
            return ()
        out.append(node)
    return tuple(dict.fromkeys(out))


def _check_here(target: dict[str, Any], row_id: str) -> None:
    """Say plainly, before docker is asked, that this host lacks the target's GPU."""
    cc, gfx = target.get("nvidia_compute_capability"), target.get("amdgpu_gfx")
    if not host.has(cc, gfx):
        gpu = f"NVIDIA compute capability {cc}" if cc else f"AMD {gfx}"
        raise NotHere(
            f"row {row_id} runs on {target.get('id')} ({gpu}); this host has {host.describe()}",
            hint=f"run it on a {target.get('id')} host, or add --print and paste the line there",
        )
    here = _MACHINES.get(platform.machine().lower())
    wanted = target.get("platform")
    if wanted and here and wanted != here:
        print(
            f"note: the image is {wanted} and this host {here}: docker runs it under emulation (binfmt) or refuses it",
            file=sys.stderr,
        )


def from_report(args: argparse.Namespace, report: Path) -> int:
    if "::" in args.row:  # a testcase outside the plan: the report carries its line
        return _test_from_report(args, report)
    repro.check_row_id(args.row)
    report = report.resolve()
    entry = report_row(report, args.row)
    doc = repro.checked(entry["rows_json"], f"{report}: row {args.row}'s rows_json")
    out = (args.out or report.parent / f"repro-{args.row}").resolve()
    image = args.image or repro.image_of(doc)
    if not image or image == "host":
        raise UsageError(
            f"row {args.row} ran on a host's Python (--host): no image to re-run it in",
            hint=f"add --image REF, or: python -m ci repro {args.row} --rows-json DIR/rows.json",
        )
    suites = args.suites_dir.resolve() if args.suites_dir else None
    recorded = doc.get("suites_dir")
    if suites is None and recorded and not Path(recorded).is_dir():
        raise UsageError(
            f"the run mounted the suites tree {recorded}, which is not on this host",
            hint="add --suites-dir DIR naming that tree here",
        )
    rows = rows_json.write(out / "rows.json", doc)
    spec = repro.container_spec(
        doc, rows, args.row, out, image_ref=image, tests=node_ids(entry, doc["suite"]), suites_dir=suites
    )
    print(spec.cli(), flush=True)
    print(f"wrote {rows} (row {args.row} alone); the re-run's JUnit: {out}/junit-repro-{args.row}.xml", file=sys.stderr)
    if args.print_only:
        return 0
    _check_here(doc["target"], args.row)
    if not shutil.which("docker"):
        raise RunError("no docker client on PATH", hint="install docker, or add --print and run the line elsewhere")
    return subprocess.run(spec.argv(), check=False).returncode


def _test_from_report(args: argparse.Namespace, report: Path) -> int:
    try:
        tests = {c["test"]: c for c in _report_doc(report)["unkeyed"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(
            f"{report}: not a report.json written by ci report ({type(exc).__name__}: {exc})",
            hint="point --report at the report.json of a report folder",
        ) from None
    line = (tests.get(args.row) or {}).get("repro_command")
    if not line:
        failing = [t for t, c in tests.items() if c.get("repro_command")][:5]
        raise UsageError(
            f"{report} has no re-run line for test {args.row!r}",
            hint=f"its failing tests outside the plan: {', '.join(failing) or 'none'}",
        )
    print(line, flush=True)
    return 0 if args.print_only else subprocess.run(["bash", "-c", line], check=False).returncode


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
    rows_json = args.rows_json
    if not rows_json.exists():
        raise UsageError(f"{rows_json} not found", hint="point --rows-json at a results folder's rows.json")
    make = repro.test_commands if "::" in args.row else repro.commands  # a test naming no row, or a row
    r = make(rows_json, args.row, image=args.image, out=args.out)
    print(f"# docker\n{r.docker}\n# host (--host equivalent)\n{r.host}")
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
        help="a report.json (ci report): re-run the row from it alone, printing the docker line first; "
        "exit with its status (default: report/report.json, else out/report/report.json)",
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
    p.add_argument("--image", help="another image than the one the run recorded")
    p.add_argument(
        "--suites-dir", type=Path, help="with --report: the suites tree to mount, where the run's lies elsewhere here"
    )
    p.add_argument(
        "--out", type=Path, help="results folder for the re-run (default: repro-<row> beside rows.json or report.json)"
    )
    p.set_defaults(func=main)
