"""The child: one test item in a process of its own, its reports written to a result file before anything can exit
early (vLLM's and NCCL's atexit hooks can os._exit(0)); or, shared (harness.shared), several items one after another,
each with its own result file, log and JIT window."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from harness import causes, hardware, jit_seen, profile
from harness.items import (
    ENV_ITEM_LOGS,
    ENV_SHARE,
    FIRST_REQUEST_ONLY,
    TRACED_AFTER_READY,
    fresh_log,
    item_row,
    log_name,
    rows_doc,
)
from harness.shared import CURRENT, ITEMS, result_file, seen_to_json


class Child:
    """`result`: the item's result file; in a shared child (`share`), the folder of every item's (harness.shared)."""

    def __init__(self, result: Path, share: bool = False) -> None:
        self.result = result
        self.share = share
        self.reports: list[dict[str, Any]] = []
        self.order: dict[str, int] = {}
        self.window: jit_seen.Window | None = None
        if share:
            self.order = {n: i for i, n in enumerate(json.loads((result / ITEMS).read_text()))}
            os.environ[ENV_SHARE] = "1"

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str) -> None:
        if not self.share or nodeid not in self.order:
            return
        self.reports = []
        profile.next_row()
        _replace(self.result / CURRENT, json.dumps({"index": self.order[nodeid], "started": time.monotonic()}))
        log = Path(os.environ[ENV_ITEM_LOGS]) / log_name(nodeid)
        sys.stdout.flush()
        sys.stderr.flush()
        fd = fresh_log(log)
        os.dup2(fd, 1)  # this process's output, the in-process engine's included, goes to the item's own log
        os.dup2(fd, 2)
        os.close(fd)
        self.window = jit_seen.Window()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        row, doc = item_row(item), rows_doc(item.config)
        if self.share:  # the JIT sentinel names the row that compiled, in this process and those it starts now
            os.environ["STACKGATE_ROW_ID"] = row.id if row else ""
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
            peak = _gpu_peak_gib()
            if peak is not None:  # what packing rows on a GPU has to hold (a shared process: its peak so far)
                simple["user_properties"].append([GPU_PEAK, f"{peak:.2f}"])
        self.reports.append(simple)

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        doc: dict[str, Any] = {"nodeid": nodeid, "reports": self.reports}
        path = self.result
        if self.share and nodeid in self.order:
            path = result_file(self.result, self.order[nodeid])
            if self.window is not None:
                # the items of a shared child run one after another, and the child's JIT log is its own: what was
                # appended while this item ran is this item's, from whichever process (inductor's compile workers
                # were started for an earlier row) it came
                doc["jit"] = seen_to_json(self.window.seen())
        _replace(path, json.dumps(doc))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        """A shared child ends here: every item wrote its result, and tearing down the engines kept for later rows
        (vLLM's shutdown, its atexit hooks) could only hang; the process's end frees the device."""
        if self.share:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)


GPU_PEAK = "stackgate.gpu_peak_gib"


def _gpu_peak_gib() -> float | None:
    """The most GPU memory torch's allocator of this process has held on any device, in GiB; None where this process
    never touched CUDA (vLLM's engine then ran elsewhere, or no GPU was used)."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not cuda.is_initialized():
        return None
    return max(cuda.max_memory_reserved(d) for d in range(cuda.device_count())) / 2**30


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


def _replace(path: Path, text: str) -> None:
    """`path` holding `text`, renamed over it from a new file made exclusively beside it: the parent reads it whole."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)
