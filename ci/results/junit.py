"""The typed test cases of a JUnit file, as docs/boundary.md defines them: a case's row, scope, status,
JIT properties and metrics. `ci.results.reading` reads files into them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from ci import contract
from ci.results.metrics import Metric, finite, metrics_of

CaseStatus = Literal["pass", "failure", "error", "skipped"]
# ok: read whole. The others name what is wrong with the file; all of them appear in the report.
FileStatus = Literal["ok", "not found", "unreadable", "empty", "not XML", "truncated", "malformed XML", "not JUnit"]

PREFIX, _METRIC = contract.PREFIX, contract.METRIC
_PARAM = re.compile(r"\[(.*)\]$")  # pytest puts a row's id in the test's name as the parameter id


@dataclass(frozen=True, kw_only=True)
class Case:
    """One <testcase> of one file, with the boundary's properties read into fields."""

    file: str
    junit_suite: str  # the <testsuite> name
    name: str
    classname: str
    path: str  # pytest's `file` attribute (legacy family), "" where absent
    row: str | None  # stackgate.row, or the pytest parameter id when it looks like a row id
    change: str | None
    track: str | None
    target: str | None
    suite: str | None
    image_digest: str | None
    git_revision: str | None
    status: CaseStatus
    message: str
    details: str  # the failure's, error's or skip's full text ("" for a pass)
    log: str  # the row's full log, where the harness named it (<system-out>full log: PATH)
    vllm_version: str | None = None  # stackgate.vllm_version (+ vllm_commit, vllm_build): the vLLM the test ran on
    vllm_build: str | None = None  # stackgate.vllm_build: the content id of the vLLM tree (harness.vllm_build)
    fork_changes: tuple[str, ...] | None = None  # stackgate.fork_changes: a fork build's imported changes
    fork_without: str | None = None  # stackgate.fork_without: the change an ablated fork build dropped
    change_present: bool | None = None  # stackgate.change_present: the row's presence probe
    time: float | None
    jit_compiles: int | None
    jit_kernels: tuple[str, ...]
    jit_cache_new_files: int | None
    metrics: tuple[Metric, ...]
    problems: tuple[str, ...]  # properties that did not follow the contract
    aot: str | None = None  # from its <testsuite>: the ahead-of-time cache the row ran with
    cause: str | None = None  # stackgate.cause: the harness's line from the row's log that says why it crashed
    jit_traced: str | None = None  # stackgate.jit.traced_after_ready: frames torch.compile traced in a request
    first_request_only: str | None = None  # stackgate.first_request_only: once-per-process work in a request

    @property
    def test(self) -> str:
        """The test function without its parameters: two cases of one row and one test are duplicates."""
        return f"{self.classname}::{self.name.split('[', 1)[0]}"

    # Each metric by name, the first one recorded winning: judging and rendering 10,000 cases ask 200,000 times.
    _by_name: dict[str, Metric] = field(init=False, repr=False, compare=False)
    # The case as report.json lists it among its row's runs (ci/report/report.schema.json), encoded where the case is
    # made: in the processes that read the JUnit, side by side, not in the one that writes the report after them.
    json: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _derive(self.__dict__)

    def metric(self, name: str) -> Metric | None:
        return self._by_name.get(name)

    @property
    def metrics_by_name(self) -> dict[str, Metric]:
        """Each metric by name, the first recorded winning (read only)."""
        return self._by_name


def _derive(case: dict[str, Any]) -> None:
    """A case's derived fields, written into its own dict (a frozen dataclass's fields are set once, here)."""
    case["_by_name"] = {m.name: m for m in reversed(case["metrics"])}
    # Copied out at its own size: orjson returns even 600 bytes in a buffer of 4 KiB or more, and 10,000 testcases
    # kept 45 MB of that slack (page faults in the reading, and in every process forked after it).
    case["json"] = _exact(
        orjson.dumps(
            {
                "file": case["file"],
                "junit_suite": case["junit_suite"],
                "test": f"{case['classname']}::{case['name']}",
                "status": case["status"],
                "message": case["message"],
                "image_digest": case["image_digest"],
                "git_revision": case["git_revision"],
                "problems": case["problems"],
                "vllm_version": case["vllm_version"],
                "vllm_build": case["vllm_build"],
                "fork_changes": case["fork_changes"],
                "fork_without": case["fork_without"],
                "jit": {
                    "compiles": case["jit_compiles"],
                    "kernels": case["jit_kernels"],
                    "cache_new_files": case["jit_cache_new_files"],
                },
            }
        )
    )


