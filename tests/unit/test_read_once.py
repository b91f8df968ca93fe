"""What reading and rendering work out once and share: a file's repeated texts, a message's causes, a row's runs."""

from __future__ import annotations

import pickle
import xml.etree.ElementTree as ET
from pathlib import Path

import orjson
from lxml import etree
from support.report_helpers import PLAN, rows, write_rows

from ci.report.sections import triage
from ci.results import junit_read, merge, testcase

TARGET = "cuda-sm121a"


def test_a_files_repeated_texts_are_each_kept_once(tmp_path: Path) -> None:
    """Every testcase of a row repeats its change, target, revision and vLLM, and every metric its name and unit:
    read from one file, equal texts are one object, and the file pickles (to the process that merges it) smaller."""
    (written,) = write_rows(tmp_path, rows("48804", TARGET)[:12])
    cases = junit_read.read(written).cases
    assert len(cases) == 12
    for field in ("classname", "change", "track", "target", "suite", "git_revision", "status"):
        values = [getattr(c, field) for c in cases]
        assert len({id(v) for v in values}) == len(set(values)), field
    metrics = [m for c in cases for m in c.metrics]
    assert metrics
    for part in ("name", "unit", "phase"):
        values = [getattr(m, part) for m in metrics]
        assert len({id(v) for v in values}) == len(set(values)), part
    # Read with nothing shared between its testcases, the same cases pickle larger.
    suite = next(etree.fromstring(written.read_bytes()).iter("testsuite"))
    name = suite.get("name") or ""
    scope = testcase.scope_of(name, testcase.props_of(suite), suite.get("timestamp"))
    unshared = tuple(testcase.read_case(str(written), name, scope, tc) for tc in suite.iterchildren("testcase"))
    assert unshared == cases
    assert len(pickle.dumps(cases)) < len(pickle.dumps(unshared))


def test_properties_read_alike_by_lxml_and_by_the_salvaging_parser() -> None:
    """lxml's elements are read with its own tag filter, xml.etree's (a cut file's) in Python: comments, properties
    of another namespace and a property without its value read the same, the last of a name winning."""
    text = (
        '<properties xmlns:o="urn:other"><!-- note --><property name="a" value="1"/>'
        '<o:property name="b" value="2"/><property name="c"/><property value="v"/><property name="a" value="3"/>'
        '<other name="d" value="4"/></properties>'
    )
    by_lxml = testcase._props(etree.fromstring(text))
    by_etree = testcase._props(ET.fromstring(text))
    assert by_lxml == by_etree == {"a": "3", "c": "", "": "v"}


def test_a_rows_causes_are_worked_out_once_per_message_and_never_shared_for_writing(tmp_path: Path) -> None:
    (written,) = write_rows(tmp_path, rows("48804", TARGET)[:2])
    row = merge.collect([written], PLAN).rows[0]
    message = "Failed: 3 Triton compile(s) after engine ready: _a, _b; max_abs_err 4.7e-09 exceeds 1e-09"
    failed = merge.RowResult(**{**vars(row), "status": "failure", "note": message})
    first = triage.row_causes(failed)
    said = {triage.cause_key(text): text for text in triage.clauses(message)}
    assert first == said and len(said) == 2
    first.clear()  # a caller's copy: the next row failing alike is told its causes whole
    assert triage.row_causes(failed) == said


def test_a_rows_runs_and_time_are_its_cases_own(tmp_path: Path) -> None:
    """What the report's two rendering processes read of a row, made once before they part: its runs' JSON (each case
    as it was encoded where it was read) and its time."""
    written = write_rows(tmp_path, rows("48804", TARGET)[:3]) + write_rows(
        tmp_path / "again", rows("48804", TARGET)[:3]
    )
    res = merge.collect(written, PLAN)
    ran = [r for r in res.rows if r.cases]
    assert ran and any(len(r.cases) > 1 for r in ran)
    for r in ran:
        assert orjson.loads(r.runs_json) == [orjson.loads(c.json) for c in r.cases]
        assert r.seconds == sum(c.time or 0.0 for c in r.cases)


def test_a_text_kept_once_is_always_itself(tmp_path: Path) -> None:
    """The texts a file shares map each text to itself: a value spelled like a metric's property name stays whole."""
    (tmp_path / "t.xml").write_text(
        '<testsuite name="s"><testcase classname="c" name="t1"><properties>'
        '<property name="stackgate.metric.m" value=\'{"value": 1.0, "unit": "s", "repeats": 1}\'/></properties>'
        '</testcase><testcase classname="c" name="t2"><properties>'
        '<property name="stackgate.change" value="stackgate.metric.m"/></properties></testcase></testsuite>'
    )
    first, second = junit_read.read(tmp_path / "t.xml").cases
    assert [m.name for m in first.metrics] == ["m"] and second.change == "stackgate.metric.m"
