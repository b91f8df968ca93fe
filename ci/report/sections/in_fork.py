"""What the report judged, and each change as the fork holds it: the report's first line (the fork's name, ref and
commit over its base release, each ablation by its build; or the stock release), the first screen's lead column
(converged, ported, partially ported, absent, unknown; a follow-up fix missing), the next step where the fork lacks
the change (port it: its rows cannot judge it), and report.json's fork entry per change.

The fork comes from the rows themselves (the fork build each ran on, as its bundle recorded it), else from the fork
`ci main` judged (`Report.subject`) or the upstream state given (`--upstream`); with none, the rows ran on stock vLLM.
The first line and the lead column read that one source (`snapshot`), so they cannot disagree: a report whose column
holds a fork's states names that fork first.
"""

from __future__ import annotations

from ci.common.escape import command
from ci.report.view import Report
from ci.results import as_ported
from ci.results.acceptance import Verdict
from ci.upstream.state import ChangeState, Snapshot

NOT_HELD = ("absent", "unknown")


def snapshot(report: Report) -> Snapshot | None:
    return report.subject or report.upstream


def state(report: Report, change: str) -> ChangeState | None:
    snap = snapshot(report)
    return next((c for c in snap.changes if c.change == change), None) if snap else None


def judged(report: Report) -> str:
    """What the rows judged, in words: the first thing the report says."""
    cases = [c for r in report.results.rows for c in r.cases]
    built = {c.fork: _id(c.vllm_build) for c in cases if c.fork and not c.fork_without and not c.fork_port}
    without = {(c.fork_without, _id(c.vllm_build)) for c in cases if c.fork_without}
    tried = {(c.fork_port, c.fork.rsplit(" ", 1)[0], _id(c.vllm_build)) for c in cases if c.fork and c.fork_port}
    if built or tried:
        said = [f"the fork {f}" + (f" (build {b})" if b else "") for f, b in sorted(built.items())]
        said += [
            f"the fork {f} with the port of #{x} tried on it" + (f" (build {b})" if b else "")
            for x, f, b in sorted(tried)
        ]
        said += [f"the fork without #{x}" + (f" (build {b})" if b else "") for x, b in sorted(without)]
        return "; ".join(said)
    snap = snapshot(report)  # the one source of the lead column too
    if snap is not None:
        how = snap.base_how if snap.base_how.startswith(snap.base_ref) else f"{snap.base_ref}, {snap.base_how}"
        how = how.rstrip(", ")  # an upstream.json of schema 1 does not say how
        base = f"vLLM {snap.base_version} ({how})" if snap.base_version else "a base release not known yet"
        ran = sorted({c.vllm_version for c in cases if c.vllm_version and not c.fork})
        rows = f"; no row ran on it (those that ran here ran on stock vLLM {', '.join(ran)})" if ran else ""
        given = "" if report.subject is not None else " (its state given by --upstream)"
        return f"the fork {snap.name} {snap.ref} ({snap.head[:12]}) over {base}{given}{rows}"
    versions = sorted({c.vllm_version for c in cases if c.vllm_version}) or _locked(report)
    said = f"stock vLLM {', '.join(versions) or 'not recorded'}"
    return f"{said}, by --stock" if report.stock else f"{said} (no fork configured: set STACKGATE_FORK)"


def _id(build: str | None) -> str:
    return (build or "").removeprefix("sha256:")[:12]


def _locked(report: Report) -> list[str]:
    """The vLLM releases the report's targets lock, where no row recorded one."""
    from ci.images.lock import locked_vllm

    targets = {r.target for r in report.results.rows if r.planned is not None}
    return sorted({v for t in targets if t in report.stack.targets and (v := locked_vllm(report.stack.targets[t]))})


def words(report: Report, change: str) -> str:
    """The change in the fork, in a few words ("" where no fork was judged): its state and each follow-up missing."""
    s = state(report, change)
    if s is None:
        held = as_ported.held(report.results, change)
        return held[1] if held else ""
    said = s.state + (" in the fork" if s.state in NOT_HELD else "")
    ch = report.stack.changes.get(change)
    fixes = {f.ref: f.what for f in ch.upstream.follow_ups} if ch and ch.upstream else {}
    for ref in s.follow_ups_missing:
        said += f"; follow-up #{ref.rsplit('#', 1)[-1]} missing (it fixes {fixes.get(ref, 'a bug of it')})"
    return said


def next_step(report: Report, verdict: Verdict) -> tuple[str, str] | None:
    """Where the fork lacks the change: port it (its rows cannot judge what the fork does not carry); where whether
    it holds it is not known: the fix. None otherwise."""
    s = state(report, verdict.change.id)
    up = verdict.change.upstream
    if s is None or up is None or s.state not in NOT_HELD:
        return None
    if s.state == "unknown":
        return "", f"make the fork's state known: {s.fix}" if s.fix else "make the fork's state known (ci fork)"
    snap = snapshot(report)
    assert snap is not None
    if up.merge_commit:
        pick = command(["git", "-C", snap.fork, "cherry-pick", "-x", up.merge_commit])
        return pick, f"port it into the fork (upstream's merge of #{up.pr}); its rows then judge it"
    was = "closed unmerged" if up.state == "closed" else up.state
    return "", f"port {up.repo}#{up.pr} into the fork ({was} upstream); its rows then judge it"


def to_json(report: Report, change: str) -> dict[str, object] | None:
    """report.json's `fork` of a change: its state in the fork judged and the fork commits that carry it."""
    s = state(report, change)
    if s is None:
        held = as_ported.held(report.results, change)
        return {"build": held[0], "state": held[1]} if held else None
    return {
        "state": s.state,
        "commits": list(s.carried_by),
        "detail": s.detail,
        "flags": list(s.flags),
        "follow_ups_missing": list(s.follow_ups_missing),
        "fix": s.fix or None,
    }


def document(report: Report) -> dict[str, object]:
    """report.json's `judged`: what the rows judged, and the fork where one was."""
    snap = snapshot(report)
    fork = None
    if snap is not None:
        base = {"version": snap.base_version, "ref": snap.base_ref, "commit": snap.base, "how": snap.base_how}
        fork = {
            "name": snap.name,
            "checkout": snap.fork,
            "ref": snap.ref,
            "commit": snap.head,
            "base": base if snap.base_version else None,
            "options": list(snap.options),
        }
    kind = "fork" if snap is not None or any(c.fork for r in report.results.rows for c in r.cases) else "stock"
    return {"subject": kind, "said": judged(report), "fork": fork}
