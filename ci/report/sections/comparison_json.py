"""The comparison section's object in report.json (`python -m ci report A --compare B`)."""

from __future__ import annotations

from ci.results.sides import Comparison, Summary, Versus


def _summary_json(s: Summary | None) -> dict[str, object] | None:
    if s is None:
        return None
    return {
        "n": s.n,
        "runs": s.runs,
        "median": s.median,
        "min": s.low,
        "max": s.high,
        "run_values": list(s.values),
        "samples": list(s.samples),
    }


def _versus_json(v: Versus | None) -> dict[str, object] | None:
    if v is None:
        return None
    sh = v.shift
    return {
        "delta": v.delta,
        "ratio": v.ratio,
        "hodges_lehmann": sh.estimate,
        "interval": list(sh.interval) if sh.interval else None,
        "confidence": sh.confidence,
        "method": sh.method,
        "ties": sh.ties,
    }


def to_json(c: Comparison) -> dict[str, object]:
    return {
        "reference": c.labels[0],
        "sides": [
            {
                "label": s.label,
                "inputs": list(s.paths),
                "vllm_versions": list(s.vllm_versions),
                "caches": list(s.caches),
                "rows": len(s.rows),
                "runs": s.cases,
                "problems": [{"path": f.path, "status": f.status, "problem": f.problem} for f in s.results.problems()],
                "verdicts": [
                    {"id": v.change.id, "verdict": v.text, "ready": v.ready, "blocked_by": [k.name for k in v.blocking]}
                    for v in s.verdicts
                ],
            }
            for s in c.sides
        ],
        "metrics": [
            {
                "row": ln.row,
                "metric": ln.metric,
                "unit": ln.unit,
                "sides": {label: _summary_json(s) for label, s in zip(c.labels, ln.sides, strict=True)},
                "versus_reference": {
                    label: _versus_json(v) for label, v in zip(c.labels[1:], ln.versus[1:], strict=True)
                },
            }
            for ln in c.lines
        ],
        "ported": [
            {
                "change": p.change,
                "fork": p.fork,
                "without": p.without,
                "builds": list(p.builds),
                "rows": list(p.rows),
                "presence": list(p.seen),
                "isolated": p.isolated,
                "problems": list(p.problems),
                "ready": p.verdict.ready,
                "verdict": p.verdict.text,
                "criteria": [{"name": k.name, "status": k.status, "evidence": k.evidence} for k in p.verdict.criteria],
                "aa": p.aa or None,
                # the A/A floor of each row and metric the change is timed on: what a bound must be wider than
                "floors": [
                    {"row": row, "metric": name, "pct": f.pct, "runs": f.runs}
                    for row, by_name in p.floors.items()
                    for name, f in by_name.items()
                ],
            }
            for p in c.ported
        ],
        "missing": [
            {
                "row": row,
                "on": [lb for lb, here in zip(c.labels, present, strict=True) if here],
                "absent_from": [lb for lb, here in zip(c.labels, present, strict=True) if not here],
            }
            for row, present in c.partial
        ],
    }