def _exact(data: bytes) -> bytes:
    """`data` in an allocation of its own length."""
    return memoryview(data).tobytes()


_new_object = object.__new__


def _made(fields: dict[str, Any]) -> Case:
    """The Case of `fields`, which names every field `Case(...)` takes, made as pickle makes one: its dict filled at
    once. The frozen dataclass's __init__ sets each of its 31 fields through object.__setattr__, which took as long
    as the rest of reading a testcase's properties into fields. Equal to `Case(**fields)` (a test holds them so)."""
    case = _new_object(Case)
    case.__dict__.update(fields)
    _derive(case.__dict__)
    return case


@dataclass(frozen=True, kw_only=True)
class Scope:
    """The target and suite a <testsuite> ran, from its properties or its name."""

    target: str | None
    suite: str | None
    stack_digest: str = ""
    aot: str | None = None  # the AOT cache the rows ran with ("image", "host:<manifest>", "none"); None: not said
    caches: str | None = None  # what the JIT caches started from ("empty", "aot", "artefact:<file>", "image")
    timestamp: str = ""  # the <testsuite timestamp>: when the run wrote it ("" where not said)


@dataclass(frozen=True, kw_only=True)
class FileRead:
    path: str
    status: FileStatus
    problem: str  # "" when ok
    cases: tuple[Case, ...] = ()
    scopes: tuple[Scope, ...] = ()  # what the file's suites covered: rows there may be incomplete
    cut_rows: tuple[str, ...] = ()  # rows whose testcase the file ended inside


def props_of(elem: Any) -> dict[str, str]:
    """The <property> name/value pairs of a <testcase> or <testsuite> (its direct <properties> child)."""
    for child in elem:
        if child.tag == "properties":
            return {p.get("name", ""): p.get("value", "") for p in child if p.tag == "property"}
    return {}


def scope_of(suite_name: str, props: dict[str, str], timestamp: str | None = None) -> Scope:
    target, suite = props.get(PREFIX + "target"), props.get(PREFIX + "suite")
    named = contract.parse_suite_name(suite_name)  # stackgate.<target>.<suite>.<shard>
    if named:
        target, suite = target or named[0], suite or named[1]
    return Scope(
        target=target,
        suite=suite,
        stack_digest=props.get(PREFIX + "stack_digest", ""),
        aot=props.get(PREFIX + "aot"),
        caches=props.get(PREFIX + "caches"),
        timestamp=timestamp or "",
    )


def row_from_name(name: str) -> str | None:
    """The pytest parameter id of `test_x[<row id>]`, where it looks like a row id."""
    m = _PARAM.search(name)
    if not m:
        return None
    found = contract.RowId.find(m.group(1))
    return str(found) if found else None


_RANK = {"pass": 0, "skipped": 1, "failure": 2, "error": 3}  # a testcase with several results shows the worst
_BOOL = {"true": True, "false": False}
_METRIC_AT = len(_METRIC)
# The property names read, made once: 10,000 testcases ask for each of them.
_ROW, _CHANGE, _TRACK, _TARGET, _SUITE = (PREFIX + k for k in ("row", "change", "track", "target", "suite"))
_IMAGE, _REVISION, _AOT, _CAUSE = (PREFIX + k for k in ("image_digest", "git_revision", "aot", "cause"))
_COMPILES, _KERNELS, _NEW_FILES, _TRACED = (
    PREFIX + k for k in ("jit.compiles", "jit.kernels", "jit.cache_new_files", "jit.traced_after_ready")
)
_VERSION, _COMMIT, _BUILD, _FORK_CHANGES, _FORK_WITHOUT, _PRESENT, _FIRST_ONLY = (
    PREFIX + k
    for k in (
        "vllm_version",
        "vllm_commit",
        "vllm_build",
        "fork_changes",
        "fork_without",
        "change_present",
        "first_request_only",
    )
)


