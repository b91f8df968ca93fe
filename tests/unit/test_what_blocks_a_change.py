"""Verdicts per imported change: what blocks default enablement, named exactly."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import pytest
from support.report_helpers import PLAN, STACK, rows, write_rows

from ci.bench import synthetic
from ci.bench.synthetic import metric
from ci.results import acceptance, run_medians
from ci.results import merge as results
from ci.results.baseline import Baseline, compare
from ci.results.criteria import registry
from ci.results.junit import Metric

CHANGE = "48804"  # kernel warm-up: one regression test file, rows on three targets


EFFECT = STACK.changes[CHANGE].acceptance.effect[0]  # cold_first_request_ms, at least 20% lower with the warm-up
GAIN = 0.7  # each row's effect metric on the fork, as a share of its value without the change: a 30% gain


def _judge(
    tmp_path: Path, edit=lambda r, c: c, base: Baseline | None = None, selected=None, n: int = run_medians.MIN_RUNS
) -> acceptance.Verdict:
    """Every row (or `selected`) run `n` times, each run as `edit` makes it."""
    for i in range(n):
        write_rows(tmp_path, rows(CHANGE) if selected is None else selected, _nth(edit, i), prefix=f"run{i}-")
    res = results.collect([tmp_path], PLAN)
    return acceptance.judge(STACK.changes[CHANGE], res, base)


def _nth(edit, i: int, share: float = GAIN):
    """`edit`, after the effect metric of run `i` is set to `share` of what the side without the change recorded."""

    def run(r, c):
        m = c.metric(EFFECT.metric) if hasattr(c, "metric") else None
        value = 100.0 * share * (1 + 0.01 * i)
        if m is not None or any(x.name == EFFECT.metric for x in c.metrics):
            c = synthetic.with_metric(c, metric(EFFECT.metric, value, "ms", "cold"))
        return edit(r, c)

    return run


def _of(row: results.RowResult) -> MappingProxyType:
    """Each metric's runs (each run's median), as ci.results.baseline reads them from a report.json."""
    names = {m.name for c in row.ran for m in c.metrics}
    return MappingProxyType({n: found.values for n in names if (found := run_medians.of_cases(row.ran, n))})


def _baseline_from(
    tmp_path: Path, edit=lambda r, c: c, n: int = run_medians.MIN_RUNS, without: bool = True
) -> Baseline:
    """The side a verdict is judged against (`n` runs of every row): by default the fork without the change, each
    row's effect metric higher by the gain the change must show."""
    paths = [
        p
        for i in range(n)
        for p in write_rows(tmp_path / "before", rows(CHANGE), _nth(edit, i, share=1.0), prefix=f"run{i}-")
    ]
    res = results.collect(paths, PLAN)
    return Baseline(path="before", rows=MappingProxyType({r.id: _of(r) for r in res.rows}), without=without)


def _judge_runs(tmp_path: Path, metrics: list[Metric], base: Baseline) -> acceptance.Verdict:
    """Every row of the change run once per metric given, each run recording that metric."""
    for i, m in enumerate(metrics):
        write_rows(tmp_path, rows(CHANGE), lambda r, c, m=m: synthetic.with_metric(c, m), prefix=f"run{i}-")
    return acceptance.judge(STACK.changes[CHANGE], results.collect([tmp_path], PLAN), base)


def _status(v: acceptance.Verdict) -> dict[str, str]:
    return {c.name: c.status for c in v.criteria}


def test_a_change_with_every_criterion_met_is_ready(tmp_path: Path) -> None:
    v = _judge(tmp_path / "now", base=_baseline_from(tmp_path))
    assert v.ready and v.text == acceptance.READY, v.text


def test_without_a_baseline_the_regression_criterion_is_missing(tmp_path: Path) -> None:
    v = _judge(tmp_path)
    assert not v.ready and [c.name for c in v.blocking] == [registry.EFFECT, registry.REGRESSION]
    assert "--baseline" in v.blocking[1].evidence
    assert f"judged against the fork without #{CHANGE} only" in v.blocking[0].evidence
    assert f"ci main --compare-without {CHANGE} --aa" in v.blocking[0].evidence


