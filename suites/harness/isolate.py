"""One fresh Python process per test item, and what its end means.

Fork is no option: a CUDA context does not survive it, and a fresh interpreter is what "cold" means.
The child is `python -m pytest <nodeid>` in its own process group (vLLM spawns EngineCore and workers:
a timeout kills them all), writing its reports to a result file before it exits. A child that ends
without that file exited early (vLLM and NCCL atexit hooks can os._exit(0)); one killed by a signal
crashed; one past its time hung. None of these is a pass, whatever the exit status says. A hung item's
processes are first asked to dump their Python stacks into its log (STACK_DUMP_SIGNAL, which every process of a
row handles: harness.jit_sentinel), so that the row says where it hung.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

import harness
from harness import causes, hardware, reaper
from harness.items import ENV_CHILD, fresh_log
from harness.rows import Row, RowsDoc

Status = Literal["passed", "failed", "skipped", "error"]
TAIL_LINES = 40
STACK_DUMP_SIGNAL = signal.SIGUSR1  # faulthandler's dump of every thread, registered at each process's start
STACK_DUMP_GAP_S = 0.5  # one process after the other: dumps written at once interleave in the shared log


@dataclass(frozen=True, kw_only=True)
class Outcome:
    status: Status
    message: str  # one line: the reason shown in summaries and JUnit's message attribute
    details: str = ""  # longer text: the traceback, or the tail of the child's log
    duration_s: float = 0.0
    properties: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    log: str = ""  # path of the child's full log
    left_behind: tuple[str, ...] = ()  # "name (pid)" of processes still running when the item's process ended


def signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return "unknown"


def read_log(path: Path) -> str:
    """A child's log as written, carriage returns included (a progress bar's redrawings); "" where it is missing."""
    try:
        with path.open(encoding="utf-8", errors="replace", newline="") as fh:
            return fh.read()
    except OSError:
        return ""


def tail(path: Path, lines: int = TAIL_LINES) -> str:
    return "\n".join(read_log(path).splitlines()[-lines:])


def run_child(
    argv: Sequence[str],
    *,
    cwd: Path,
    result: Path,
    log: Path,
    timeout_s: float | None,
    env: Mapping[str, str] | None = None,
) -> Outcome:
    result.unlink(missing_ok=True)
    start = time.monotonic()
    with os.fdopen(fresh_log(log), "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, *argv],
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env) if env is not None else None,
            start_new_session=True,
        )
        try:
            rc = proc.wait(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            dump_stacks(proc.pid)
        except BaseException:  # a signal to the harness (reaper.Interrupted): the item's tree goes with it
            kill_group(proc.pid)
            proc.wait()
            raise
        # What the item left running (its group, or escaped with setsid: the harness adopts orphans) is
        # found and killed here, before anything else can; then the group goes, whatever is left of it.
        left = () if timed_out else tuple(reaper.sweep())
        kill_group(proc.pid)
        if timed_out:
            rc = proc.wait()
    elapsed = time.monotonic() - start
    if timed_out:
        return Outcome(
            status="error",
            message=f"timeout after {timeout_s:g} s{where_it_hung(read_log(log))}",
            details=tail(log),
            duration_s=elapsed,
            log=str(log),
        )
    reported = _read_result(result)
    if rc < 0:
        before = f" after the test {reported.status}" if reported else ""
        return Outcome(
            status="error",
            message=f"signal {-rc} ({signal_name(-rc)}){before}",
            details=tail(log),
            duration_s=elapsed,
            properties=reported.properties if reported else (),
            log=str(log),
        )
    if reported is None:
        return Outcome(
            status="error",
            message=f"no result (process exited {rc} without reporting)",
            details=tail(log),
            duration_s=elapsed,
            log=str(log),
        )
    return Outcome(
        status=reported.status,
        message=reported.message,
        details=reported.details,
        duration_s=reported.duration_s or elapsed,
        properties=reported.properties,
        log=str(log),
        left_behind=left,
    )


def dump_stacks(pid: int) -> None:
    """Every process of the hung item's tree that handles STACK_DUMP_SIGNAL writes its threads' stacks to the item's
    log, one at a time. The others (nvcc, ptxas, cicc, a shell) are left alone: SIGUSR1's default action ends a
    process, and a JIT compile killed that way reports a compiler failure that never happened."""
    for each in [pid, *(child for child, _ in reaper.descendants(pid))]:
        if not catches(each, STACK_DUMP_SIGNAL):
            continue
        try:
            os.kill(each, STACK_DUMP_SIGNAL)
        except (ProcessLookupError, PermissionError):
            continue
        time.sleep(STACK_DUMP_GAP_S)


def catches(pid: int, signum: int) -> bool:
    """Whether process `pid` has a handler for `signum` (bit signum-1 of SigCgt in /proc/<pid>/status). A process
    whose status cannot be read (gone, or not Linux) counts as not catching it, so it is never signalled."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def where_it_hung(text: str) -> str:
    """The sites the hung item's processes dumped, or, where none did, how far its log got."""
    if sites := causes.hang_sites(text):
        return f": hung in {'; '.join(sites)}"
    last = causes.last_output(text)
    return " (no process dumped its stack)" + (f"; last output: {last}" if last else "")


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _read_result(path: Path) -> Outcome | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return outcome_from_reports(doc.get("reports", []))


