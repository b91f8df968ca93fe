"""Read one JUnit XML file into typed test cases (`ci.results.junit`), following docs/boundary.md.

lxml reads whole documents (xunit2 and legacy, pytest's and others'), and each testcase is read straight
from its element. A file cut short, the usual trace of a runner killed while writing, cannot be parsed
whole; for those alone an incremental xml.etree parse recovers the test cases that were written
completely and the row that was being written when the file ended.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.etree.ElementTree import Element, ParseError, XMLPullParser

from lxml import etree

from ci.common import files, second_cpu
from ci.common.contract import NOT_RUN
from ci.results.junit import Case, FileRead, FileStatus, Scope
from ci.results.testcase import PREFIX, props_of, read_case, row_from_name, scope_of

MAX_JUNIT_BYTES = 4 << 30  # far above any run's JUnit (a 10,000-row report reads 64 MB); a device never ends
_PARSERS = threading.local()  # an lxml parser serves one thread at a time
_READERS = 2  # files parsed ahead of the one being read into cases: lxml parses without the GIL
_FORK_BYTES = 16 << 20  # below this, forking a second reader costs more than it saves


def _parser() -> etree.XMLParser:
    parser = getattr(_PARSERS, "parser", None)
    if parser is None:
        # Results are untrusted input: no entity expansion, no network; huge_tree for long failure texts.
        parser = _PARSERS.parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)
    return parser


def read(path: Path) -> FileRead:
    return _cases(path, _parse(path))


def read_all(paths: Iterable[Path]) -> Iterator[FileRead]:
    """`read` over many files, in order."""
    yield from _start(paths)()


@dataclass(frozen=True)
class Begun:
    """Results folders and files whose JUnit is being read (`begin`); `ci.results.merge.collect` merges them."""

    paths: tuple[Path, ...]  # as given
    given: tuple[Path | FileRead, ...]  # each file to read, or what is wrong with a folder given
    reads: Callable[[], list[FileRead]]  # the files' reads, in order, once read


def begin(paths: Sequence[Path]) -> Begun:
    """Start reading the JUnit under `paths`: what the caller does before asking for `reads()` runs beside the reading
    (this module imports nothing of the stack, so a command can begin before it has loaded one)."""
    given = tuple(expand(paths))
    return Begun(tuple(paths), given, _start([x for x in given if not isinstance(x, FileRead)]))


def expand(paths: Iterable[Path]) -> list[Path | FileRead]:
    """Files as given, directories as their *.xml files (recursively); each file once."""
    out: list[Path | FileRead] = []
    seen: set[Path] = set()
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.xml") if p.is_file())
            if not found and not any(path.rglob(NOT_RUN)):
                out.append(FileRead(path=str(path), status="empty", problem="directory holds no *.xml file"))
        else:
            found = [path]
        for f in found:
            key = f.resolve()
            if key not in seen:
                seen.add(key)
                out.append(f)
    return out


def _start(paths: Iterable[Path]) -> Callable[[], list[FileRead]]:
    """Start reading `paths`; the callable returned finishes and gives every file's FileRead, in order. Once lxml
    has parsed, reading is CPU-bound Python: where the files are large, a forked reader (`ci.common.second_cpu.share`)
    starts on them now, and this process takes its part of them when it calls the callable, so a caller that has other
    work first (imports, loading the stack) does it while the files are being read."""
    todo = list(paths)
    if sum(map(_size, todo)) < _FORK_BYTES or not second_cpu.possible():
        rest = lambda: list(_read_here(todo))  # noqa: E731
    else:
        with uncollected():  # the child is forked with the collector off, as this process reads
            rest = second_cpu.share(lambda i: read(todo[i]), len(todo))

    def finish() -> list[FileRead]:
        with uncollected():
            return rest()

    return finish


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # read() says what is wrong with it


def _read_here(paths: list[Path]) -> Iterator[FileRead]:
    """`read` over `paths` in this process, the next files parsed in threads while one is read into cases. At most
    `_READERS` parsed files wait at a time: a parsed tree takes several times its file's size in memory."""
    from concurrent.futures import Future, ThreadPoolExecutor  # not needed where a forked reader shares the files

    todo = iter(paths)
    with ThreadPoolExecutor(max_workers=_READERS, thread_name_prefix="junit-parse") as pool:
        ahead: deque[tuple[Path, Future[FileRead | etree._Element | bytes]]] = deque()
        for path in itertools.islice(todo, _READERS):
            ahead.append((path, pool.submit(_parse, path)))
        while ahead:
            path, parsed = ahead.popleft()
            for nxt in itertools.islice(todo, 1):
                ahead.append((nxt, pool.submit(_parse, nxt)))
            yield _cases(path, parsed.result())


