"""Verdicts that cannot be fooled: evidence only from rows that measured, in a baked cache; every target
the tracking issue names covered or waived; results of a row defined otherwise flagged."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from support.report_helpers import PLAN, STACK, rows, write_rows

from ci.report import write as report
from ci.report.view import banner
from ci.results import acceptance
from ci.results import merge as results
from ci.results.criteria import registry

CHANGE = "48804"


def _criterion(tmp_path: Path, name: str, edit, change: str = CHANGE) -> registry.Criterion:
    write_rows(tmp_path, rows(change), edit)
    return _judged([tmp_path], name, change)


def _judged(folders: list[Path], name: str, change: str) -> registry.Criterion:
    """Criterion `name` of `change`, judged on the JUnit in `folders` (several: runs of the same rows)."""
    v = acceptance.evaluate(STACK, results.collect(folders, PLAN), None)
    return next(c for ver in v if ver.change.id == change for c in ver.criteria if c.name == name)


def test_rows_that_failed_before_measuring_prove_no_absence_of_jit(tmp_path: Path) -> None:
    """Every row failed at start (triton missing, say): 0 compiles recorded, but nothing was measured."""
    crit = _criterion(tmp_path, registry.NO_JIT, lambda r, c: replace(c, status="failure", message="no triton",
                                                                      metrics=()))  # fmt: skip
    assert crit.status == "missing" and "no row measured its workload" in crit.evidence


def test_rows_run_without_a_baked_cache_prove_nothing_about_aot(tmp_path: Path) -> None:
    crit = _criterion(tmp_path, registry.NO_JIT, lambda r, c: replace(c, aot="none"))
    assert crit.status == "missing" and "ran without an ahead-of-time cache" in crit.evidence
    baked = _criterion(tmp_path / "baked", registry.NO_JIT, lambda r, c: c)
    assert baked.status == "pass" and "each with a baked cache" in baked.evidence


def test_a_required_target_without_rows_is_said_and_blocks(tmp_path: Path) -> None:
    """#46514 (fp8_ds_mla) has no row on gfx1151, which the tracking issue names."""
    crit = _criterion(tmp_path, registry.MATRIX, lambda r, c: c, change="46514")
    assert crit.status == "missing"
    assert "rocm-gfx1151: no planned row, and the tracking issue names this target" in crit.evidence
    waived = replace(STACK.changes["46514"], waived_targets={"rocm-gfx1151": "FlashMLA's fp8 format is CUDA-only"})
    verdict = acceptance.judge(waived, results.collect([tmp_path], PLAN), None, ("cuda-sm121a", "rocm-gfx1151"))
    matrix = next(c for c in verdict.criteria if c.name == registry.MATRIX)
    assert matrix.status == "pass" and "waived: FlashMLA's fp8 format is CUDA-only" in matrix.evidence


def test_results_of_a_row_defined_otherwise_are_flagged_and_an_edit_elsewhere_is_not(
    tmp_path: Path, stack_copy: Path, edit
) -> None:
    """A result carries what its row meant (its rows.json beside it; the digest on its testcases): today's stack with
    another tolerance flags it, naming the field; an edit of prose or a resource flags nothing and keeps the digest."""
    import json

    from ci.stack import loader, rows_json

    selftest = rows("selftest")
    [junit] = write_rows(tmp_path / "j", selftest)
    doc = rows_json.document(STACK, STACK.targets["cpu"], "selftest", selftest, image={"ref": "host"},
                             git_revision="", timeout_s=60)  # fmt: skip
    (junit.parent / "rows.json").write_text(json.dumps(doc))
    assert not any("defined otherwise" in line for line in banner(report.build(STACK.root, [junit], None)))
    before = loader.load(stack_copy).digest
    change = stack_copy / "changes" / "selftest.yaml"
    edit(change, 'title: "stackgate self-test: ', 'title: "the stackgate self-test: ')
    eagle = "name: tiny Llama + EAGLE (random weights)\n    weights: dummy\n    kv_cache_gib: "
    edit(stack_copy / "models.yaml", eagle + "2\n", eagle + "3\n")
    assert loader.load(stack_copy).digest == before  # prose and a resource: the same rows
    assert not any("defined otherwise" in line for line in banner(report.build(stack_copy, [junit], None)))
    edit(change, "    max: 1.0e-6\n", "    max: 1.0e-3\n")
    assert loader.load(stack_copy).digest != before
    said = [line for line in banner(report.build(stack_copy, [junit], None)) if "defined otherwise" in line]
    assert said == [
        f"input {junit}: {len(selftest)} of {len(selftest)} rows were defined otherwise when they ran "
        "(asserts.tolerance.max: 1e-06 → 0.001); this report judges them as stack/ defines them today"
    ]
    # no rows.json beside it: the digest its testcases record says it, without the fields
    (junit.parent / "rows.json").unlink()
    meant = {r.id: rows_json.with_meaning(rows_json.row_document(STACK, r), STACK.targets["cpu"])["meaning"]
             for r in selftest}  # fmt: skip
    text = junit.read_text()
    for row_id, digest in meant.items():
        prop = f'<property name="stackgate.row" value="{row_id}"/>'
        text = text.replace(prop, prop + f'<property name="stackgate.meaning" value="{digest}"/>')
    junit.write_text(text)
    said = [line for line in banner(report.build(stack_copy, [junit], None)) if "defined otherwise" in line]
    assert len(said) == 1 and f"{len(selftest)} of {len(selftest)} rows" in said[0]
    assert not any("defined otherwise" in line for line in banner(report.build(STACK.root, [junit], None)))


