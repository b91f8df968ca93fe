"""Read one JUnit XML file into typed test cases (`ci.results.junit`), following docs/boundary.md.

junitparser reads whole documents (xunit2 and legacy, pytest's and others'). A file cut short, the
usual trace of a runner killed while writing, cannot be read by it at all; for those alone an
incremental xml.etree parse recovers the test cases that were written completely and the row that
was being written when the file ended.
"""

from __future__ import annotations

from pathlib import Path
from xml.etree.ElementTree import Element, ParseError, XMLPullParser

from junitparser import JUnitXmlError

from ci.results.junit import (
    PREFIX,
    Case,
    FileRead,
    FileStatus,
    Scope,
    _Case,
    _props,
    _read_case,
    _scope,
    _Suite,
    _Xml,
    row_from_name,
)


def read(path: Path) -> FileRead:
    name = str(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return FileRead(path=name, status="not found", problem="no such file")
    except OSError as exc:
        return FileRead(path=name, status="unreadable", problem=exc.strerror or str(exc))
    if not data.strip():
        return FileRead(path=name, status="empty", problem="the file is empty" if not data else "only whitespace")
    try:
        doc = _Xml.fromstring(data)
    except JUnitXmlError:
        return FileRead(path=name, status="not JUnit", problem="root element is neither <testsuites> nor <testsuite>")
    except SyntaxError:  # xml.etree's ParseError and lxml's XMLSyntaxError both derive from it
        return _salvage(name, data)
    cases, scopes = [], []
    for suite in _walk_suites(doc):
        scope = _scope(suite.name or "", _props(suite))
        scopes.append(scope)
        cases += [_read_case(name, suite.name or "", scope, tc) for tc in suite.iterchildren(_Case)]
    return FileRead(path=name, status="ok", problem="", cases=tuple(cases), scopes=tuple(scopes))


def _walk_suites(doc: _Xml) -> list[_Suite]:
    """Every <testsuite>, nested ones included, each once (junitparser flattens nested cases)."""
    out: list[_Suite] = []
    todo = list(doc)
    while todo:
        suite = todo.pop(0)
        out.append(suite)
        todo[:0] = list(suite.iterchildren(_Suite))
    return out


def _salvage(name: str, data: bytes) -> FileRead:
    """Recover what a broken file holds: complete testcases, the scope of its suites, the row it ended in."""
    parser = XMLPullParser(events=("start", "end"))
    parser.feed(data)  # a syntax error is queued among the events, not raised here
    events, error = _events(parser)
    ends_early = False
    if error is None:
        try:
            parser.close()
        except ParseError as exc:
            # Everything given parsed, but the document never closed: the file was cut short.
            error, ends_early = exc, True
        events += _events(parser)[0]
    stack: list[Element] = []
    root: Element | None = None
    suites: list[tuple[str, Scope]] = []
    cases: list[Case] = []
    for event, elem in events:
        if event == "start":
            root = elem if root is None else root
            stack.append(elem)
            continue
        stack.pop()
        if elem.tag == "properties" and stack and stack[-1].tag == "testsuite":
            suites.append((stack[-1].get("name", ""), _scope(stack[-1].get("name", ""), _elem_props(elem))))
        elif elem.tag == "testcase":
            suite_name = next((s.get("name", "") for s in reversed(stack) if s.tag == "testsuite"), "")
            scope = next((sc for n, sc in reversed(suites) if n == suite_name), _scope(suite_name, {}))
            cases.append(_read_case(name, suite_name, scope, _Case.fromelem(elem)))
    if root is None or root.tag not in ("testsuites", "testsuite"):
        first = f"root <{root.tag}>, then " if root is not None else ""
        return FileRead(path=name, status="not XML", problem=first + _where(error, "no element"))
    scopes = [sc for _, sc in suites]
    for open_suite in (e for e in stack if e.tag == "testsuite"):
        scopes.append(_scope(open_suite.get("name", ""), {}))
    cut = []
    for open_case in (e for e in stack if e.tag == "testcase"):
        props = {p.get("name"): p.get("value") for p in open_case.iter("property")}
        row = props.get(PREFIX + "row") or row_from_name(open_case.get("name", ""))
        if row:
            cut.append(row)
    status: FileStatus = "truncated" if ends_early else "malformed XML"
    problem = _where(error, "elements left open") + f"; {len(cases)} complete testcase(s) recovered"
    return FileRead(
        path=name, status=status, problem=problem, cases=tuple(cases), scopes=tuple(scopes), cut_rows=tuple(cut)
    )


def _events(parser: XMLPullParser) -> tuple[list[tuple[str, Element]], ParseError | None]:
    """The events parsed so far, and the syntax error that ended them (read_events raises it in place)."""
    out = []
    events = parser.read_events()
    while True:
        try:
            out.append(next(events))
        except StopIteration:
            return out, None
        except ParseError as exc:
            return out, exc


def _elem_props(elem: Element) -> dict[str, str]:
    return {p.get("name", ""): p.get("value", "") for p in elem.iter("property")}


def _where(error: ParseError | None, fallback: str) -> str:
    if error is None:
        return fallback
    line, col = error.position
    return f"{str(error).split(':', 1)[0]} at line {line}, column {col}"
