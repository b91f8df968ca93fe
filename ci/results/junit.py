"""The typed test cases of a JUnit file, as docs/boundary.md defines them: a case's row, scope, status,
JIT properties and metrics. `ci.results.junit_read` reads files into them, each testcase by `ci.results.testcase`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from ci.results.metrics import Metric

CaseStatus = Literal["pass", "failure", "error", "skipped"]
# ok: read whole. The others name what is wrong with the file; all of them appear in the report.
FileStatus = Literal["ok", "not found", "unreadable", "empty", "not XML", "truncated", "malformed XML", "not JUnit"]


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
    fork_port: str | None = None  # stackgate.fork_port: the change a port tried on the fork build brought (--try-port)
    # stackgate.fork_held: each imported change as the fork build holds it, (change, state) as `ci fork` found it
    fork_held: tuple[tuple[str, str], ...] | None = None
    # stackgate.gpu_shared_with: what else ran on this run's GPU while it ran (the scheduler's record); its timings are
    # then no evidence about the build
    gpu_shared_with: tuple[str, ...] | None = None
    fork: str | None = None  # stackgate.fork: the fork build, "demo-fork main ffa236ab7621" (name, ref, commit)
    fork_source: str | None = None  # stackgate.fork_source: "<fork>@<commit> over <base>@<commit>" it was built from
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
    meaning: str | None = None  # stackgate.meaning: the digest of what the row meant where it ran (ci.stack.meaning)
    card: str | None = None  # stackgate.card: the cards the row ran on (model, memory, driver), not the target's label
    # stackgate.jit.after_ready_kernels: the kernels compiled after the engine reported ready, each once ("k ×2")
    after_ready_kernels: tuple[str, ...] = ()

    @property
    def test(self) -> str:
        """The test function without its parameters: two cases of one row and one test are duplicates."""
        return f"{self.classname}::{self.name.split('[', 1)[0]}"

    # Each metric by name, the first one recorded winning (read only): judging and rendering 10,000 cases ask 200,000
    # times, so it is a field, not a property (its call was a tenth of judging them).
    metrics_by_name: dict[str, Metric] = field(init=False, repr=False, compare=False)
    # The case as report.json lists it among its row's runs (ci/report/report.schema.json), encoded where the case is
    # made: in the processes that read the JUnit, side by side, not in the one that writes the report after them.
    json: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _derive(self.__dict__)

    def metric(self, name: str) -> Metric | None:
        return self.metrics_by_name.get(name)


def _derive(case: dict[str, Any]) -> None:
    """A case's derived fields, written into its own dict (a frozen dataclass's fields are set once, here)."""
    case["metrics_by_name"] = {m.name: m for m in reversed(case["metrics"])}
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
                "card": case["card"],
                "jit": {
                    "compiles": case["jit_compiles"],
                    "kernels": case["jit_kernels"],
                    "cache_new_files": case["jit_cache_new_files"],
                    "after_ready": case["after_ready_kernels"],
                },
            }
        )
    )


def _exact(data: bytes) -> bytes:
    """`data` in an allocation of its own length."""
    return memoryview(data).tobytes()


_new_object = object.__new__


def made(fields: dict[str, Any]) -> Case:
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