def read_case(file: str, suite_name: str, scope: Scope, tc: Any) -> Case:
    """One <testcase> element (lxml's or xml.etree's) as a Case. Read straight from the element: wrapper
    objects per property and per result made reading 10,000 testcases several times lxml's own parse."""
    props: dict[str, str] = {}
    status: CaseStatus = "pass"
    message, details, out = "", "", ""
    for child in tc:  # direct children only: a <failure> inside <properties> is no result
        tag = child.tag
        if tag == "properties":
            props = {p.get("name", ""): p.get("value", "") for p in child if p.tag == "property"}
        elif tag in _RANK and _RANK[tag] > _RANK[status]:
            status = tag  # type: ignore[assignment]
            details = (child.text or "").strip()
            message = child.get("message") or details.split("\n", 1)[0]
        elif tag == "system-out":
            out = child.text or ""
    problems: list[str] = []
    metrics = metrics_of([(k[_METRIC_AT:], v) for k, v in props.items() if k.startswith(_METRIC)], problems)
    name = tc.get("name") or ""
    get = props.get
    kernels = get(_KERNELS)
    return _made(
        {
            "file": file,
            "junit_suite": suite_name,
            "name": name,
            "classname": tc.get("classname") or "",
            "path": tc.get("file") or "",
            "row": get(_ROW) or row_from_name(name),
            "change": get(_CHANGE),
            "track": get(_TRACK),
            "target": get(_TARGET) or scope.target,
            "suite": get(_SUITE) or scope.suite,
            "image_digest": get(_IMAGE),
            "git_revision": get(_REVISION),
            "status": status,
            "message": message,
            "details": details,
            "log": out.split("full log: ", 1)[1].strip().splitlines()[0] if "full log: " in out else "",
            "time": _time(tc.get("time"), problems),
            "jit_compiles": _int(props, _COMPILES, problems),
            "jit_kernels": tuple(filter(None, map(str.strip, kernels.split(",")))) if kernels else (),
            "jit_cache_new_files": _int(props, _NEW_FILES, problems),
            "metrics": tuple(metrics),
            "problems": tuple(problems),
            "aot": get(_AOT) or scope.aot,
            "vllm_version": _vllm_build(props),
            "vllm_build": get(_BUILD),
            "fork_changes": _listed(get(_FORK_CHANGES)),
            "fork_without": get(_FORK_WITHOUT),
            "change_present": _BOOL.get(get(_PRESENT, "")),
            "cause": get(_CAUSE),
            "jit_traced": get(_TRACED),
            "first_request_only": get(_FIRST_ONLY),
        }
    )


def _vllm_build(props: dict[str, str]) -> str | None:
    """The vLLM a case ran on: its version, the commit of its build where the test recorded one, and the tree's
    content id (a fork build and the same fork without one change share version and commit, not the tree)."""
    version, commit = props.get(_VERSION), props.get(_COMMIT)
    tree = (props.get(_BUILD) or "").removeprefix("sha256:")[:12]
    named = f"{version} ({commit})" if version and commit else version
    return f"{named} build {tree}" if named and tree else named


def _listed(raw: str | None) -> tuple[str, ...] | None:
    return None if raw is None else tuple(x for x in raw.split(",") if x)


def _time(raw: str | None, problems: list[str]) -> float | None:
    try:
        return finite(raw, "time") if raw is not None else None
    except ValueError:
        problems.append(f"time={raw!r} is not a number of seconds")
        return None


def _int(props: dict[str, str], key: str, problems: list[str]) -> int | None:
    raw = props.get(key)
    if raw is None:
        return None
    try:
        return int(raw)
    except (ValueError, OverflowError):
        problems.append(f"{key}={raw!r} is not an integer")
        return None