@pytest.mark.parametrize("phase", ["cold", "warm"])
def test_a_missing_cold_or_warm_measurement_blocks(tmp_path: Path, phase: str) -> None:
    name = "cold_first_request_ms" if phase == "cold" else "warm_request_ms"
    v = _judge(tmp_path / "now", lambda r, c: synthetic.without_metric(c, name), base=_baseline_from(tmp_path))
    # the cold first request is also what the change acts on: without it, its effect is not judged either
    also = [registry.EFFECT] if name == EFFECT.metric else []
    assert not v.ready and [c.name for c in v.blocking] == [registry.COLD_WARM, *also]
    assert v.blocking[0].status == "missing" and f"{phase} {name} absent" in v.blocking[0].evidence
    assert registry.COLD_WARM in v.text


def test_cold_and_warm_averaged_together_fails(tmp_path: Path) -> None:
    v = _judge(tmp_path, lambda r, c: synthetic.with_metric(c, metric("cold_first_request_ms", 500, "ms", "none")))
    assert _status(v)[registry.COLD_WARM] == "fail"


def test_a_compile_after_warm_up_blocks_and_names_the_kernel(tmp_path: Path) -> None:
    target = rows(CHANGE)[0]

    def edit(r, c):
        return replace(c, jit_compiles=1, jit_kernels=("eagle_prepare_next_token_padded_kernel",)) if r == target else c

    v = _judge(tmp_path / "now", edit, base=_baseline_from(tmp_path))
    assert [c.name for c in v.blocking] == [registry.NO_JIT] and v.blocking[0].status == "fail"
    assert target.id in v.blocking[0].evidence and "eagle_prepare_next_token_padded_kernel" in v.blocking[0].evidence


def test_compiles_after_ready_metric_also_blocks(tmp_path: Path) -> None:
    v = _judge(tmp_path, lambda r, c: synthetic.with_metric(c, metric("compiles_after_ready", 2, "", "cold")))
    assert _status(v)[registry.NO_JIT] == "fail" and "2 after ready" in v.criteria[2].evidence


def test_a_frame_torch_compile_traced_after_ready_blocks_and_is_named(tmp_path: Path) -> None:
    """0 Triton compiles and no new cache files, yet Dynamo traced a compiled helper in the first request (the
    inductor graph came from the cache): that is a compile after ready too."""
    target = rows(CHANGE)[0]
    frame = "vllm/v1/spec_decode/utils.py:565:update_num_computed_tokens_for_batch_change (0.10 s)"
    v = _judge(tmp_path / "now", lambda r, c: replace(c, jit_traced=frame) if r == target else c,
               base=_baseline_from(tmp_path))  # fmt: skip
    assert [c.name for c in v.blocking] == [registry.NO_JIT] and v.blocking[0].status == "fail"
    said = f"{target.id}: 0 compiles after the bake (kernels not named); torch.compile traced after ready: {frame}"
    assert said.replace("(0.10 s)", "(0.1 s)") in v.blocking[0].evidence


def test_tolerance_and_graph_replay_are_judged_on_the_changes_own_metrics(tmp_path: Path) -> None:
    def edit(r, c):
        c = synthetic.with_metric(c, metric("greedy_token_mismatches", 3, "tokens", "warm"))
        return synthetic.with_metric(c, metric("graph_captures_after_ready", 1, "", "warm"))

    v = _judge(tmp_path, edit)
    assert _status(v)[registry.TOLERANCE] == "fail" and _status(v)[registry.GRAPH] == "fail"
    assert "against the row's own backend" in v.criteria[4].evidence


def test_a_target_with_no_rows_run_leaves_the_matrix_missing(tmp_path: Path) -> None:
    selected = [r for r in rows(CHANGE) if r.target != "rocm-gfx1151"]
    v = _judge(tmp_path, selected=selected)
    matrix = next(c for c in v.criteria if c.name == registry.MATRIX)
    assert matrix.status == "missing" and "rocm-gfx1151:" in matrix.evidence and "not run" in matrix.evidence


