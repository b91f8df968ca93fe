"""Each change's verdict on each target it must hold on, in words a fork maintainer acts on: ready; fails (the
criterion, the rows and the number against its bound); not run (how many rows, and the command that runs them there,
the lock first where the target has none); and what the change as a whole lacks (a baseline, its focused test).

The first screen and report.json say these; the change's own section keeps every criterion's evidence whole."""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ci.common.escape import command
from ci.common.tables import counted
from ci.report import cards
from ci.report.sections import in_fork
from ci.report.view import Report
from ci.results.acceptance import Verdict
from ci.results.criteria.registry import (
    CRITERIA,
    EFFECT,
    MATRIX,
    NO_JIT,
    NO_SIDE_WITHOUT,
    REGRESSION,
    TIED,
    baked,
    compiled_in,
)
from ci.results.merge import RowResult
from ci.stack.change import Change

# the criterion in the words the first screen uses (its full title is in the change's section)
SHORT = {r.name: r.short for r in CRITERIA}
# the criteria said target by target (a per-target rule's numbers; the matrix as each target's rows, planned or not;
# the JIT check as the rows it fails): every other one, a criterion added to the registry too, is said for the whole
SAID_PER_TARGET = frozenset({*(r.name for r in CRITERIA if r.per_target is not None), MATRIX, NO_JIT})
_LONG = 100


@dataclass(frozen=True, kw_only=True)
class AtTarget:
    target: str  # "cuda-sm90"
    short: str  # "H200"
    state: str  # "ready", "fails", "not run", "waived", "no rows", "not in this report"
    text: str  # what the state rests on, in words and numbers
    command: str = ""  # what runs the rows there, where the state is "not run" (or partly so)
    where: str = ""  # where the command must run ("on a GB10 host"), plain text


def said(a: AtTarget) -> str:
    """The state and what it rests on, as the first screen says it: "fails: …", "not in this report (filtered by
    --target)"."""
    if a.state == "ready":
        return a.state
    return f"{a.state} ({a.text})" if a.state == "not in this report" else f"{a.state}: {a.text}"


@dataclass(frozen=True, kw_only=True)
class Whole:
    """What the change lacks beyond its targets: a baseline, a passing focused test."""

    text: str
    command: str = ""


_memo: tuple[weakref.ref[Report], dict[tuple[str, str], Any]] | None = None  # the last report's answers


def _once(report: Report, key: tuple[str, str], make: Callable[[], Any]) -> Any:
    """`make()`, once per report and key: the first screen, the verdicts table and report.json each ask."""
    global _memo
    if _memo is None or _memo[0]() is not report:
        _memo = (weakref.ref(report), {})
    found = _memo[1]
    if key not in found:
        found[key] = make()
    return found[key]


def verdicts(report: Report, verdict: Verdict) -> list[AtTarget]:
    return list(_once(report, ("verdicts", verdict.change.id), lambda: _verdicts(report, verdict)))


def _verdicts(report: Report, verdict: Verdict) -> list[AtTarget]:
    change = verdict.change
    rows = [r for r in report.results.rows if r.change == change.id and r.planned is not None]
    # an imported change answers to every target its tracking issue names; the stack's own (self-test, composition)
    # to the targets it has rows on
    targets = [
        t
        for t in report.stack.targets.values()
        if (t.required and change.upstream) or any(r.target == t.id for r in rows)
    ]
    out = []
    for t in targets:
        mine = [r for r in rows if r.target == t.id]
        short = cards.named(t, cards.recorded(rows, t.id))  # the card its rows ran on, else the planned hardware
        if not mine:
            why = change.waived_targets.get(t.id)
            state, text = ("waived", why) if why else ("no rows", "none planned, though its tracking issue names it")
            if by := report.left_out.get((change.id, t.id)):  # planned, but filtered out: never "none planned"
                state, text = "not in this report", f"filtered by {by}"
            out.append(AtTarget(target=t.id, short=short, state=state, text=text))
            continue
        unrun = [r for r in mine if not r.cases]
        fails = _fails(verdict, t.id, mine)
        command, where = _command(report, t.id, unrun[0]) if unrun else ("", "")
        if fails:
            text = "; ".join(fails) + (f"; {len(unrun)} not run" if unrun else "")
            out.append(AtTarget(target=t.id, short=short, state="fails", text=text, command=command, where=where))
        elif len(unrun) == len(mine):
            text = counted(len(mine), "row")
            out.append(AtTarget(target=t.id, short=short, state="not run", text=text, command=command, where=where))
        elif unrun:
            ran = len(mine) - len(unrun)
            text = f"{len(unrun)} of {counted(len(mine), 'row')} not run"
            text += f"; the {ran} that ran hold" if ran else ""
            out.append(AtTarget(target=t.id, short=short, state="not run", text=text, command=command, where=where))
        else:
            held = "the 1 row holds" if len(mine) == 1 else f"all {len(mine)} rows hold"
            out.append(AtTarget(target=t.id, short=short, state="ready", text=held))
    return [_ran_on(a, rows) for a in out]