def outcome_from_reports(reports: list[dict[str, Any]]) -> Outcome | None:
    """pytest's own rule: a failed call is a failure, a failed setup or teardown is an error."""
    if not reports:
        return None
    props: dict[str, str] = {}
    for r in reports:
        for name, value in r.get("user_properties", []):
            props[str(name)] = str(value)
    duration = sum(float(r.get("duration", 0.0)) for r in reports)
    status: Status = "passed"
    message, details = "", ""
    for r in reports:
        if r["outcome"] == "failed":
            status = "failed" if r["when"] == "call" else "error"
            details = r.get("longrepr", "")
            message = r.get("message") or _first_line(details)
            if r["when"] != "call":
                message = f"{r['when']}: {message}"
            break
        if r["outcome"] == "skipped" and status == "passed":
            status, message = "skipped", r.get("message", "")
    return Outcome(
        status=status, message=message, details=details, duration_s=duration, properties=tuple(props.items())
    )


def _first_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        if line.startswith("E "):
            return line[1:].strip()
    return text.strip().splitlines()[0] if text.strip() else ""


def child_command(
    cfg: pytest.Config, doc: RowsDoc | None, nodeids: list[str], result: Path, row: Row | None, *, share: bool
) -> tuple[list[str], dict[str, str]]:
    """The child's command line and environment for `nodeids` (one item, or a shared group of one model's rows)."""
    argv = [
        "-m",
        "pytest",
        *nodeids,
        "-p",
        "harness.plugin",
        "--stackgate-child",
        str(result),
        *(["--stackgate-share"] if share else []),
        "--rootdir",
        str(cfg.rootpath),
        "-p",
        "no:cacheprovider",
        "-q",
        "-s",  # no capture: the row's output reaches its log as it is written, so a hung row's log is not empty
    ]
    if cfg.inipath:
        argv += ["-c", str(cfg.inipath)]
    env = dict(os.environ, **{ENV_CHILD: "1", "STACKGATE_HW_CHECKED": "1"}, **hardware.NO_MULTICAST)
    env["STACKGATE_ROW_ID"] = row.id if row else ""  # the JIT sentinel names the row that compiled
    if row is not None and doc is not None:  # the row's own GPUs: tp x dp of them, the same first ones
        env.update(hardware.assign(doc.target, row.gpus))
    if row is not None:  # what the model's checkpoint needs over the target's env (models.yaml says why)
        env.update({str(k): str(v) for k, v in (row.model_info.get("env") or {}).items()})
    harness_root = str(Path(harness.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (harness_root, env.get("PYTHONPATH", "")) if p)
    return argv, env
