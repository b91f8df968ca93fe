"""What a run's JUnit file says, as `ci run`'s exit status: failed, nothing ran here, or fine; and a harness that
ended any other way than by finishing (a crash, the OOM killer) is a run error, never a green step."""

from __future__ import annotations

import signal
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from ci.common.contract import NOT_RUN, record_not_run
from ci.common.errors import NOTHING_RAN, RunError
from ci.stack.plan import Row

HARNESS_DONE = (0, 1)  # pytest's exits for "every item ran": all passed, some failed


def verdict(junit_path: Path, exit_status: int, expected: Sequence[Row] = (), *, stopped: bool = False) -> int:
    """1 when a testcase failed or errored; 6 when none ran (every one skipped, or none at all: a step on
    the wrong agent must not go green); else 0. A missing or unreadable file is a RunError, and so is a harness
    that ended otherwise than by finishing (`exit_status` not 0 or 1) or left rows of `expected` out of its JUnit:
    those rows are recorded as not run (not-run.json beside the JUnit), with the cause, before it is raised.
    `stopped`: `ci run` itself passed a signal on, and the harness ended as told (guard.Stopped follows)."""
    from junitparser import Error, Failure, JUnitXml, Skipped

    if not junit_path.exists():
        _none_written(junit_path, expected, f"no JUnit written (pytest exited {exit_status})")
    try:
        xml = JUnitXml.fromfile(str(junit_path))
    except Exception as exc:  # junitparser raises lxml/ElementTree errors
        _none_written(junit_path, expected, f"{junit_path}: unreadable JUnit ({exc}; pytest exited {exit_status})")
    cases = [c for s in xml for c in s]
    if not stopped:
        _ended_early(junit_path, exit_status, expected, cases)
    bad = [c for c in cases if any(isinstance(r, (Failure, Error)) for r in c.result)]
    skipped = [c for c in cases if any(isinstance(r, Skipped) for r in c.result)]
    print(f"{junit_path}: {len(cases)} testcases, {len(bad)} failed or errored, {len(skipped)} skipped")
    if bad:
        return 1
    if len(skipped) == len(cases):
        why = next((r.message for c in skipped for r in c.result if r.message), "no testcase") if skipped else ""
        print(f"nothing could run here: {why or 'no testcase'}")
        return NOTHING_RAN
    return 0


def _not_reached(junit_path: Path, expected: Sequence[Row], rows: Sequence[str], cause: str) -> None:
    """not-run.json beside the JUnit for `rows` of the run (`expected`), where there are any."""
    if expected and rows:
        fix = f"see the run's output and {junit_path.parent}/logs; then ci run again with --rows naming them"
        record_not_run(junit_path.parent, expected[0].target, expected[0].suite, rows, cause, fix)


def _none_written(junit_path: Path, expected: Sequence[Row], cause: str) -> NoReturn:
    """No result can be read: every row of the run is recorded as not run, with the cause, and the run is an error."""
    _not_reached(junit_path, expected, [r.id for r in expected], cause)
    where = f"; the rows are in {NOT_RUN}" if expected else ""
    raise RunError(cause, hint=f"see the output above and {junit_path.parent}{where}")


def _ended_early(junit_path: Path, exit_status: int, expected: Sequence[Row], cases: list) -> None:
    written = {p.get("value") for c in cases for p in c._elem.iter("property") if p.get("name") == "stackgate.row"}
    missing = [r.id for r in expected if r.id not in written]
    if exit_status in HARNESS_DONE and not missing:
        return
    how = (
        f"was killed by {signal.Signals(-exit_status).name}"
        if exit_status < 0 and -exit_status in signal.valid_signals()
        else f"exited {exit_status}"
    )
    cause = (
        f"the harness {how} before it ran {len(missing)} of the {len(expected)} rows"
        if missing
        else f"the harness {how} (pytest ends 0 or 1 when every item ran)"
    )
    _not_reached(junit_path, expected, missing, cause)
    raise RunError(
        f"{cause}: {junit_path} holds only what it wrote before",
        hint=f"see the output above and "
        f"{junit_path.parent}/logs{'; the rows not reached are in ' + NOT_RUN if missing else ''}",
    )