@contextlib.contextmanager
def uncollected() -> Iterator[None]:
    """No cyclic garbage collection while files are read: reading makes hundreds of thousands of containers (cases,
    metrics, property dicts) and no cycles, so every collection only traversed them (a tenth of the reading time).
    `ci report` holds it for the whole command: what was read lives until the process ends, and the collections
    that judging and rendering start (imports, classes) traversed all of it again."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _parse(path: Path) -> FileRead | etree._Element | bytes:
    """The file's root element; its bytes where it is not well-formed XML; a FileRead where it cannot be read."""
    name = str(path)
    try:
        data = files.read_regular(path, MAX_JUNIT_BYTES)
    except FileNotFoundError:
        return FileRead(path=name, status="not found", problem="no such file")
    except OSError as exc:
        return FileRead(path=name, status="unreadable", problem=exc.strerror or str(exc))
    if not data.strip():
        return FileRead(path=name, status="empty", problem="the file is empty" if not data else "only whitespace")
    try:
        return etree.fromstring(data, _parser())
    except etree.XMLSyntaxError:
        return data


def _cases(path: Path, parsed: FileRead | etree._Element | bytes) -> FileRead:
    name = str(path)
    if isinstance(parsed, FileRead):
        return parsed
    if isinstance(parsed, bytes):
        return _salvage(name, parsed)
    if parsed.tag not in ("testsuites", "testsuite"):
        return FileRead(path=name, status="not JUnit", problem="root element is neither <testsuites> nor <testsuite>")
    cases, scopes, texts = [], [], {}
    for suite in _walk_suites(parsed):
        suite_name = suite.get("name") or ""
        scope = scope_of(suite_name, props_of(suite), suite.get("timestamp"))
        scopes.append(scope)
        cases += [read_case(name, suite_name, scope, tc, texts) for tc in suite.iterchildren("testcase")]
    return FileRead(path=name, status="ok", problem="", cases=tuple(cases), scopes=tuple(scopes))


def _walk_suites(root: etree._Element) -> list[etree._Element]:
    """Every <testsuite>, nested ones included (a suite's children), each once, in document order. Only the suites'
    children are looked at, not every element below them: a testcase's properties are most of a file's elements."""
    out: list[etree._Element] = []
    todo = [root] if root.tag == "testsuite" else list(root.iterchildren("testsuite", reversed=True))
    while todo:  # depth first, the next suite on top: no recursion, however deep a file nests them
        suite = todo.pop()
        out.append(suite)
        todo += suite.iterchildren("testsuite", reversed=True)
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
    texts: dict[str, str] = {}
    for event, elem in events:
        if event == "start":
            root = elem if root is None else root
            stack.append(elem)
            continue
        stack.pop()
        if elem.tag == "properties" and stack and stack[-1].tag == "testsuite":
            suite, props = stack[-1], _elem_props(elem)
            suites.append((suite.get("name", ""), scope_of(suite.get("name", ""), props, suite.get("timestamp"))))
        elif elem.tag == "testcase":
            suite_name = next((s.get("name", "") for s in reversed(stack) if s.tag == "testsuite"), "")
            scope = next((sc for n, sc in reversed(suites) if n == suite_name), scope_of(suite_name, {}))
            cases.append(read_case(name, suite_name, scope, elem, texts))
    if root is None or root.tag not in ("testsuites", "testsuite"):
        first = f"root <{root.tag}>, then " if root is not None else ""
        return FileRead(path=name, status="not XML", problem=first + _where(error, "no element"))
    scopes = [sc for _, sc in suites]
    for open_suite in (e for e in stack if e.tag == "testsuite"):
        scopes.append(scope_of(open_suite.get("name", ""), {}))
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