def test_a_first_request_slower_than_the_bound_fails_cold_warm(tmp_path: Path) -> None:
    """#48804 promises the first request pays for nothing: cold_warm_ratio is judged, not only recorded."""
    from ci.bench.synthetic import metric, with_metric

    slow = metric("cold_warm_ratio", 13.6, "ratio", "none")
    crit = _criterion(tmp_path, registry.COLD_WARM, lambda r, c: with_metric(c, slow))
    assert crit.status == "fail" and "cold first request over 1.2x warm" in crit.evidence and "13.60x" in crit.evidence


def test_a_slow_first_request_is_judged_from_its_samples_and_names_what_it_paid_once(tmp_path: Path) -> None:
    """A row that recorded its first and warm requests but no ratio (every suite but #48804's) is judged on their
    quotient; where the row timed vLLM's once-per-process work, the evidence names it."""
    from ci.bench.synthetic import metric, with_metric, without_metric

    def slow(r, c):
        c = with_metric(without_metric(c, "cold_warm_ratio"), metric("cold_first_request_ms", 70.0, "ms", "cold"))
        c = with_metric(c, metric("warm_request_ms", 27.0, "ms", "warm", [26.5, 27.0, 28.0]))
        return replace(c, first_request_only="vLLM logits-processor plugin scan (31 ms)")

    crit = _criterion(tmp_path, registry.COLD_WARM, slow, change="48407")
    named = "paid once: vLLM logits-processor plugin scan (31 ms)"
    assert crit.status == "fail" and f"(2.59x; 43 ms over warm; {named}; not named: 12 ms)" in crit.evidence

    def named_all(r, c):
        c = slow(r, c)
        return replace(c, first_request_only="vLLM logits-processor plugin scan (31 ms); a new length (12 ms)")

    crit = _criterion(tmp_path / "all", registry.COLD_WARM, named_all, change="48407")
    assert "43 ms over warm; paid once: vLLM logits-processor plugin scan (31 ms); a new length (12 ms))" in (
        crit.evidence
    )  # all 43 ms named: no "not named" part
    fine = _criterion(
        tmp_path / "fine",
        registry.COLD_WARM,
        lambda r, c: with_metric(
            without_metric(c, "cold_warm_ratio"), metric("cold_first_request_ms", 30.0, "ms", "cold")
        ),
        change="48407",
    )
    assert fine.status == "pass" and "cold within 1.2x warm" in fine.evidence


def test_a_row_run_several_times_is_judged_on_its_worst_run(tmp_path: Path) -> None:
    """Repeats of a row (the (c) runs of a fresh host, say) are all judged: one slow run over the bound fails the
    row, whichever file came first, and the evidence gives the runs' range and the slow run's own breakdown."""
    from ci.bench.synthetic import metric, with_metric, without_metric

    def timed(cold: float, named: str):
        def edit(r, c):
            c = with_metric(without_metric(c, "cold_warm_ratio"), metric("cold_first_request_ms", cold, "ms", "cold"))
            return replace(with_metric(c, metric("warm_request_ms", 40.0, "ms", "warm")), first_request_only=named)

        return edit

    selected = rows("48407")
    write_rows(tmp_path / "1", selected, timed(44.0, "vLLM logits-processor plugin scan (3 ms)"))  # 1.10x: fine
    write_rows(tmp_path / "2", selected, timed(100.0, "vLLM logits-processor plugin scan (11 ms)"))  # 2.50x
    crit = _judged([tmp_path / "1", tmp_path / "2"], registry.COLD_WARM, "48407")
    assert crit.status == "fail"
    assert "(2.50x, the worst of 2 runs (1.10x–2.50x); 60 ms over warm; paid once: vLLM logits-processor plugin " \
           "scan (11 ms); not named: 49 ms)" in crit.evidence  # fmt: skip


