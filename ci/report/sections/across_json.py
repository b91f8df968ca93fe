"""report.json's `history`: the history file and this build's place in it, the rule applied, the rows quarantined as
flaky or reinstated, each failing row across builds (with its bisect range), each change's verdict under the other
gate setting, and the trends."""

from __future__ import annotations

from ci.report.sections import across_view
from ci.report.view import Report


def to_json(report: Report) -> dict[str, object] | None:
    a = report.history
    if a is None:
        return None
    q = a.rule.quarantine
    last = a.last_on_branch
    return {
        "file": str(a.path),
        "build": {
            "key": a.build.key,
            "at": a.build.at.isoformat(),
            "branch": a.build.branch,
            "commit": a.build.commit,
            "number": a.build.number,
        },
        "earlier_builds": len(a.earlier),
        "last_on_branch": {"id": last.id, "number": last.number, "at": last.at.isoformat()} if last else None,
        "rule": {
            "window_days": q.window_days,
            "min_runs": q.min_runs,
            "fail_rate": list(q.fail_rate),
            "reinstate_after": q.reinstate_after,
            "gate": q.gate,
            "confirm_on_commits": a.rule.confirm_on_commits,
        },
        "flaky": [
            {
                "row": row,
                "change": a.change_of(row),
                "target": a.target_of(row),
                "quarantined": f.quarantined,
                "reinstated": f.reinstated,
                "runs": f.runs,
                "fails": f.fails,
                "both_on": list(f.both_on) if f.both_on else None,
                "said": f.words(),
            }
            for row, f in a.flaky.items()
        ],
        "failing": [
            {
                "row": row,
                "new": f.new,
                "confirmed": f.confirmed,
                "since": {"build": f.since.build, "number": f.since.number, "at": f.since.at.isoformat()},
                "builds": f.builds,
                "commits": list(f.commits),
                "bisect": list(f.bisect) if f.bisect else None,
                "bisect_command": across_view.bisect(report, row)[1] or None,
                "said": f.words(),
            }
            for row, f in a.failing.items()
        ],
        "otherwise": [
            {
                "change": change,
                "ready": v.ready,
                "verdict": v.text,
                "if": "not counted" if q.gate == "hold" else "counted",
            }
            for change, v in a.otherwise.items()
        ],
        "trends": [
            {
                "change": t.change,
                "target": t.target,
                "metric": t.metric,
                "unit": t.unit,
                "points": [
                    {"build": p.build, "at": p.at.isoformat(), "value": p.value, "rows": p.rows} for p in t.points
                ],
                "mean_7_days": t.mean,
                "best_30_days": t.best,
                "floor_pct": t.floor_pct,
                "moved_pct": t.moved_pct,
                "headline": t.headline,
            }
            for t in a.trends
        ],
    }
