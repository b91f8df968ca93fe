"""Reading and merging JUnit: every input accounted for, nothing merged silently, pytest's own output."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

from support.report_helpers import PLAN, rows, write_rows

from ci.results import junit, junit_read
from ci.results import merge as results
from ci.results.metrics import Metric, metrics_of

TARGET = "cuda-sm121a"


def _by_path(res: results.Results) -> dict[str, junit.FileRead]:
    return {Path(f.path).name: f for f in res.inputs}


def test_every_broken_input_is_listed_with_its_problem(tmp_path: Path) -> None:
    good = write_rows(tmp_path, rows("48804", TARGET)[:3])[0]
    text = good.read_text()
    (tmp_path / "truncated.xml").write_text(text[: len(text) // 2])
    (tmp_path / "empty.xml").write_text("")
    (tmp_path / "blank.xml").write_text("  \n")
    (tmp_path / "notxml.xml").write_text("Segmentation fault (core dumped)\n")
    (tmp_path / "html.xml").write_text("<html><body>oops</body></html>")
    (tmp_path / "midway.xml").write_text(text.replace("</testcase>", "</testcas>", 1))
    (tmp_path / "nothing").mkdir()

    res = results.collect([tmp_path, tmp_path / "missing.xml", tmp_path / "nothing"], PLAN)
    got = {name: f.status for name, f in _by_path(res).items()}
    assert got == {
        good.name: "ok",
        "truncated.xml": "truncated",
        "empty.xml": "empty",
        "blank.xml": "empty",
        "notxml.xml": "not XML",
        "html.xml": "not JUnit",
        "midway.xml": "malformed XML",
        "missing.xml": "not found",
        "nothing": "empty",
    }
    assert all(f.problem for f in res.inputs if f.status != "ok")


def test_truncated_file_keeps_complete_cases_and_marks_the_rest_incomplete(tmp_path: Path) -> None:
    selected = rows("48804", TARGET)[:6]
    path = write_rows(tmp_path, selected)[0]
    text = path.read_text()
    # cut inside the fourth testcase
    cut = text.index("<testcase", text.index("<testcase", text.index("<testcase", text.index("<testcase") + 1) + 1) + 1)
    path.write_text(text[: cut + 400])

    res = results.collect([path], PLAN)
    assert res.inputs[0].status == "truncated" and "3 complete testcase(s) recovered" in res.inputs[0].problem
    by_id = res.by_id()
    assert [by_id[r.id].status for r in selected[:3]] == ["pass"] * 3
    assert by_id[selected[3].id].status == "incomplete" and "ends inside" in by_id[selected[3].id].note
    # rows of the same target and suite the file never reached may have been in it
    later = [r for r in rows(target=TARGET) if r.suite == "spec_decode" and r not in selected[:4]]
    assert {by_id[r.id].status for r in later} == {"incomplete"}
    # other targets' rows were never in that file
    assert {by_id[r.id].status for r in rows(target="cuda-sm90")} == {"not run"}


def test_unreadable_file_named_after_its_suite_marks_that_scope_incomplete(tmp_path: Path) -> None:
    (tmp_path / "stackgate.rocm-gfx1151.sparse_mla.0.xml").write_text("")
    by_id = results.collect([tmp_path], PLAN).by_id()
    assert {by_id[r.id].status for r in rows(target="rocm-gfx1151") if r.suite == "sparse_mla"} == {"incomplete"}
    assert {by_id[r.id].status for r in rows(target="rocm-gfx1151") if r.suite == "spec_decode"} == {"not run"}


def test_two_runs_of_a_row_are_both_kept_and_reported(tmp_path: Path) -> None:
    selected = rows("48804", TARGET)[:2]
    write_rows(tmp_path / "a", selected)
    write_rows(
        tmp_path / "b", selected, lambda r, c: replace(c, status="failure", message="boom") if r == selected[0] else c
    )
    by_id = results.collect([tmp_path], PLAN).by_id()
    first, second = by_id[selected[0].id], by_id[selected[1].id]
    assert len(first.cases) == 2 and first.duplicates and first.status == "conflict"
    assert "a/stackgate" in first.note and "b/stackgate" in first.note
    assert len(second.cases) == 2 and second.status == "pass" and second.duplicates


def test_the_same_file_given_twice_is_read_once(tmp_path: Path) -> None:
    path = write_rows(tmp_path, rows("48804", TARGET)[:1])[0]
    res = results.collect([path, tmp_path], PLAN)
    assert len(res.inputs) == 1 and not any(r.duplicates for r in res.rows)


def test_two_tests_of_one_row_are_not_duplicates(tmp_path: Path) -> None:
    row = rows("48407", TARGET)[0]
    write_rows(tmp_path / "a", [row])
    write_rows(tmp_path / "b", [row], lambda r, c: replace(c, test="test_no_minus_one_topk_degeneration"))
    result = results.collect([tmp_path], PLAN).by_id()[row.id]
    assert len(result.cases) == 2 and not result.duplicates and result.status == "pass"


def test_row_falls_back_to_the_pytest_parameter_id(tmp_path: Path) -> None:
    row = rows("48804", TARGET)[0]
    (tmp_path / "j.xml").write_text(
        f'<testsuite name="x"><testcase classname="suites.spec_decode.test_kernel_warmup" '
        f'name="test_warmup[{row.id}]"><failure message="timeout after 900 s"/></testcase>'
        '<testcase classname="m" name="test_other"/>'
        '<testcase classname="m" name="test_p[48804.cuda-sm121a.ghost-model.0123abcd]"/></testsuite>'
    )
    res = results.collect([tmp_path / "j.xml"], PLAN)
    assert res.by_id()[row.id].status == "failure" and res.by_id()[row.id].message == "timeout after 900 s"
    ghost = res.by_id()["48804.cuda-sm121a.ghost-model.0123abcd"]
    assert ghost.planned is None and "not in the plan" in ghost.note
    assert [c.name for c in res.unkeyed] == ["test_other"]


def test_a_metric_that_breaks_the_contract_is_a_visible_problem(tmp_path: Path) -> None:
    row = rows("48804", TARGET)[0]
    (tmp_path / "j.xml").write_text(
        f'<testsuite name="stackgate.{TARGET}.spec_decode.0"><testcase classname="c" name="t">'
        f'<properties><property name="stackgate.row" value="{row.id}"/>'
        '<property name="stackgate.metric.warm_request_ms" value="fast"/>'
        '<property name="stackgate.jit.compiles" value="many"/></properties></testcase></testsuite>'
    )
    case = results.collect([tmp_path / "j.xml"], PLAN).by_id()[row.id].cases[0]
    assert case.metrics == () and case.jit_compiles is None
    assert len(case.problems) == 2 and "warm_request_ms" in case.problems[0]


def test_reads_pytests_own_legacy_junit_with_record_property(tmp_path: Path) -> None:
    row_a, row_b, row_c = rows("48804", TARGET)[:3]
    (tmp_path / "test_tiny.py").write_text(
        textwrap.dedent(f"""
        import json
        import pytest

        @pytest.mark.parametrize("row", [{row_a.id!r}, {row_b.id!r}, {row_c.id!r}])
        def test_kernel_warmup(row, record_property):
            record_property("stackgate.row", row)
            record_property("stackgate.target", "{TARGET}")
            record_property("stackgate.jit.compiles", 0)
            record_property("stackgate.metric.warm_request_ms", json.dumps(
                {{"value": 58.0, "unit": "ms", "phase": "warm", "repeats": 3, "spread": 2.0,
                  "samples": [57.0, 58.0, 59.0]}}))
            if row == {row_b.id!r}:
                assert 1 == 2, "mismatch | <b>"
            if row == {row_c.id!r}:
                pytest.skip("hardware absent")
        """)
    )
    xml = tmp_path / "out.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_tiny.py"),
         f"--junitxml={xml}", "-o", "junit_family=legacy", "-o", f"junit_suite_name=stackgate.{TARGET}.spec_decode.0"],
        cwd=tmp_path, check=False, capture_output=True,
    )  # fmt: skip
    res = results.collect([xml], PLAN)
    assert res.inputs[0].status == "ok"
    by_id = res.by_id()
    assert [by_id[r.id].status for r in (row_a, row_b, row_c)] == ["pass", "failure", "skipped"]
    a = by_id[row_a.id].cases[0]
    assert a.path.endswith("test_tiny.py") and a.jit_compiles == 0 and a.suite == "spec_decode"
    m = a.metric("warm_request_ms")
    assert m is not None and (m.value, m.phase, m.repeats, m.spread, m.range()) == (58.0, "warm", 3, 2.0, (57.0, 59.0))
    assert "mismatch | <b>" in by_id[row_b.id].message
    assert by_id[row_c.id].message.endswith("hardware absent")


def test_an_empty_file_named_as_ci_run_names_it_makes_its_rows_incomplete(tmp_path):
    from ci.results import merge as results
    from ci.stack import loader as stack
    from ci.stack import plan

    st = stack.load()
    (tmp_path / "junit-rocm-gfx1151-sparse_mla-0.xml").write_text("")
    res = results.collect([tmp_path], plan.build(st))
    rows = [r for r in res.rows if r.target == "rocm-gfx1151" and r.suite == "sparse_mla"]
    assert rows and {r.status for r in rows} == {"incomplete"}
    assert {r.status for r in res.rows if r.target == "cuda-sm90"} == {"not run"}


def test_the_quick_reading_of_a_metric_agrees_with_the_strict_one() -> None:
    """ci.results.metrics reads a metric of the harness's shape without converting anything; every other shape goes
    to the strict reader, so both give one Metric, or the quick one gives nothing."""
    from ci.results.metrics import _as_written, metric_from_json

    usual = {"value": 2.5, "unit": "ms", "phase": "warm", "repeats": 3, "spread": 1.0, "samples": [2.0, 2.5, 3.0]}
    shapes = [
        usual,
        {**usual, "spread": None},
        {k: v for k, v in usual.items() if k != "spread"},
        {**usual, "samples": []},
        {**usual, "value": 2},  # an int: converted by the strict reader only
        {**usual, "repeats": True},
        {**usual, "repeats": 0},
        {**usual, "repeats": 2.0},
        {**usual, "samples": [1, 2.0]},
        {**usual, "samples": ["1.0"]},
        {**usual, "phase": "lukewarm"},
        {**usual, "unit": 3},
        {k: v for k, v in usual.items() if k != "value"},
        {k: v for k, v in usual.items() if k != "repeats"},
        [1.0],
    ]
    quick = 0
    for doc in shapes:
        fast = _as_written("m", doc)
        try:
            strict = metric_from_json("m", doc)
        except (ValueError, TypeError, KeyError):
            strict = None
        assert fast is None or fast == strict, doc
        quick += fast is not None
    assert quick == 4  # the harness's own shapes: with and without a spread, with and without samples


def test_a_case_read_is_the_case_its_fields_make(tmp_path: Path) -> None:
    """read_case fills a Case's dict at once (junit.made) instead of calling the dataclass: the case is the one
    `Case(**fields)` makes, derived fields included, for every shape a case comes in (metrics, failures, problems)."""
    from dataclasses import fields

    written = write_rows(
        tmp_path,
        rows("48804", TARGET)[:4],
        lambda r, c: (
            replace(c, status="failure", message="boom", jit_compiles=2, jit_kernels=("k1", "k2"))
            if r == rows("48804", TARGET)[1]
            else c
        ),
    )
    (tmp_path / "odd.xml").write_text(
        '<testsuites><testsuite name="outer"><testsuite name="inner"><testcase classname="c" name="t" time="x">'
        '<properties><property name="stackgate.metric.m" value="[1]"/></properties><error message="e"/></testcase>'
        "</testsuite></testsuite></testsuites>"
    )
    cases = [c for f in [*written, tmp_path / "odd.xml"] for c in junit_read.read(f).cases]
    assert len(cases) == 5 and {c.status for c in cases} >= {"pass", "failure", "error"}
    assert any(c.metrics for c in cases) and any(c.problems for c in cases)
    every = {f.name for f in fields(junit.Case)}
    for case in cases:
        made = junit.Case(**{f.name: getattr(case, f.name) for f in fields(junit.Case) if f.init})
        assert set(vars(case)) == every
        assert case == made and case.json == made.json and case.metrics_by_name == made.metrics_by_name


def test_a_case_holds_its_json_at_its_own_size(tmp_path: Path) -> None:
    """Each case's report.json entry is kept in an allocation of its own length: orjson returns even a few hundred
    bytes in a buffer of 4 KiB or more, which 10,000 testcases held as 40 MB of slack."""
    import inspect
    import tracemalloc

    written = write_rows(tmp_path, rows("48804", TARGET)[:20])
    source, first = inspect.getsourcelines(junit._derive)
    tracemalloc.start()
    try:
        cases = [c for f in written for c in junit_read.read(f).cases]
        snap = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    in_derive = [tracemalloc.Filter(True, junit.__file__, lineno=n) for n in range(first, first + len(source))]
    held = sum(t.size for t in snap.filter_traces(in_derive).traces)  # the json and the metric index of each case
    assert len(cases) == 20
    assert held < sum(len(c.json) for c in cases) + 1024 * len(cases)


def test_nested_suites_are_each_read_once_in_document_order(tmp_path: Path) -> None:
    """Suites in document order, each with its own testcases (the reader walks only suites' children)."""
    (tmp_path / "n.xml").write_text(
        '<testsuites><testsuite name="a"><testsuite name="a1"><testsuite name="a11"><testcase name="t1"/></testsuite>'
        '</testsuite><testcase name="t2"/><testsuite name="a2"><testcase name="t3"/></testsuite></testsuite>'
        '<testsuite name="b"><testcase name="t4"/></testsuite></testsuites>'
    )
    read = junit_read.read(tmp_path / "n.xml")
    assert [(c.junit_suite, c.name) for c in read.cases] == [("a", "t2"), ("a11", "t1"), ("a2", "t3"), ("b", "t4")]
    assert len(read.scopes) == 5  # a, a1, a11, a2, b


def test_a_rows_one_metric_is_the_one_its_merged_metrics_hold() -> None:
    """RowResult.metric(name) reads one metric without merging them all: the first run recording it, as `metrics` has
    it, and the derived cold/warm ratio from `metrics` itself; before and after `metrics` was merged."""
    import json as jsonlib

    def case(n: int, **values: float) -> junit.Case:
        raws = [
            (k, jsonlib.dumps({"value": v, "unit": "ms", "phase": "warm", "repeats": 1})) for k, v in values.items()
        ]
        problems: list[str] = []
        return replace(junit_case(n), metrics=tuple(metrics_of(raws, problems)))

    def junit_case(n: int) -> junit.Case:
        return junit.Case(file=f"f{n}", junit_suite="s", name=f"t{n}", classname="c", path="", row="r", change=None,
                          track=None, target=None, suite=None, image_digest=None, git_revision=None, status="pass",
                          message="", details="", log="", time=None, jit_compiles=None, jit_kernels=(),
                          jit_cache_new_files=None, metrics=(), problems=())  # fmt: skip

    runs = (case(0, warm_request_ms=2.0, cold_first_request_ms=9.0), case(1, warm_request_ms=3.0, extra=1.0))
    names = ("warm_request_ms", "cold_first_request_ms", "extra", "cold_warm_ratio", "absent")
    for merged_first in (False, True):
        row = results.RowResult(id="r", planned=None, change="c", target="t", suite="s", status="pass", cases=runs,
                                duplicates=())  # fmt: skip
        if merged_first:
            assert row.metrics
        got = {n: row.metric(n) for n in names}
        assert got == {n: row.metrics.get(n) for n in names}
        assert isinstance(got["cold_warm_ratio"], Metric) and got["cold_warm_ratio"].value == 4.5
        assert got["warm_request_ms"].value == 2.0 and got["extra"].value == 1.0 and got["absent"] is None
