"""What a run's JUnit file says, as `ci run`'s exit status: failed, nothing ran here, or fine."""

from __future__ import annotations

from pathlib import Path

from ci.errors import NOTHING_RAN, RunError


def verdict(junit_path: Path, exit_status: int) -> int:
    """1 when a testcase failed or errored; 6 when none ran (every one skipped, or none at all: a step on
    the wrong agent must not go green); else 0. A missing or unreadable file is a RunError."""
    from junitparser import Error, Failure, JUnitXml, Skipped

    if not junit_path.exists():
        raise RunError(
            f"no JUnit written (pytest exited {exit_status})", hint=f"see the output above and {junit_path.parent}"
        )
    try:
        xml = JUnitXml.fromfile(str(junit_path))
    except Exception as exc:  # junitparser raises lxml/ElementTree errors
        raise RunError(f"{junit_path}: unreadable JUnit ({exc})") from None
    cases = [c for s in xml for c in s]
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