def test_a_failing_row_fails_the_matrix_and_the_regression_test(tmp_path: Path) -> None:
    bad = rows(CHANGE)[0]
    v = _judge(tmp_path, lambda r, c: replace(c, status="error", message="signal 11 (SIGSEGV)") if r == bad else c, n=1)
    assert _status(v)[registry.MATRIX] == "fail" and bad.id in v.criteria[3].evidence
    assert _status(v)[registry.TIED] == "fail" and "1 error" in v.criteria[0].evidence


def _engine(value: float, samples: list[float]) -> Metric:
    return metric("engine_ready_s", value, "s", "cold", samples)


def _runs_of(values: list[float]) -> list[Metric]:
    """One engine_ready_s per run (a metric measured once a run)."""
    return [_engine(v, [v]) for v in values]


def test_regression_beyond_the_bound_that_chance_explains_is_not_flagged(tmp_path: Path) -> None:
    before = [25, 28, 30, 32, 35]
    base = Baseline(path="b", rows=MappingProxyType({r.id: {"engine_ready_s": tuple(before)} for r in rows(CHANGE)}))
    # median 30 -> 35 s is +16.7% (bound 15%), but runs this spread apart are chance (p > 0.05)
    v = _judge_runs(tmp_path / "now", _runs_of([27, 33, 35, 37, 40]), base)
    reg = next(c for c in v.criteria if c.name == registry.REGRESSION)
    assert reg.status == "pass" and "none worse past the bound beyond chance" in reg.evidence


def test_regression_beyond_the_bound_and_beyond_chance_fails(tmp_path: Path) -> None:
    base = Baseline(path="b", rows=MappingProxyType({r.id: {"engine_ready_s": (29.5, 29.8, 30, 30.2, 30.5)}
                                                     for r in rows(CHANGE)}))  # fmt: skip
    v = _judge_runs(tmp_path / "now", _runs_of([35.5, 35.8, 36, 36.2, 36.5]), base)
    reg = next(c for c in v.criteria if c.name == registry.REGRESSION)
    assert reg.status == "fail" and "+20.0% worse" in reg.evidence and "p=0.004 over runs" in reg.evidence


def test_a_doubling_is_flagged_even_where_the_ranges_overlap(tmp_path: Path) -> None:
    """The old rule (ranges must not overlap) let one slow run hide a +100% regression; ranks do not."""
    before = (9.8, 9.9, 10, 10.05, 10.1, 10.2, 10.3, 25)
    base = Baseline(path="b", rows=MappingProxyType({r.id: {"engine_ready_s": before} for r in rows(CHANGE)}))
    v = _judge_runs(tmp_path / "now", _runs_of([19.7, 19.8, 19.9, 20, 20.1, 20.2, 20.3, 20.4]), base)
    reg = next(c for c in v.criteria if c.name == registry.REGRESSION)
    assert reg.status == "fail" and "+99.0% worse" in reg.evidence and "p=0.005 over runs" in reg.evidence


def test_samples_within_one_run_are_not_runs(tmp_path: Path) -> None:
    """Five tight samples of one engine process a side, 20% apart: one run a side, which no test can judge."""
    base = _baseline_from(
        tmp_path, lambda r, c: synthetic.with_metric(c, _engine(30, [29.5, 29.8, 30, 30.2, 30.5])), n=1
    )
    v = _judge(tmp_path / "now", lambda r, c: synthetic.with_metric(c, _engine(36, [35.5, 35.8, 36, 36.2, 36.5])),
               base=base, selected=rows(CHANGE)[:3], n=1)  # fmt: skip
    reg = next(c for c in v.criteria if c.name == registry.REGRESSION)
    assert reg.status == "missing" and "needs 4 runs a side" in reg.evidence and "runs 1/1" in reg.evidence


def test_single_runs_are_judged_across_rows(tmp_path: Path) -> None:
    """engine_ready_s, one run a side a row: many rows all 20% slower is a regression (sign test over rows)."""
    base = _baseline_from(tmp_path, lambda r, c: synthetic.with_metric(c, _engine(30, [30])), n=1)
    v = _judge(tmp_path / "now", lambda r, c: synthetic.with_metric(c, _engine(36, [36])), base=base, n=1)
    reg = next(c for c in v.criteria if c.name == registry.REGRESSION)
    assert reg.status == "fail" and "rows run once a side worse past the bound" in reg.evidence
    same = _judge(tmp_path / "same", lambda r, c: synthetic.with_metric(c, _engine(30, [30])), base=base, n=1)
    assert next(c for c in same.criteria if c.name == registry.REGRESSION).status == "pass"


