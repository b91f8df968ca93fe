"""What reading and rendering work out once and share: a file's repeated texts, a message's causes, a row's runs."""

from __future__ import annotations

import pickle
import xml.etree.ElementTree as ET
from pathlib import Path

from lxml import etree
from report_helpers import rows, write_rows

from ci.results import reading, testcase

TARGET = "cuda-sm121a"


def test_a_files_repeated_texts_are_each_kept_once(tmp_path: Path) -> None:
    """Every testcase of a row repeats its change, target, revision and vLLM, and every metric its name and unit:
    read from one file, equal texts are one object, and the file pickles (to the process that merges it) smaller."""
    (written,) = write_rows(tmp_path, rows("48804", TARGET)[:12])
    cases = reading.read(written).cases
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
