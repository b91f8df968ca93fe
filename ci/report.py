"""`python -m ci report`: every target's JUnit -> report.md, report.html and report.json.

All three are rendered in memory first and then swapped in with os.replace, so a run that fails
anywhere leaves the previous report as it was. The exit code is 0 whenever a report was written,
even if rows failed or inputs were broken: the report carries the verdict, and a CI step that should
fail on it reads report.json. Only a run that cannot produce a report exits non-zero.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from ci import acceptance, baseline, plan, report_html, report_md, results, stack
from ci.errors import ReportError
from ci.junit import FileRead
from ci.model import Upstream
from ci.report_view import Report, repro

OUTPUTS = ("report.md", "report.html", "report.json")


def _upstream(up: Upstream | None) -> dict[str, object] | None:
    return None if up is None else {"pr": up.pr, "state": up.state, "as_of": str(up.as_of)}


def build(stack_dir: Path, inputs: Sequence[Path], baseline_path: Path | None) -> Report:
    st = stack.load(stack_dir)
    p = plan.build(st)
    res = results.collect(inputs, p)
    base, base_read = None, None
    if baseline_path is not None:
        # A baseline that cannot be used is an input problem shown in the report, not a reason to
        # withhold it: the regression criterion then reads "missing".
        try:
            base = baseline.load(baseline_path)
            base_read = FileRead(path=str(baseline_path), status="ok", problem="")
        except ReportError as exc:
            base_read = FileRead(path=str(baseline_path), status="unreadable", problem=exc.message)
    return Report(stack=st, plan=p, results=res, verdicts=acceptance.evaluate(st, res, base), baseline=base_read)


def to_json(report: Report) -> dict[str, object]:
    res = report.results
    inputs = [{"path": f.path, "status": f.status, "problem": f.problem, "role": "junit", "testcases": len(f.cases)}
              for f in res.inputs]  # fmt: skip
    if report.baseline:
        b = report.baseline
        inputs.append({"path": b.path, "status": b.status, "problem": b.problem, "role": "baseline", "testcases": 0})
    return {
        "schema": 1,
        "changes": [
            {"id": v.change.id, "title": v.change.title, "track": v.change.track, "verdict": v.text,
             "ready": v.ready, "blocked_by": [c.name for c in v.blocking],
             "upstream": _upstream(v.change.upstream),
             "criteria": [{"name": c.name, "status": c.status, "evidence": c.evidence} for c in v.criteria]}
            for v in report.verdicts
        ],
        "rows": [
            {"id": r.id, "status": r.status, "target": r.target, "suite": r.suite, "change": r.change,
             "planned": r.planned is not None, "message": r.message, "note": r.note,
             "repro": repro(r.id) if r.status in ("failure", "error", "conflict", "incomplete") else None,
             "metrics": {name: m.to_json() for name, m in r.metrics.items()},
             "duplicates": list(r.duplicates),
             "runs": [{"file": c.file, "junit_suite": c.junit_suite, "test": f"{c.classname}::{c.name}",
                       "status": c.status, "message": c.message, "image_digest": c.image_digest,
                       "git_revision": c.git_revision, "problems": list(c.problems),
                       "jit": {"compiles": c.jit_compiles, "kernels": list(c.jit_kernels),
                               "cache_new_files": c.jit_cache_new_files}} for c in r.cases]}
            for r in res.rows
        ],
        "unkeyed": [{"file": c.file, "test": f"{c.classname}::{c.name}", "status": c.status, "message": c.message}
                    for c in res.unkeyed],
        "inputs": inputs,
    }  # fmt: skip


def render(report: Report) -> dict[str, bytes]:
    # report.json is compact: an indent makes json fall back from its C encoder to the Python one
    return {
        "report.md": report_md.render(report).encode(),
        "report.html": report_html.render(report).encode(),
        "report.json": (json.dumps(to_json(report), ensure_ascii=False, separators=(",", ":")) + "\n").encode(),
    }


def write_atomic(out: Path, files: Mapping[str, bytes]) -> None:
    """Write every file beside its final name, then rename them all: nothing half-written is ever seen."""
    temps: dict[str, str] = {}
    umask = os.umask(0)  # mkstemp makes 0600 files; give the report the mode a plain open() would
    os.umask(umask)
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{name}.", suffix=".tmp")
            temps[name] = tmp
            os.chmod(tmp, 0o666 & ~umask)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        for name, tmp in temps.items():
            os.replace(tmp, out / name)
    except OSError as exc:
        raise ReportError(f"{out}: cannot write the report: {exc.strerror or exc}",
                          hint="check that --out names a writable directory") from None  # fmt: skip
    finally:
        for tmp in temps.values():
            if os.path.exists(tmp):
                os.unlink(tmp)


def cmd_report(args: argparse.Namespace) -> int:
    report = build(args.stack, args.inputs, args.baseline)
    write_atomic(args.out, render(report))  # rendered whole before anything is written
    res = report.results
    ready = sum(v.ready for v in report.verdicts)
    print(f"wrote {', '.join(OUTPUTS)} to {args.out}: {len(res.rows)} rows, {len(res.inputs)} inputs "
          f"({len(res.problems())} with problems); {ready} of {len(report.verdicts)} changes ready")  # fmt: skip
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("report", help="combine JUnit into report.md/html/json with a verdict per imported change")
    r.add_argument("inputs", nargs="+", type=Path, metavar="JUNIT", help="JUnit files or directories (*.xml)")
    r.add_argument("--out", type=Path, required=True, help="directory for report.md, report.html, report.json")
    r.add_argument("--baseline", type=Path, help="a previous report.json to judge regressions against")
    # also accepted after the verb; SUPPRESS keeps the top-level --stack when this one is not given
    r.add_argument("--stack", type=Path, default=argparse.SUPPRESS, help="stack directory")
    r.set_defaults(func=cmd_report)