def test_too_few_single_run_rows_cannot_be_judged(tmp_path: Path) -> None:
    few = rows(CHANGE)[:3]
    base = Baseline(path="b", rows=MappingProxyType({r.id: {"engine_ready_s": (30.0,)} for r in few}))
    v = _judge(tmp_path, lambda r, c: synthetic.with_metric(c, _engine(30, [30])), base=base, selected=few)
    reg = next(c for c in v.criteria if c.name == registry.REGRESSION)
    assert reg.status == "missing" and "needs 4 runs a side" in reg.evidence


def test_rows_without_a_comparison_leave_the_criterion_missing(tmp_path: Path) -> None:
    """Two of many rows compared is no verdict on the change."""
    full = _baseline_from(tmp_path)
    two = Baseline(path="b", rows=MappingProxyType({r.id: full.rows[r.id] for r in rows(CHANGE)[:2]}))
    v = _judge(tmp_path / "now", base=two)
    reg = next(c for c in v.criteria if c.name == registry.REGRESSION)
    assert reg.status == "missing" and f"2 of {len(rows(CHANGE))} rows that ran compared" in reg.evidence


@pytest.mark.parametrize(
    ("before", "after", "better", "flagged"),
    [
        ((100, [99, 99.5, 100, 100.5, 101]), (110, [109, 109.5, 110, 110.5, 111]), "lower", True),  # +10% slower
        ((100, [99, 99.5, 100, 100.5, 101]), (110, [109, 109.5, 110, 110.5, 111]), "higher", False),  # better
        ((100, [80, 95, 100, 105, 120]), (110, [85, 100, 110, 115, 125]), "lower", False),  # chance
        ((100, [99, 99.5, 100, 100.5, 101]), (104, [103, 103.5, 104, 104.5, 105]), "lower", False),  # within 5%
        ((100, [99, 99.5, 100, 100.5, 101]), (90, [89, 89.5, 90, 90.5, 91]), "higher", True),  # 10% less throughput
        ((100, [99, 101]), (150, [149, 151]), "lower", False),  # 2 runs a side: not judged
    ],
)
def test_compare_flags_only_what_chance_does_not_explain(before, after, better, flagged) -> None:
    """Each list is a side's runs (each run's median)."""
    assert compare(before[1], after[1], better, 5).flagged is flagged


def test_a_cold_run_is_judged_on_what_compiled_after_ready_each_named_with_the_change_that_warms_it(
    tmp_path: Path,
) -> None:
    """A run without a bake (JIT allowed) compiles before ready by design: its 26 compiles there are said as such, not
    judged. What compiled after ready fails the criterion, each kernel named once with its count and with the
    stack's change whose warm-up would compile it (upstream.warms), or none; the same account in three runs is said
    once, with the runs it held in."""
    target = rows(CHANGE)[0]
    after = "eagle_prepare_next_token_padded_kernel ×2,rejection_greedy_sample_kernel"

    def cold(r, c):
        if r != target:
            return c
        late = synthetic.with_metric(c, metric("compiles_after_ready", 3, "count", "cold"))
        return replace(late, aot="none", jit_compiles=29, props=(*c.props, ("jit.after_ready_kernels", after)))

    paths = [p for i in range(3) for p in write_rows(tmp_path / "now", [target], cold, prefix=f"run{i}-")]
    res = results.collect(paths, PLAN)
    (v,) = [v for v in acceptance.evaluate(STACK, res, None) if v.change.id == CHANGE]
    (jit,) = [c for c in v.criteria if c.name == registry.NO_JIT]
    assert jit.status == "fail", jit.evidence
    assert (
        f"{target.id}: 3 compiles after ready: eagle_prepare_next_token_padded_kernel ×2 (#48804 of the kernel-warmup "
        "track warms it); rejection_greedy_sample_kernel (no change of the stack warms it) (26 before ready, no bake: "
        "JIT allowed) (in 3 of 3 runs)"
    ) in jit.evidence
    assert jit.evidence.count(target.id) == 1
