"""`python -m ci repro <row id>`: re-run one row from a report (`--report report.json`), or print its docker and
host lines from a results folder's rows.json (`--rows-json`).

A report comes from elsewhere (another agent, another user's PR, a download): it is read for names only, each
checked, and the command is made again from them (`ci.run.repro`). The row must be one of this stack's plan, and its
rows.json is written anew from the stack; the image must be named by content and held here (or pulled, with
--pull); the platform, devices and env are the stack's target's; a suites tree is mounted only where --suites-dir
names it here; the failing tests it re-runs are node ids of the row's suite. The line is printed, then run (unless
--print) as argv, never through a shell, exiting with its status.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from ci import engine, files, options, revision
from ci.errors import NotHere, RunError, UsageError
from ci.run import host, repro
from ci.stack import loader, plan, rows_json
from ci.stack.model import Stack, Target

# where `nox -s report` (and the pipeline's report step) and `ci main` write it
DEFAULT_REPORTS = (Path("report/report.json"), Path("out/report/report.json"))
_MACHINES = {"x86_64": "linux/amd64", "amd64": "linux/amd64", "aarch64": "linux/arm64", "arm64": "linux/arm64"}
_NOT_A_REPORT = "point --report at the report.json of a report folder"


def _report_doc(report: Path) -> Any:
    """report.json, read as untrusted input (a regular file, within a report's size)."""
    try:
        return json.loads(files.read_regular(report, files.REPORT_JSON_MAX).decode("utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{report} not found", hint="point --report at a report.json (python -m ci report)") from None
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"{report}: not a report.json written by ci report ({type(exc).__name__}: {exc})", hint=_NOT_A_REPORT
        ) from None


def _entries(report: Path, key: str, name: str) -> dict[str, dict[str, Any]]:
    """report.json's `key` list, by each entry's `name` field."""
    doc = _report_doc(report)
    listed = doc.get(key) if isinstance(doc, dict) else None
    if not isinstance(listed, list):
        raise UsageError(f"{report}: not a report.json written by ci report (no {key} list)", hint=_NOT_A_REPORT)
    return {str(e[name]): e for e in listed if isinstance(e, dict) and isinstance(e.get(name), str)}


def report_row(report: Path, row_id: str) -> dict[str, Any]:
    """The row's entry in report.json; a usage error names what is wrong with the file or the row."""
    rows = _entries(report, "rows", "id")
    if row_id not in rows:
        failing = [i for i, r in rows.items() if r.get("status") in ("failure", "error", "conflict", "incomplete")]
        listed = ", ".join(failing[:5]) + (" …" if len(failing) > 5 else "") if failing else "none"
        raise UsageError(f"row {row_id!r} is not in {report}", hint=f"its failing rows: {listed}")
    return rows[row_id]


def _test_entry(report: Path, test: str) -> dict[str, Any]:
    """A testcase outside the plan, as report.json's `unkeyed` names it (with the target and suite it ran in)."""
    tests = _entries(report, "unkeyed", "test")
    entry = tests.get(test)
    if entry is None or not entry.get("target") or not entry.get("suite"):
        failing = [t for t, c in tests.items() if c.get("status") in ("failure", "error")][:5]
        raise UsageError(
            f"{report} has no re-runnable test {test!r} (one naming the target and suite it ran in)",
            hint=f"its failing tests outside the plan: {', '.join(failing) or 'none'}",
        )
    return entry


def node_ids(entry: dict[str, Any], suite: str) -> tuple[str, ...]:
    """The pytest node ids (relative to the suites root) of the row's failing runs, else of all its runs; none
    where a run names no test module of the suite (then the suite's folder is run, narrowed to the row)."""
    runs = [r for r in entry.get("runs") or [] if isinstance(r, dict)]
    bad = [r for r in runs if r.get("status") in ("failure", "error")] or runs
    out: list[str] = []
    for run in bad:
        node = repro.node_id(str(run.get("test", "")), suite)
        if node is None:
            return ()
        out.append(node)
    return tuple(dict.fromkeys(out))


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
        entry, ran, rows = _test_entry(report, args.row), {}, []
        r = repro.rerun(st, target=str(entry["target"]), suite=str(entry["suite"]), test=args.row,
                        image=_image(args, entry.get("image"), report))  # fmt: skip
    else:
        repro.check_row_id(args.row)
        entry = report_row(report, args.row)
        ran = entry.get("rows_json") if isinstance(entry.get("rows_json"), dict) else {}
        row = _planned(st, args.row, report)
        rows = [row]
        if not args.image and _on_host(ran):
            if ran.get("suites_dir") and args.suites_dir is None:
                raise UsageError(
                    f"{args.row} ran from a suites tree of its own, which a report does not choose here",
                    hint="add --suites-dir DIR: the tree to run, on this host",
                )
            return _on_this_host(args, st, row, entry, report)
        r = repro.rerun(st, target=row.target, suite=row.suite, row=row.id, tests=node_ids(entry, row.suite),
                        image=_image(args, ran.get("image"), report), timeout_s=ran.get("timeout_s"))  # fmt: skip
    if args.suites_dir is not None:
        r = replace(r, suites_dir=args.suites_dir.resolve())
    elif ran.get("suites_dir") or entry.get("suites_dir"):
        raise UsageError(
            f"{args.row} ran from a suites tree of its own, which a report does not choose here",
            hint="add --suites-dir DIR: the tree to mount, on this host",
        )
    out = (args.out or repro.default_out(r.name)).resolve()
    digest = r.image.rpartition("@")[2]
    doc = rows_json.document(st, r.target, r.suite, rows, image={"ref": r.image, "digest": digest, "id": digest},
                             git_revision=revision.git_revision(), timeout_s=r.timeout_s,
                             suites_dir=str(r.suites_dir) if r.suites_dir else None)  # fmt: skip
    spec = repro.docker_spec(r, rows_json.write(out / "rows.json", doc), out)
    print(spec.cli(), flush=True)
    print(f"wrote {out / 'rows.json'} (from {st.root}); the re-run's JUnit: {out}/junit-repro-{r.name}.xml",
          file=sys.stderr)  # fmt: skip
    if args.print_only:
        return 0
    _check_here(r.target, args.row)
    if not shutil.which("docker"):
        raise RunError("no docker client on PATH", hint="install docker, or add --print and run the line elsewhere")
    _held(args, r.image)
    return subprocess.run(spec.argv(), check=False).returncode


def _on_host(ran: dict[str, Any]) -> bool:
    """Whether the row ran on a host's Python (`ci run --host`): its rows.json names the image "host"."""
    image = ran.get("image")
    return isinstance(image, dict) and image.get("ref") == "host"


def _on_this_host(args: argparse.Namespace, st: Stack, row: plan.Row, entry: dict[str, Any], report: Path) -> int:
    """A row that ran on a host's Python re-runs on one: `ci run --host` of that row alone, from this stack, into a
    results folder (out/repro/<row>). The line to paste on a host of the row's target comes first; where this host
    lacks the target's GPU, that is said and nothing is written (exit 6)."""
    target = st.targets[row.target]
    out = (args.out or repro.default_out(row.id)).resolve()
    argv = [sys.executable, "-m", "ci", "--stack", str(st.root), "run", row.target, row.suite, "--host",
            "--rows", row.id, "--out", str(out)]  # fmt: skip
    if args.suites_dir is not None:
        argv[-2:-2] = ["--suites-dir", str(args.suites_dir.resolve())]
    builds = sorted({str(r.get("vllm_version")) for r in entry.get("runs") or [] if isinstance(r, dict)} - {"None"})
    built = f" on vLLM {', '.join(builds)}" if builds else ""
    shown = repro.join(["python", "-m", "ci", "repro", row.id, "--report", str(report)], Path.cwd())
    print(f"# {row.id} ran on a host's Python{built}: re-run it on {target.a_short} host ({target.id}) whose "
          "Python holds that build, from a checkout:", flush=True)  # fmt: skip
    print(shown, flush=True)
    print(f"# which runs, there: {repro.join(['python', *argv[1:]], Path.cwd())}", flush=True)
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


def _image(args: argparse.Namespace, recorded: Any, report: Path) -> str:
    """The image to re-run in, by content: --image where given, else the one the run recorded."""
    if args.image:
        return repro.checked_image(args.image, "--image")
    found = repro.image_of(recorded) if isinstance(recorded, dict) else str(recorded or "")
    if not repro.IMAGE.fullmatch(found):
        raise UsageError(
            f"{report}: {args.row} names no image by content to re-run it in (it ran on a host's Python, or its "
            "image is not named by digest)",
            hint=f"add --image sha256:… or REPO@sha256:…, or: python -m ci repro {args.row} --rows-json DIR/rows.json",
        )
    return found


def _held(args: argparse.Namespace, image: str) -> str:
    """The local id of `image` where this engine holds it, pulled first with --pull; refused otherwise (a report does
    not make the engine fetch what it names)."""
    found = engine.image_id(engine.find(), image)
    if found is None and args.pull and "@" in image:
        from ci.images import registry

        found = registry.pull(image)
    if found is None:
        raise RunError(
            f"image {image} is not held by this docker engine",
            hint=f"pull it (python -m ci pull {image}), or add --pull",
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
    image = repro.checked_image(args.image, "--image") if args.image else None
    r = repro.from_rows_json(loader.load(args.stack), args.rows_json, args.row, image=image, out=args.out)
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
        "--suites-dir", type=Path, help="the suites tree to mount (a run from a tree of its own needs it: a report "
        "never chooses a host path to mount)"
    )  # fmt: skip
    p.add_argument(
        "--out", type=Path, help="results folder for the re-run (default: out/repro/<row> under this folder)"
    )
    p.set_defaults(func=main)
