"""Hostile report inputs: the report is written, the bad input is listed, the JSON is strict JSON, and
every command it prints is inert when pasted."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from ci.cli import main
from ci.stack import loader, plan

ROW = plan.build(loader.load()).select(targets=["cpu"]).rows[0].id


def _junit(path: Path, row: str, extra: str = "", time: str = "1.0", failure: bool = False) -> Path:
    result = '<failure message="boom"/>' if failure else ""
    path.write_text(
        f'<testsuites><testsuite name="stackgate.cpu.selftest.0"><testcase classname="selftest.test_harness" '
        f'name="test_selftest_row" time="{time}"><properties><property name="stackgate.row" value="{row}"/>'
        f"{extra}</properties>{result}</testcase></testsuite></testsuites>"
    )
    return path


def _strict(path: Path) -> dict:
    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(path.read_text(), parse_constant=refuse)


def test_bad_numbers_in_junit_are_listed_and_the_json_stays_strict(tmp_path: Path, capsys) -> None:
    metrics = (
        '<property name="stackgate.metric.a" value=\'{"value": 1, "unit": "ms", "phase": "warm", "repeats": 1e400}\'/>'
        '<property name="stackgate.metric.b" value=\'{"value": NaN, "unit": "ms", "phase": "warm"}\'/>'
        '<property name="stackgate.metric.c" value=\'{"value": 2, "unit": "ms", "samples": [1, Infinity]}\'/>'
    )  # fmt: skip
    junit = _junit(tmp_path / "j.xml", ROW, metrics, time="abc")
    assert main(["report", str(junit), "--out", str(tmp_path / "r")]) == 0
    doc = _strict(tmp_path / "r" / "report.json")
    row = next(r for r in doc["rows"] if r["id"] == ROW)
    problems = " | ".join(row["runs"][0]["problems"])
    assert "time='abc' is not a number of seconds" in problems
    # strict JSON (RFC 8259): 1e400 overflows to infinity, NaN and Infinity are no JSON numbers; each names its metric
    assert "metric a: not the contract's JSON object" in problems and "infinity" in problems
    assert "metric b: not the contract's JSON object" in problems and "metric c: not" in problems
    assert row["metrics"] == {}


def test_a_baseline_nested_deep_or_holding_nan_is_an_input_problem(tmp_path: Path) -> None:
    junit = _junit(tmp_path / "j.xml", ROW)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    nan = tmp_path / "nan.json"
    nan.write_text(json.dumps({"rows": [{"id": ROW, "metrics": {"workload_warm_ms": {"value": "NaN"}}}]}))
    for baseline in (deep, nan):
        assert main(["report", str(junit), "--out", str(tmp_path / "r"), "--baseline", str(baseline)]) == 0
        doc = _strict(tmp_path / "r" / "report.json")
        read = next(i for i in doc["inputs"] if i["role"] == "baseline")
        assert read["status"] == "unreadable"
        regression = next(c for ch in doc["changes"] for c in ch["criteria"] if ch["id"] == "selftest"
                          and c["name"].startswith("regression"))  # fmt: skip
        assert regression["status"] == "missing"


def test_the_repro_hint_quotes_a_hostile_row_id(tmp_path: Path) -> None:
    evil = "x; touch /tmp/pwned #"
    junit = _junit(tmp_path / "j.xml", evil, failure=True)
    assert main(["report", str(junit), "--out", str(tmp_path / "r")]) == 1  # a failed testcase, outside the plan
    doc = _strict(tmp_path / "r" / "report.json")
    row = next(r for r in doc["rows"] if r["id"] == evil)
    assert row["repro"] == f"python -m ci repro {shlex.quote(evil)}"
    assert shlex.split(row["repro"]) == ["python", "-m", "ci", "repro", evil]  # one argument, nothing run
    html = (tmp_path / "r" / "report.html").read_text()
    assert "repro x; touch" not in html and "repro x; touch" not in (tmp_path / "r" / "report.md").read_text()