def test_a_row_that_broke_a_rule_in_some_of_its_runs_is_named_once_with_the_count(tmp_path: Path) -> None:
    """A threshold (graph replay, tolerance) is checked on every run of a row; the evidence names the row once,
    with the values that broke it and in how many of its runs."""
    from ci.bench.synthetic import metric, with_metric

    def eager(steps: float):
        return lambda r, c: with_metric(c, metric("eager_decode_steps", steps, "count", "warm"))

    selected = rows("46514")
    for n, steps in enumerate((0.0, 426.0, 431.0)):
        write_rows(tmp_path / str(n), selected, eager(steps))
    crit = _judged([tmp_path / str(n) for n in range(3)], registry.GRAPH, "46514")
    first = selected[0].id
    assert crit.status == "fail" and f"{first} (426, 431 count; 2 of 3 runs)" in crit.evidence
    assert crit.evidence.count(first) == 1


def test_one_targets_rows_from_two_vllm_builds_are_flagged(tmp_path: Path) -> None:
    selected = rows("selftest")
    [junit] = write_rows(tmp_path, selected)
    text = junit.read_text()
    first = selected[0].id
    marker = f'<property name="stackgate.row" value="{first}"/>'
    text = text.replace(marker, marker + '<property name="stackgate.vllm_version" value="0.26.0"/>', 1)
    second = selected[1].id
    marker = f'<property name="stackgate.row" value="{second}"/>'
    junit.write_text(text.replace(marker, marker + '<property name="stackgate.vllm_version" value="0.27.0"/>', 1))
    lines = banner(report.build(STACK.root, [junit], None))
    assert "cpu: results from 2 vLLM versions (0.26.0, 0.27.0)" in lines


def test_one_release_from_two_builds_is_two_builds(tmp_path: Path) -> None:
    """A fork's wheel and upstream's can share a version string; the recorded commit tells them apart."""
    selected = rows("selftest")
    [junit] = write_rows(tmp_path, selected)
    text = junit.read_text()
    for row, commit in ((selected[0].id, "gffd46bfab"), (selected[1].id, "g1234567")):
        marker = f'<property name="stackgate.row" value="{row}"/>'
        text = text.replace(marker, marker + '<property name="stackgate.vllm_version" value="0.26.0"/>'
                            f'<property name="stackgate.vllm_commit" value="{commit}"/>', 1)  # fmt: skip
    junit.write_text(text)
    built = report.build(STACK.root, [junit], None)
    assert "cpu: results from 2 vLLM versions (0.26.0 (g1234567), 0.26.0 (gffd46bfab))" in banner(built)
    from ci.report.view import inputs_table

    [(_, _, _, _, _, shown)] = inputs_table(built).rows  # the inputs table names the builds of every file
    assert shown == "0.26.0 (g1234567), 0.26.0 (gffd46bfab)"


def test_the_rows_an_input_holds_are_set_against_one_plan_not_one_plan_each(tmp_path: Path, monkeypatch) -> None:
    """Each row's meaning today is made against the whole plan (its engine's size): made once for every row asked
    about, not once per row (215 rows of real-shaped JUnit took 37 s of a report)."""
    from ci.report import defined
    from ci.stack import plan, rows_json

    chosen = rows("48407", "cuda-sm90")
    meant = {r.id: rows_json.with_meaning(rows_json.row_document(STACK, r), STACK.targets["cuda-sm90"])["meaning"]
             for r in chosen}  # fmt: skip
    [junit] = write_rows(tmp_path, chosen)
    text = junit.read_text()
    for row_id, digest in meant.items():
        prop = f'<property name="stackgate.row" value="{row_id}"/>'
        text = text.replace(prop, prop + f'<property name="stackgate.meaning" value="{digest}"/>')
    junit.write_text(text)
    res = results.collect([junit], PLAN)
    built = []
    real = plan.build
    monkeypatch.setattr(plan, "build", lambda st: built.append(1) or real(st))
    assert defined.lines(STACK, res) == []  # every row as it is defined today
    assert len(built) == 1
