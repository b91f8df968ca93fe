"""The acceptance criteria, one registry entry each: its name, what it reads, how it judges and what blocks.

Adding a criterion is one `Rule` here plus the stack field it reads (ci.stack.change.Acceptance). A per-target rule
is judged on each target with planned rows, a whole-change rule on all results; any status but "pass" blocks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from ci.common.tables import counted
from ci.results.criteria.effect import effect as _effect
from ci.results.criteria.regression import regression as _regression

# the parts, also named through this module (ci.results.acceptance, ci.report.json_doc, the tests)
from ci.results.criteria.rule import (
    COLD_WARM,
    EFFECT,
    GRAPH,
    MATRIX,
    NO_JIT,
    REGRESSION,
    TIED,
    TOLERANCE,
    Criterion,
    Evidence,
    Rule,
    Status,
    combine,
    each_target,
    listed,
    ran_rows,
)
from ci.results.criteria.rule import NO_SIDE_WITHOUT as NO_SIDE_WITHOUT  # the report names it through this module
from ci.results.junit import Case
from ci.results.merge import RowResult, paid_once
from ci.results.node_ids import matcher
from ci.stack.change import Change


def _tied(ev: Evidence) -> Criterion:
    change, results = ev.change, ev.results
    reg = change.acceptance.regression
    parts: list[tuple[Status, str]] = []
    cases = [c for r in results.rows if r.change == change.id for c in r.cases] + [
        c for c in results.unkeyed if c.change in (None, change.id)
    ]
    for test in reg.tests:
        hits = list(filter(matcher(test), cases))
        counts = {s: sum(c.status == s for c in hits) for s in ("pass", "failure", "error", "skipped")}
        tally = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        distinct = len({c.row or f"{c.classname}::{c.name}" for c in hits})
        if distinct < len(hits):  # a row run several times (a timing protocol's runs): each result is one run
            tally += f" ({counted(len(hits), 'run')} of {counted(distinct, 'row')})"
        if not hits:
            parts.append(("missing", f"{test}: no result"))
        elif counts["failure"] or counts["error"]:
            parts.append(("fail", f"{test}: {tally}"))
        elif not counts["pass"]:
            parts.append(("missing", f"{test}: {tally}, none ran"))
        else:
            parts.append(("pass", f"{test}: {tally}"))
    crit = combine(TIED, parts)
    return Criterion(name=TIED, status=crit.status, evidence=f"{crit.evidence} (benchmark: {reg.benchmark})")


def _cold_warm(change: Change, rows: list[RowResult]) -> tuple[Status, str]:
    want = change.acceptance.measurements
    ran = ran_rows(rows)
    if not ran:
        return "missing", f"no row ran ({len(rows)} planned)"
    absent: dict[str, list[str]] = {}
    wrong: dict[str, list[str]] = {}
    for r in ran:
        by_name = [c.metrics_by_name for c in r.ran]
        for phase, names in (("cold", want.cold), ("warm", want.warm)):
            for name in names:
                found = [m for metrics in by_name if (m := metrics.get(name))]
                if not found:
                    absent.setdefault(f"{phase} {name}", []).append(r.id)
                elif any(m.phase != phase for m in found):
                    wrong.setdefault(f"{name} recorded as {found[0].phase}, not {phase}", []).append(r.id)
    slow, unknown, shared = [], [], []
    if want.max_cold_warm_ratio is not None:
        for r in ran:  # judged on the row's worst run alone on its GPU, where it ran more than once
            every = r.cold_warm_runs
            runs = [run for run in every if not run[1].gpu_shared_with]
            if every and not runs:
                shared.append(f"{r.id} (with {', '.join(every[0][1].gpu_shared_with or ())})")
            elif not runs:
                unknown.append(r.id)
            elif (worst := runs[0])[0] > want.max_cold_warm_ratio:
                of = f", the worst of {len(runs)} runs ({runs[-1][0]:.2f}x–{worst[0]:.2f}x)" if len(runs) > 1 else ""
                paid = paid_once(worst[1])
                slow.append(f"{r.id} ({worst[0]:.2f}x{of}" + (f"; {paid})" if paid else ")"))
    if wrong or slow:
        why = [f"{k} on {listed(v)}" for k, v in wrong.items()]
        why += [f"cold first request over {want.max_cold_warm_ratio:g}x warm on {listed(slow)}"] if slow else []
        return "fail", "; ".join(why)
    if absent or unknown or shared:
        why = [f"{k} absent on {listed(v)}" for k, v in absent.items()]
        why += [f"cold_warm_ratio absent on {listed(unknown)}"] if unknown else []
        why += [f"the cold/warm bound not judged from runs that shared their GPU: {listed(shared)}"] if shared else []
        return "missing", "; ".join(why)
    bound = f", cold within {want.max_cold_warm_ratio:g}x warm" if want.max_cold_warm_ratio is not None else ""
    carry = f"{counted(len(ran), 'row')} {'carries' if len(ran) == 1 else 'carry'}"
    return "pass", f"{carry} cold ({', '.join(want.cold)}) and warm ({', '.join(want.warm)}){bound}"


def _no_jit(change: Change, rows: list[RowResult], warmers: Mapping[str, tuple[str, ...]]) -> tuple[Status, str]:
    """Judged only on rows that measured their workload: a row that failed before measuring compiled nothing because
    it ran nothing, which is no evidence. In a baked image or on a baked host every compile counts (the bake should
    have made it); a run without a bake (`--cold`, `--unbaked`: JIT allowed) compiles before ready by design, so
    there only what compiled or traced after the engine reported ready is a fallback, named as the run measured it."""
    want = {*change.acceptance.measurements.cold, *change.acceptance.measurements.warm}
    ran = [r for r in ran_rows(rows) if any(c.metrics_by_name.get(n) for c in r.ran for n in want)]
    if not ran:
        return "missing", f"no row measured its workload ({len(ran_rows(rows))} ran, {len(rows)} planned)"
    unbaked = sorted({r.id for r in ran for c in r.ran if not baked(c)})
    compiled: list[str] = []
    unknown = []
    for r in ran:
        runs = [c for c in r.ran if c.jit_compiles is not None or _late(c)]
        unknown += [r.id] * (len(runs) < len(r.ran))
        # a run's own account, said once with the runs it held in (runs of one build compile the same kernels; a
        # trace's seconds differ from run to run, so they are given as their range over those runs)
        said: dict[str, list[list[float]]] = {}  # the account without its seconds -> each run's seconds
        for c in runs:
            if d := compiled_in(c, warmers):
                said.setdefault(_SECONDS.sub("", d), []).append([float(x) for x in _SECONDS.findall(d)])
        for d, times in said.items():
            seconds = [t for run in times for t in run]
            held = f" (in {len(times)} of {len(r.ran)} runs)" if len(r.ran) > 1 else ""
            compiled.append(f"{r.id}: {d}" + (f" ({_span(seconds)} s)" if seconds else "") + held)
    if compiled:  # only what the evidence shows is described; the rest is counted
        return "fail", listed(compiled, len(compiled))
    if unknown:
        return "missing", f"stackgate.jit.compiles absent on {listed(sorted(set(unknown)))}"
    if unbaked:
        before = sum(c.jit_compiles or 0 for r in ran for c in r.ran if not baked(c))
        return "missing", (
            f"0 compiles after ready, but ran without an ahead-of-time cache (stackgate.aot; {before} compiles before "
            f"ready, JIT allowed): {listed(unbaked)}"
        )
    every = f"{'the' if len(ran) == 1 else 'all'} {counted(len(ran), 'row')}"
    return "pass", f"0 compiles and no new cache files on {every} that measured, each with a baked cache"


_SECONDS = re.compile(r" \((\d+(?:\.\d+)?) s\)")  # a trace's time in a run's account ("frame (0.43 s)")


def _span(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:g}" if lo == hi else f"{lo:g}–{hi:g}"


def baked(c: Case) -> bool:
    return c.aot not in (None, "none")


def _late(c: Case) -> float:
    after = c.metrics_by_name.get("compiles_after_ready")
    return after.value if after else 0.0


def compiled_in(c: Case, warmers: Mapping[str, tuple[str, ...]] | None = None) -> str:
    """What one run compiled that it should not have, in words; "" where nothing. Kernel names come with their counts
    ("k ×2") where the harness recorded them so, and the count is the one those names account for; with `warmers`
    (kernel -> the stack's changes whose warm-up launches it), each name says which change would warm it."""
    late, traced = _late(c), f"; torch.compile traced after ready: {c.jit_traced}" if c.jit_traced else ""
    if not baked(c):  # JIT allowed: what came after ready is the fallback, what came before it is the cold start
        if not late and not c.jit_traced:
            return ""
        kernels = _by_warmer(c.after_ready_kernels, warmers or {}) or "kernels not named"
        before = f" ({c.jit_compiles - late:g} before ready, no bake: JIT allowed)" if c.jit_compiles else ""
        return f"{late:g} compiles after ready: {kernels}{before}{traced}"
    if not (c.jit_compiles or late or c.jit_cache_new_files or c.jit_traced):
        return ""
    kernels = _by_warmer(c.jit_kernels, warmers or {}) or "kernels not named"
    files = f", {c.jit_cache_new_files} new cache files" if c.jit_cache_new_files else ""
    after = f", {late:g} after ready" if late else ""
    return f"{c.jit_compiles or 0} compiles after the bake{after}{files} ({kernels}){traced}"


def _by_warmer(kernels: Sequence[str], warmers: Mapping[str, tuple[str, ...]]) -> str:
    """Kernel names grouped by the changes whose warm-up would compile them before ready ("a, b ×2 (#48804 warms
    them); c (no change of the stack warms it)"); plain names where the stack names no warm-up at all."""
    if not warmers:
        return ", ".join(kernels)
    groups: dict[tuple[str, ...], list[str]] = {}
    for k in kernels:
        groups.setdefault(warmers.get(k.split(" ×", 1)[0], ()), []).append(k)
    said = []
    for by, names in sorted(groups.items(), key=lambda g: not g[0]):
        them = "them" if len(names) > 1 else "it"
        verb = "warms" if len(by) == 1 else "warm"
        who = f"{' and '.join(by)} {verb} {them}" if by else f"no change of the stack warms {them}"
        said.append(f"{', '.join(names)} ({who})")
    return "; ".join(said)


def _matrix_everywhere(ev: Evidence) -> Criterion:
    """Every planned row passed on every target that has some, and every target the tracking issue names
    has rows, or the change says why it need not."""
    parts = [(s, f"{t}: {e}") for t, rows in ev.by_target.items() for s, e in [_matrix(ev.change, rows)]]
    for target in ev.required_targets:
        if target in ev.by_target:
            continue
        waived = ev.change.waived_targets.get(target)
        parts.append(
            ("pass", f"{target}: no planned row, waived: {waived}")
            if waived
            else (
                "missing",
                f"{target}: no planned row, and the tracking issue names this target "
                "(add rows, or a waived_targets entry saying why)",
            )
        )
    return combine(MATRIX, parts)


def _matrix(change: Change, rows: list[RowResult]) -> tuple[Status, str]:
    by_status: dict[str, list[str]] = {}
    for r in rows:
        by_status.setdefault(r.status, []).append(r.id)
    tally = ", ".join(f"{len(v)} {k}" for k, v in by_status.items())
    bad = [i for s in ("failure", "error", "conflict") for i in by_status.get(s, [])]
    gaps = [i for s in ("not run", "incomplete", "skipped") for i in by_status.get(s, [])]
    if bad:
        return "fail", f"{tally} of {len(rows)}; failing: {listed(bad)}"
    if gaps:
        return "missing", f"{tally} of {len(rows)}"
    return "pass", f"all {len(rows)} planned rows passed"


def _threshold(rows: list[RowResult], metric: str, ok: Callable[[float], bool]) -> tuple[Status, str]:
    ran = ran_rows(rows)
    if not ran:
        return "missing", f"no row ran ({len(rows)} planned)"
    bad, absent, values = [], [], []
    for r in ran:
        found = [m for c in r.ran if (m := c.metrics_by_name.get(metric))]
        if not found:
            absent.append(r.id)
        values += [m.value for m in found]
        if off := [m for m in found if not ok(m.value)]:  # a row run several times: its runs that broke the rule
            runs = f"; {len(off)} of {len(found)} runs" if len(found) > 1 else ""
            bad.append(f"{r.id} ({' '.join([', '.join(f'{m.value:g}' for m in off), off[0].unit]).strip()}{runs})")
    if bad:
        return "fail", f"violated on {listed(bad)}"
    if absent:
        return "missing", f"{metric} absent on {listed(absent)}"
    return "pass", f"held on {len(ran)} row{'' if len(ran) == 1 else 's'} (observed {min(values):g} to {max(values):g})"


def _tolerance_rule(change: Change) -> str:
    tol = change.acceptance.tolerance
    ref = tol.reference
    against = "the row's own backend" if ref.backend == "row" else ref.backend
    if ref.kv_cache_dtype:
        against += f", kv {ref.kv_cache_dtype}"
    return f"{tol.metric} <= {tol.max:g} {tol.unit} against {against}" + (f" ({ref.variant})" if ref.variant else "")


def _tolerance(change: Change, rows: list[RowResult]) -> tuple[Status, str]:
    tol = change.acceptance.tolerance
    return _threshold(rows, tol.metric, lambda v: v <= tol.max)


def _graph(change: Change, rows: list[RowResult]) -> tuple[Status, str]:
    g = change.acceptance.graph_replay
    return _threshold(rows, g.metric, g.holds)


CRITERIA: tuple[Rule, ...] = (
    Rule(
        name=TIED,
        id="tied",
        short="its focused test",
        field="regression",
        reads="acceptance.regression.tests: their testcases' outcomes",
        whole=_tied,
    ),
    Rule(
        name=COLD_WARM,
        id="cold_warm",
        short="cold/warm",
        field="measurements",
        reads="acceptance.measurements: the cold and warm metrics of every row that ran",
        per_target=_cold_warm,
    ),
    Rule(
        name=NO_JIT,
        id="no_jit",
        short="no JIT",
        field="",
        reads="stackgate.jit.* properties and compiles_after_ready of every row that ran; upstream.warms",
        whole=lambda ev: each_target(NO_JIT, ev, lambda change, rows: _no_jit(change, rows, ev.warmers)),
    ),
    Rule(
        name=MATRIX,
        id="matrix",
        short="matrix",
        field="",
        reads="the status of every planned row; targets.yaml `required`; the change's waived_targets",
        whole=_matrix_everywhere,
    ),
    Rule(
        name=TOLERANCE,
        id="tolerance",
        short="tolerance",
        field="tolerance",
        reads="acceptance.tolerance: its metric on every row that ran",
        per_target=_tolerance,
        rule=_tolerance_rule,
    ),
    Rule(
        name=GRAPH,
        id="graph_replay",
        short="graph replay",
        field="graph_replay",
        reads="acceptance.graph_replay: its metric on every row that ran",
        per_target=_graph,
        rule=lambda change: change.acceptance.graph_replay.rule,
    ),
    Rule(
        name=EFFECT,
        id="effect",
        short="effect",
        field="effect",
        reads="acceptance.effect: each metric here and on the side without the change, with the A/A floor",
        whole=_effect,
    ),
    Rule(
        name=REGRESSION,
        id="allowed_regression",
        short="allowed regression",
        field="allowed_regression",
        reads="acceptance.allowed_regression: its metric here and in --baseline",
        whole=_regression,
    ),
)


def ids() -> dict[str, str]:
    """Each criterion's title -> its stable id (report.json, the history): the title is English and may be reworded."""
    return {r.name: r.id for r in CRITERIA}
