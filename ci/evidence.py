"""`python -m ci.evidence`: every committed report re-rendered from its committed JUnit, and set against what is
committed (`nox -s evidence`; `--write` puts today's rendering in place).

A report records the `python -m ci` arguments that made it (report.json `generator.argv`, paths as given from the
repository root). Each is made again with today's code, in memory, and its report.md, report.html and report.json
must equal the committed files byte for byte, but for report.json's `generator.revision`: the commit that made it.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ci import options
from ci.report import commands as report_commands
from ci.report.write import OUTPUTS, render, write_atomic
from ci.run import execute
from ci.stack.model import Stack
from ci.tables import counted

EVIDENCE = options.REPO / "evidence"


def reports(root: Path = EVIDENCE) -> list[Path]:
    """Every committed report folder under `root`: a folder holding a report.json."""
    return sorted(p.parent for p in root.rglob("report.json"))


def argv_of(folder: Path) -> list[str]:
    """The arguments that made the report in `folder`, from its report.json; a ValueError names what is missing."""
    doc = json.loads((folder / "report.json").read_text())
    argv = (doc.get("generator") or {}).get("argv")
    if not argv:
        raise ValueError(
            f"{folder / 'report.json'}: generator.argv is missing: it predates recorded arguments; "
            "render it once with python -m ci report ... --out, from the repository root"
        )
    return list(argv)


def rendered(folder: Path) -> dict[str, bytes]:
    """The report in `folder` as today's code renders it from its recorded arguments (run from the repository root)."""
    from ci.cli import parser  # the report's own command line reads the recorded arguments

    argv = argv_of(folder)
    args = parser().parse_args(argv)
    if args.func is not report_commands.cmd_report:
        raise ValueError(f"{folder / 'report.json'}: generator.argv is {argv[:1]}, not a `report` command")
    args.no_history, args.history = True, None  # committed evidence is its JUnit's rendering alone, every time
    if Path(args.out).resolve() != folder.resolve():
        raise ValueError(f"{folder / 'report.json'}: generator.argv writes to {args.out}, not to {folder}")
    # The re-run lines would mount this machine's model cache where it has one: evidence is rendered as on a
    # machine without one, so that every machine renders the same bytes.
    before = os.environ.get(execute.ENV_MODEL_CACHE)
    os.environ[execute.ENV_MODEL_CACHE] = str(folder / "no-model-cache")
    try:
        return render(report_commands.from_args(args, argv))
    finally:
        if before is None:
            del os.environ[execute.ENV_MODEL_CACHE]
        else:
            os.environ[execute.ENV_MODEL_CACHE] = before


@dataclass(frozen=True, kw_only=True)
class RecordedFloor:
    """An A/A floor a committed report measured: for one change's row and metric, on the runs of one campaign."""

    report: Path
    change: str
    row: str
    metric: str
    pct: float
    runs: int


def recorded_floors(root: Path = EVIDENCE) -> list[RecordedFloor]:
    """Every A/A floor the committed reports record (report.json `comparison.ported[].floors`)."""
    out = []
    for folder in reports(root):
        doc = json.loads((folder / "report.json").read_text())
        for p in (doc.get("comparison") or {}).get("ported") or ():
            for f in p.get("floors") or ():
                if f.get("pct") is not None:
                    out.append(
                        RecordedFloor(
                            report=folder / "report.json",
                            change=str(p["change"]),
                            row=str(f["row"]),
                            metric=str(f["metric"]),
                            pct=float(f["pct"]),
                            runs=int(f["runs"]),
                        )
                    )
    return out


def too_narrow(stack: Stack, floors: Sequence[RecordedFloor]) -> list[str]:
    """Each timing bound of a gating change that a committed campaign's A/A floor is as wide as: a bound no run of
    that row has been able to judge, so it cannot gate a build. One line each: the change file, the bound, the floor
    and where it was measured."""
    out = []
    for change in stack.changes.values():
        if not change.gating:
            continue
        acc = change.acceptance
        bounds = [(e.metric, e.min_gain_pct, "effect") for e in acc.effect]
        bounds.append((acc.allowed_regression.metric, acc.allowed_regression.max_pct, "allowed_regression"))
        for metric, bound, field_name in bounds:
            for f in floors:
                if f.change == change.id and f.metric == metric and f.pct >= bound:
                    out.append(
                        f"stack/changes/{change.id}.yaml: gating, and its {field_name} bound on {metric} ({bound:g}%) "
                        f"is no wider than the A/A floor ±{f.pct:.1f}% measured on {f.row} at {f.runs} runs a side "
                        f"({f.report}): widen the bound, measure a narrower floor, or set gating: false"
                    )
    return out


def differences(folder: Path, fresh: dict[str, bytes]) -> list[str]:
    """What differs between the committed files and `fresh`, as the first lines of a unified diff per file."""
    out = []
    for name in OUTPUTS:
        path = folder / name
        old = path.read_bytes() if path.is_file() else b""
        new = fresh[name]
        if name == "report.json":
            old, new = _without_revision(old), _without_revision(new)
        if old != new:
            diff = difflib.unified_diff(_lines(old), _lines(new), f"{path} (committed)", f"{path} (today)", n=0)
            out.append("\n".join(list(diff)[:12]))
    return out


def _without_revision(raw: bytes) -> bytes:
    if not raw:
        return raw
    doc = json.loads(raw)
    doc.get("generator", {}).pop("revision", None)
    return json.dumps(doc, ensure_ascii=False, indent=0, sort_keys=True).encode()


def _lines(raw: bytes) -> list[str]:
    return raw.decode(errors="replace").splitlines()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ci.evidence", description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="*", type=Path, help="report folders (default: every report under evidence/)")
    ap.add_argument("--write", action="store_true", help="write today's rendering in place of what differs")
    args = ap.parse_args(argv)
    os.chdir(options.REPO)  # recorded paths are relative to the repository root
    failed = 0
    for folder in args.folders or [p.relative_to(options.REPO) for p in reports()]:
        try:
            fresh = rendered(folder)
        except (ValueError, OSError) as exc:
            print(f"{folder}: cannot re-render: {exc}", file=sys.stderr)
            failed += 1
            continue
        found = differences(folder, fresh)
        if found and args.write:
            write_atomic(folder, fresh)
            print(f"{folder}: re-rendered ({counted(len(found), 'file')} changed)")
        elif found:
            failed += 1
            print(f"{folder}: differs from today's rendering of its JUnit:\n" + "\n".join(found), file=sys.stderr)
        else:
            print(f"{folder}: as today's code renders it")
    if failed and not args.write:
        print(
            f"{counted(failed, 'report')} differ or cannot be re-rendered: "
            "python -m ci.evidence --write re-renders them",
            file=sys.stderr,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
