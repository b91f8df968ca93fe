"""One <testcase> element (lxml's or xml.etree's) read into a `ci.results.junit.Case`, and the properties, scope
and row id around it, as docs/boundary.md defines them."""

from __future__ import annotations

import re
from typing import Any

from lxml import etree

from ci.common import contract
from ci.results.junit import Case, CaseStatus, Scope, made
from ci.results.metrics import finite, metrics_of

PREFIX, _METRIC = contract.PREFIX, contract.METRIC
_PARAM = re.compile(r"\[(.*)\]$")  # pytest puts a row's id in the test's name as the parameter id
_get = etree._Element.get


def props_of(elem: Any) -> dict[str, str]:
    """The <property> name/value pairs of a <testcase> or <testsuite> (its direct <properties> child)."""
    for child in elem:
        if child.tag == "properties":
            return _props(child)
    return {}


def _props(elem: Any) -> dict[str, str]:
    """A <properties> element's pairs, the last of a name winning. lxml's own methods, unbound, with its tag filter:
    a testcase has some 25 properties, and bound lookups and a tag compared in Python were a fifth of reading one."""
    if type(elem) is etree._Element:
        return {_get(p, "name", ""): _get(p, "value", "") for p in elem.iterchildren("property")}
    return {p.get("name", ""): p.get("value", "") for p in elem if p.tag == "property"}


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
_STATUS: dict[str, CaseStatus] = {"skipped": "skipped", "failure": "failure", "error": "error"}  # one str each
_BOOL = {"true": True, "false": False}
_METRIC_AT = len(_METRIC)
# The property names read, made once: 10,000 testcases ask for each of them.
_ROW, _CHANGE, _TRACK, _TARGET, _SUITE = (PREFIX + k for k in ("row", "change", "track", "target", "suite"))
_IMAGE, _REVISION, _AOT, _CAUSE = (PREFIX + k for k in ("image_digest", "git_revision", "aot", "cause"))
_COMPILES, _KERNELS, _NEW_FILES, _TRACED, _AFTER_READY = (
    PREFIX + k
    for k in ("jit.compiles", "jit.kernels", "jit.cache_new_files", "jit.traced_after_ready", "jit.after_ready_kernels")
)
_CARD = contract.CARD
(
    _VERSION,
    _COMMIT,
    _BUILD,
    _FORK,
    _FORK_CHANGES,
    _FORK_WITHOUT,
    _FORK_PORT,
    _FORK_HELD,
    _FORK_SOURCE,
    _PRESENT,
    _FIRST_ONLY,
    _SHARED,
    _MEANING,
) = (
    PREFIX + k
    for k in (
        "vllm_version",
        "vllm_commit",
        "vllm_build",
        "fork",
        "fork_changes",
        "fork_without",
        "fork_port",
        "fork_held",
        "fork_source",
        "change_present",
        "first_request_only",
        "gpu_shared_with",
        contract.ROW_MEANING,
    )
)


