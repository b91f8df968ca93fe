"""The allowed-regression criterion: the change's metric on each row against the baseline side, over runs
(ci.results.baseline, ci.results.run_medians)."""

from __future__ import annotations

from ci.results import baseline, run_medians
from ci.results.baseline import Comparison, compare
from ci.results.criteria.rule import REGRESSION, Criterion, Evidence, Status, listed, ran_rows


def regression(ev: Evidence) -> Criterion:
    """Judged over runs (ci.results.run_medians): every row that ran is compared, or the criterion is missing (a verdict
    on 2 of 40 rows is no verdict); a row with too few runs a side, an A/A floor as wide as the bound, or a run that
    shared its GPU leaves it missing, saying which."""
    change, rows, base = ev.change, ev.rows, ev.baseline
    reg = change.acceptance.allowed_regression
    rule = (
        f"{reg.metric} ({reg.better} is better) may worsen by at most {reg.max_pct:g}%, over runs "
        f"(one-sided, p < {baseline.ALPHA:g}" + (", past the A/A noise floor)" if base and base.aa else ")")
    )

    def verdict(status: Status, text: str) -> Criterion:
        return Criterion(name=REGRESSION, status=status, evidence=f"{rule}; {text}")

    if base is None:
        return verdict("missing", "no baseline report given (--baseline)")
    ran = ran_rows(rows)
    absent, shared, judged, single, few = [], [], [], [], []
    for r in ran:
        now, before = run_medians.of_cases(r.ran, reg.metric), base.runs(r.id, reg.metric)
        if now is not None and now.shared:
            shared.append(f"{r.id} (with {'; '.join(now.shared)})")
            continue
        if now is None or not now.runs or not before:
            absent.append(r.id)
            continue
        unit = next((m.unit for c in r.ran if (m := c.metric(reg.metric))), "")
        floor = base.floor(r.id, reg.metric)
        cmp = compare(
            before,
            now.values,
            reg.better,
            reg.max_pct,
            unit=unit,
            floor_pct=floor.pct,
            aa=bool(base.aa),
            floor_runs=floor.runs,
            floor_on=floor.measured_on if floor.runs else "",
        )
        if cmp.judged:
            judged.append((r.id, cmp))
        elif len(before) == len(now.runs) == 1:
            single.append((r.id, cmp))
        else:
            few.append((r.id, cmp))
    flagged = [f"{rid}: {c.text}" for rid, c in judged if c.flagged]
    pool = baseline.pooled([c for _, c in single])
    if pool is not None and pool.flagged:
        flagged.append(pool.text)
    covered = f"{len(judged) + len(single) + len(few)} of {len(ran)} rows that ran compared"
    if flagged:
        return verdict("fail", f"exceeded on {listed(flagged)} ({covered})")
    if not ran:
        return verdict("missing", f"no row ran ({len(rows)} planned)")
    if shared:
        return verdict("missing", f"not judged from runs that shared their GPU with other engines: {listed(shared)}")
    wide = [(rid, c) for rid, c in judged if c.inconclusive]
    if wide:
        widest = max(c.floor_pct or 0.0 for _, c in wide)
        said = f"not judgeable at this floor ({run_medians.pct(widest)}, as wide as the {reg.max_pct:g}% bound)"
        return verdict("missing", f"{said}: {listed([_with_narrowing(rid, c) for rid, c in wide])}")
    if absent:
        return verdict("missing", f"{covered}; without the metric here or in the baseline: {listed(absent)}")
    if few or (single and pool is None):
        short = [_with_narrowing(rid, c) for rid, c in [*few, *single]]
        return verdict("missing", f"needs {run_medians.MIN_RUNS} runs a side: {listed(short)}")
    shown = [f"{rid}: {c.text}" for rid, c in judged]
    pooled_text = f"; {pool.text}" if pool is not None else ""
    return verdict("pass", f"{covered}, none worse past the bound beyond chance: {listed(shown)}{pooled_text}")


def _with_narrowing(row: str, c: Comparison) -> str:
    """A row's comparison, and where its floor is as wide as the bound, the runs a side that would narrow it."""
    return f"{row}: {c.text}; {c.narrowing}" if c.narrowing else f"{row}: {c.text}"