def _ran_on(at: AtTarget, rows: list[RowResult]) -> AtTarget:
    """The cards the target's rows ran on, said after what the state rests on (its label already names them:
    ci.report.cards)."""
    seen = cards.recorded(rows, at.target)
    return replace(at, text=f"{at.text}; ran on {' and '.join(seen)}") if seen else at


def whole(report: Report, verdict: Verdict) -> list[Whole]:
    return list(_once(report, ("whole", verdict.change.id), lambda: _whole(report, verdict)))


def _whole(report: Report, verdict: Verdict) -> list[Whole]:
    out = []
    failing = any(r.change == verdict.change.id and r.status in ("failure", "error") for r in report.results.rows)
    no_baseline = any(c.name == REGRESSION and "no baseline report given" in c.evidence for c in verdict.criteria)
    no_without = any(c.name == EFFECT and c.short == NO_SIDE_WITHOUT for c in verdict.criteria)
    for c in verdict.criteria:
        if c.status == "pass" or c.name in SAID_PER_TARGET:
            continue
        if c.name == EFFECT and no_without and no_baseline:
            continue  # said with the baseline: one run without the change gives both
        if c.name == EFFECT:
            out.append(Whole(text=f"{SHORT[c.name]} {'fails' if c.status == 'fail' else 'not judged'}: {c.short}"))
            continue
        if c.name == REGRESSION and no_baseline:
            needs = "needs a baseline" + (" and a run without it" if no_without else "")
            out.append(Whole(text=needs, command=_baseline_command(report)))
        elif c.status == "fail":
            if c.name == TIED and failing:
                continue  # its failing rows are said per target, with their causes beside them
            said = _after_rule(c.evidence) if c.name == REGRESSION else c.evidence.split(" (benchmark: ")[0]
            out.append(Whole(text=f"{SHORT[c.name]} fails: {_cut(said)}"))
        else:
            out.append(Whole(text=f"{SHORT[c.name]} not judged: {_cut(_after_rule(c.evidence).split(': ', 1)[0])}"))
    return _joined(out)


def _joined(lacks: list[Whole]) -> list[Whole]:
    """Criteria not judged for one reason, said once ("effect and allowed regression not judged: needs 4 runs a
    side")."""
    out: list[Whole] = []
    for w in lacks:
        what, sep, why = w.text.partition(" not judged: ")
        same = next((i for i, o in enumerate(out) if sep and o.text.endswith(f"{sep}{why}") and not o.command), None)
        if same is None or w.command:
            out.append(w)
        else:
            first = out[same].text.partition(sep)[0]
            out[same] = Whole(text=f"{first} and {what}{sep}{why}")
    return out


def held_back(report: Report, verdict: Verdict) -> str:
    """The verdict in a line: "ready", or "held back by" what holds it back, target by target."""
    if verdict.ready:
        return "ready"
    shown = [a for a in verdicts(report, verdict) if a.state not in ("ready", "waived")]
    parts = [f"{a.short}: {a.state} ({a.text})" for a in shown]
    parts += [w.text + (f": {w.command}" if w.command else "") for w in whole(report, verdict)]
    return "held back by " + "; ".join(parts) if parts else "not ready"


def _fails(verdict: Verdict, target: str, rows: list[RowResult]) -> list[str]:
    """The per-target criteria that fail on this target's rows, each said as the number against its bound (the
    verdict's own judgement per target where it kept one)."""
    out = []
    failing = [r for r in rows if r.status in ("failure", "error", "conflict")]
    if failing:
        out.append(f"{len(failing)} of {counted(len(rows), 'row')}")
    for name, clauses, fallback in _failing_criteria(verdict, target, rows):
        said = "; ".join(f"{text} on {counted(n, 'row')}" for text, n in clauses) or fallback
        out.append(f"{SHORT.get(name, name)}: {said}")
    return out