def read_case(file: str, suite_name: str, scope: Scope, tc: Any, texts: dict[str, str] | None = None) -> Case:
    """One <testcase> element (lxml's or xml.etree's) as a Case. Read straight from the element: wrapper
    objects per property and per result made reading 10,000 testcases several times lxml's own parse.

    `texts`: the values already read from the same file, each kept once. A row's id, change, target, revision and
    vLLM, a metric's name and unit, repeat on many testcases, and lxml makes a new str each time: kept once, a
    file's cases take less memory and pickle smaller (to the process that merges them)."""
    one = (texts if texts is not None else {}).setdefault
    props: dict[str, str] = {}
    status: CaseStatus = "pass"
    message, details, out = "", "", ""
    for child in tc:  # direct children only: a <failure> inside <properties> is no result
        tag = child.tag
        if tag == "properties":
            props = _props(child)
        elif tag in _RANK and _RANK[tag] > _RANK[status]:
            status = _STATUS[tag]
            details = (child.text or "").strip()
            message = child.get("message") or details.split("\n", 1)[0]
        elif tag == "system-out":
            out = child.text or ""
    problems: list[str] = []
    raws = [(one(n := k[_METRIC_AT:], n), v) for k, v in props.items() if k.startswith(_METRIC)]  # each text: itself
    metrics = metrics_of(raws, problems, one)
    name = tc.get("name") or ""
    get = props.get

    def same(key: str) -> str | None:
        value = get(key)
        return None if value is None else one(value, value)

    kernels, after_ready = get(_KERNELS), get(_AFTER_READY)
    return made(
        {
            "file": file,
            "junit_suite": suite_name,
            "name": name,
            "classname": one(classname := tc.get("classname") or "", classname),
            "path": tc.get("file") or "",
            "row": same(_ROW) or row_from_name(name),
            "change": same(_CHANGE),
            "track": same(_TRACK),
            "target": same(_TARGET) or scope.target,
            "suite": same(_SUITE) or scope.suite,
            "image_digest": same(_IMAGE),
            "git_revision": same(_REVISION),
            "status": status,
            "message": message,
            "details": details,
            "log": out.split("full log: ", 1)[1].strip().splitlines()[0] if "full log: " in out else "",
            "time": _time(tc.get("time"), problems),
            "jit_compiles": _int(props, _COMPILES, problems),
            "jit_kernels": _names(kernels),
            "jit_cache_new_files": _int(props, _NEW_FILES, problems),
            "metrics": tuple(metrics),
            "problems": tuple(problems),
            "aot": get(_AOT) or scope.aot,
            "vllm_version": (built := _vllm_build(props)) and one(built, built),
            "vllm_build": same(_BUILD),
            "fork_changes": _listed(get(_FORK_CHANGES)),
            "fork_without": get(_FORK_WITHOUT),
            "fork_port": get(_FORK_PORT),
            "fork_held": _held(get(_FORK_HELD)),
            "fork": same(_FORK),
            "gpu_shared_with": _listed(get(_SHARED)),
            "fork_source": get(_FORK_SOURCE) or _recorded_before(props),
            "change_present": _BOOL.get(get(_PRESENT, "")),
            "cause": get(_CAUSE),
            "jit_traced": get(_TRACED),
            "first_request_only": get(_FIRST_ONLY),
            "meaning": same(_MEANING),
            "card": same(_CARD),
            "after_ready_kernels": _names(after_ready),
        }
    )


def _recorded_before(props: dict[str, str]) -> str | None:
    """The fork and base of a build recorded before `stackgate.fork_source`: the fork's name and ref
    (`stackgate.fork`: "NAME REF BUILT"), over the vLLM release and commit its rows report."""
    fork, version = props.get(_FORK), props.get(_VERSION)
    if not fork or not version or len(fork.split()) < 2:
        return None
    name, ref = fork.split()[:2]
    return f"{name} {ref} over {version}@{props.get(_COMMIT) or '?'}"


def _vllm_build(props: dict[str, str]) -> str | None:
    """The vLLM a case ran on: its version, the commit of its build where the test recorded one, and the tree's
    content id (a fork build and the same fork without one change share version and commit, not the tree)."""
    version, commit = props.get(_VERSION), props.get(_COMMIT)
    tree = (props.get(_BUILD) or "").removeprefix("sha256:")[:12]
    named = f"{version} ({commit})" if version and commit else version
    return f"{named} build {tree}" if named and tree else named


def _listed(raw: str | None) -> tuple[str, ...] | None:
    return None if raw is None else tuple(x for x in raw.split(",") if x)


def _held(raw: str | None) -> tuple[tuple[str, str], ...] | None:
    """ "48407:converged;46849:ported, edited" -> (("48407", "converged"), ("46849", "ported, edited"))."""
    if raw is None:
        return None
    return tuple((c.strip(), s.strip()) for c, _, s in (p.partition(":") for p in raw.split(";")) if c.strip())


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


def _names(text: str | None) -> tuple[str, ...]:
    """A property's comma-separated kernel names."""
    return tuple(filter(None, map(str.strip, text.split(",")))) if text else ()
