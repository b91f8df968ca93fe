"""report.json: the verdicts, every row with its runs and metrics, cases naming no row, and every input."""

from __future__ import annotations

import statistics
from pathlib import Path

import orjson

import ci
from ci.common import revision
from ci.report.rerun_hints import image_beside, rerun, rerun_test, rows_json_beside, shown
from ci.report.sections import across_json, at_target, comparison_json, first_screen, in_fork, port_step, rebase
from ci.report.view import FAILING, Report
from ci.results.acceptance import Verdict
from ci.results.criteria import registry
from ci.results.merge import RowResult
from ci.stack.change import Upstream
from ci.stack.model import Stack

SCHEMA = Path(__file__).with_name("report.schema.json")  # the document's published JSON Schema


def criterion_id(name: str) -> str:
    """A criterion's stable id for scripts, from the registry (ci.results.criteria.registry)."""
    return registry.ids().get(name, name)


def _upstream(up: Upstream | None) -> dict[str, object] | None:
    return None if up is None else {"pr": up.pr, "state": up.state, "as_of": str(up.as_of)}


def _rerun(r: RowResult, st: Stack) -> dict[str, object]:
    if r.status not in FAILING:
        return {"repro": None, "repro_command": None}
    how = rerun(r, st)
    return {"repro": how.hint, "repro_command": how.command or None, "repro_missing": how.why_not or None}


def _run_document(r: RowResult) -> dict[str, object] | None:
    """The rows.json of the run that holds the row's result (its first failing one, else its first), narrowed to
    the row: what the run was, to read (`ci repro --report` takes from it only the image, by content, and the
    timeout). None where no rows.json lies beside that JUnit file."""
    case = next((c for c in r.cases if c.status != "pass"), r.cases[0] if r.cases else None)
    path = rows_json_beside(case.file) if case else None
    if path is None:
        return None
    from ci.run.rerun import rows_json_read  # the run stage reads its own file; the report only carries it

    doc = rows_json_read.row_document(path, r.id)
    if doc and doc.get("suites_dir"):  # relative to the folder the report was made in, as every path it writes
        doc["suites_dir"] = shown(Path(doc["suites_dir"]))
    return doc


def to_json(report: Report) -> dict[str, object]:
    doc = _report(report)
    if report.comparison:
        doc["comparison"] = comparison_json.to_json(report.comparison)
    if report.upstream:
        doc["upstream"] = rebase.document(report)
    if report.history:
        doc["history"] = across_json.to_json(report)
    return doc


def _report(report: Report) -> dict[str, object]:
    res = report.results
    inputs = [
        {"path": f.path, "status": f.status, "problem": f.problem, "role": "junit", "testcases": len(f.cases)}
        for f in res.inputs
    ]
    for role, b in (("baseline", report.baseline), ("upstream", report.upstream_read)):
        if b:
            inputs.append({"path": b.path, "status": b.status, "problem": b.problem, "role": role, "testcases": 0})
    return {
        "schema": 1,
        "generator": {
            "name": "stackgate",
            "version": ci.__version__,
            "revision": revision.git_revision(),
            "argv": list(report.made_with),
        },
        "stack": {"digest": report.stack.digest},
        "judged": in_fork.document(report),
        "changes": [
            {
                "id": v.change.id,
                "title": v.change.title,
                "track": v.change.track,
                "verdict": v.text,
                "ready": v.ready,
                "gating": v.change.gating,
                "blocked_by": [c.name for c in v.blocking],
                "held_back": at_target.held_back(report, v),
                # its verdict on each target it must hold on, and what it lacks as a whole (the first screen's)
                "targets": [
                    {"target": a.target, "state": a.state, "text": a.text, "command": a.command or None}
                    for a in (at_target.verdicts(report, v) if v.change.upstream else ())
                ],
                "lacks": [{"text": w.text, "command": w.command or None} for w in at_target.whole(report, v)],
                "upstream": _upstream(v.change.upstream),
                "fork": in_fork.to_json(report, v.change.id),
                "tried": _tried(report, v),
                **({"rebase": rebase.to_json(report, v.change.id)} if report.upstream else {}),
                "criteria": [
                    {
                        "id": criterion_id(c.name),
                        "name": c.name,
                        "status": c.status,
                        "evidence": c.evidence,
                    }
                    for c in v.criteria
                ],
            }
            for v in report.verdicts
        ],
        "rows": [
            {
                "id": r.id,
                "status": r.status,
                "target": r.target,
                "suite": r.suite,
                "change": r.change,
                "planned": r.planned is not None,
                "message": r.message,
                "note": r.note,
                **_rerun(r, report.stack),
                "rows_json": _run_document(r),
                "metrics": {name: m.to_json() for name, m in r.metrics.items()},
                **_run_values(r),
                "duplicates": list(r.duplicates),
                "runs": orjson.Fragment(r.runs_json),  # each encoded where it was read
            }
            for r in res.rows
        ],
        "unkeyed": [
            {
                "file": c.file,
                "test": f"{c.classname}::{c.name}",
                "status": c.status,
                "message": c.message,
                "repro_command": rerun_test(c, report.stack) or None,
                # what `ci repro TEST --report` re-runs it from, each checked there against the stack
                "target": c.target,
                "suite": c.suite,
                "image": image_beside(c) if c.status in FAILING else None,
            }
            for c in res.unkeyed
        ],
        "inputs": inputs,
    }


def _tried(report: Report, v: Verdict) -> dict[str, object] | None:
    """A change tried as a port (ci main --try-port): the port (its commits and prerequisites, ids only), whether it
    held, its next step, and the builds compared (each side's vLLM build, by its content id)."""
    t = port_step.tried(report, v.change.id)
    if t is None:
        return None
    command, note = first_screen.next_step(report, v)
    c = report.comparison
    builds = [
        {
            "port_side": p.fork,
            "port_build": p.builds[0],
            "fork_side": p.without,
            "fork_build": p.builds[1],
            "aa_side": p.aa or None,
            "rows": list(p.rows),
            "isolated": p.isolated,
            "problems": list(p.problems),
        }
        for p in (c.ported if c else ())
        if p.change == v.change.id
    ]
    return {
        **t.to_json(),
        "ready": v.ready,
        "lead": port_step.lead(report, v),
        "next": {"command": command or None, "note": note},
        "builds": builds,
    }


def _run_values(r: RowResult) -> dict[str, object]:
    """Each metric's runs, where the row ran more than once: the median of each run's samples, in input order (a
    later report's --baseline judges over these runs, ci.results.baseline)."""
    if len(r.ran) < 2:
        return {}
    values: dict[str, list[float]] = {}
    for c in r.ran:
        for name, m in c.metrics_by_name.items():
            values.setdefault(name, []).append(float(statistics.median(m.samples or (m.value,))))
    return {"run_values": values}
