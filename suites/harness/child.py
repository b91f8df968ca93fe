"""The child: one test item in a process of its own, its reports written to a result file before anything can exit
early (vLLM's and NCCL's atexit hooks can os._exit(0))."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from harness import causes, hardware, profile
from harness.items import FIRST_REQUEST_ONLY, TRACED_AFTER_READY, item_row, rows_doc


class Child:
    def __init__(self, result: Path) -> None:
        self.result = result
        self.reports: list[dict[str, Any]] = []

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        row, doc = item_row(item), rows_doc(item.config)
        if row is not None and doc is not None and not os.environ.get("STACKGATE_HW_CHECKED"):
            reason = hardware.absent_reason(doc.target, row.gpus)
            if reason:
                pytest.skip(reason)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        simple = _simple(report)
        if report.when == "call":  # what the timed requests did, after the engine was ready
            traced = profile.traced_in_requests()
            if traced:  # frames torch.compile traced
                simple["user_properties"].append([TRACED_AFTER_READY, profile.describe_traced(traced)])
            first = profile.describe_first_calls()
            if first:  # vLLM's once-per-process work, timed
                simple["user_properties"].append([FIRST_REQUEST_ONLY, first])
        self.reports.append(simple)

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        tmp = self.result.with_suffix(".tmp")
        tmp.write_text(json.dumps({"nodeid": nodeid, "reports": self.reports}))
        os.replace(tmp, self.result)


def _simple(report: pytest.TestReport) -> dict[str, Any]:
    message = ""
    if report.skipped:
        if hasattr(report, "wasxfail"):
            message = f"xfail: {report.wasxfail}"
        elif isinstance(report.longrepr, tuple):
            message = str(report.longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(report.longrepr, "reprcrash", None)
    if report.failed and crash is not None:
        message = crash.message.splitlines()[0] if crash.message else ""
        if message.isidentifier():  # a bare `assert` or exception in library code: say where, and what it checked
            message = _bare_failure(message, crash, report.longreprtext)
    return {
        "when": report.when,
        "outcome": report.outcome,
        "duration": report.duration,
        "message": message,
        "longrepr": report.longreprtext if report.failed else "",
        "user_properties": [[str(k), v if isinstance(v, str) else json.dumps(v)] for k, v in report.user_properties],
    }


def _bare_failure(name: str, crash: Any, text: str) -> str:
    """`AssertionError` alone names nothing: add the crash site (path from its package on) and the source line
    pytest marked with '>' last, e.g. "AssertionError at vllm/models/.../model.py:882: assert self.x is not None"."""
    path = causes.short_path(str(getattr(crash, "path", "")))
    source = next((ln[1:].strip() for ln in reversed(text.splitlines()) if ln.startswith(">")), "")
    return f"{name} at {path}:{getattr(crash, 'lineno', '?')}" + (f": {source}" if source else "")