def _failing_criteria(
    verdict: Verdict, target: str, rows: list[RowResult]
) -> list[tuple[str, list[tuple[str, int]], str]]:
    """Each per-target criterion failing on the target: its name, its clauses (the number against its bound, the rows
    it fails on) and its own evidence cut short, for a criterion not said in numbers."""
    change = verdict.change
    judged = {c.name: dict(c.by_target) for c in verdict.criteria}
    out = []
    for rule in CRITERIA:
        if rule.per_target is None or rule.name == MATRIX:
            continue
        status = judged.get(rule.name, {}).get(target)
        if status is None:
            status, _ = rule.per_target(change, rows)
        if status == "fail":
            out.append((rule.name, _said(change, rule.name, rows), _cut(rule.per_target(change, rows)[1])))
    return out


def _said(change: Change, name: str, rows: list[RowResult]) -> list[tuple[str, int]]:
    """A failing criterion as its number against its bound, and the rows it fails on: [("3.10x > 1.2x", 1)]."""
    acc = change.acceptance
    ran = [r for r in rows if r.ran]
    if name == "cold and warm measurements reported separately" and acc.measurements.max_cold_warm_ratio:
        bound = acc.measurements.max_cold_warm_ratio
        over = [runs[0][0] for r in ran if (runs := r.cold_warm_runs) and runs[0][0] > bound]
        return [(f"{max(over):.2f}x > {bound:g}x", len(over))] if over else []
    if name in ("numerical tolerance against the named reference backend", "graph-replay assertion"):
        metric = acc.tolerance.metric if name.startswith("numerical") else acc.graph_replay.metric
        holds = (lambda v: v <= acc.tolerance.max) if name.startswith("numerical") else acc.graph_replay.holds
        bad = [m.value for r in ran for c in r.ran if (m := c.metric(metric)) and not holds(m.value)]
        want = (
            f"<= {acc.tolerance.max:g}" if name.startswith("numerical") else acc.graph_replay.rule.replace(metric, "")
        )
        worst = max(bad, key=abs) if bad else None
        rows_bad = sum(any((m := c.metric(metric)) and not holds(m.value) for c in r.ran) for r in ran)
        return [(f"{metric} {worst:g}, wants {want.strip()}", rows_bad)] if bad else []
    if name == "no runtime JIT fallback where AOT/warm-up is expected":
        after_bake = [r for r in ran if any(baked(c) and compiled_in(c) for c in r.ran)]
        late = [r for r in ran if r not in after_bake and any(compiled_in(c) for c in r.ran)]
        return [("compiles after the bake", len(after_bake))] * bool(after_bake) + [
            ("compiles after ready (no bake: JIT allowed)", len(late))
        ] * bool(late)
    return []


def _command(report: Report, target: str, row: RowResult) -> tuple[str, str]:
    """What runs a target's unrun rows: its lock first where it has none (a session would stop there)."""
    from ci.images.build import lock_path
    from ci.images.lock import locked_vllm

    t = report.stack.targets[target]
    where = cards.host(t, cards.recorded([r for r in report.results.rows if r.change == row.change], target))
    snap = in_fork.snapshot(report)  # the fork judged (or given by --upstream), named as the user gave it
    fork = snap.options if snap else ()
    session = command(["nox", "-s", f"{t.sessions[0]}_{row.suite}", *(["--", *fork] if fork else [])])
    base = snap.base_version if snap else ""
    if base and (locked := locked_vllm(t)) and locked != base:  # the session would stop there: re-lock first
        said = f"(the fork is on vLLM {base}, the lock {locked}), then {session} on {where}"
        return command(["python", "-m", "ci", "lock", t.id, "--vllm", base]), said
    if t.runs_on == "image" and not lock_path(t).is_file():
        return command(
            ["python", "-m", "ci", "lock", t.id]
        ), "on a host that reaches its package index, then its session"
    return session, f"on {where}"


def _baseline_command(report: Report) -> str:
    argv = list(report.made_with)
    if "report" not in argv:  # a report made by `ci main`: its results folders, as a reader would name them
        return "python -m ci report RESULTS --out DIR --baseline PREVIOUS/report.json"
    return command(["python", "-m", "ci", *argv]) + " --baseline PREVIOUS/report.json"


def _after_rule(evidence: str) -> str:
    return evidence.split("; ", 1)[1] if "; " in evidence else evidence


def _cut(text: str) -> str:
    text = re.sub(r"\s+", " ", text)
    return text if len(text) <= _LONG else text[: _LONG - 1] + "…"
