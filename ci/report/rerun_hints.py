"""How a reader re-runs what failed, from the report alone, and finds its log: the lines `ci repro` prints for a row
or a test, made from the rows.json `ci run` left beside the JUnit, with every path written relative to the folder
the report was made in (a checkout, a build's downloaded artifacts), never the machine's."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

from ci.results.junit import Case
from ci.results.merge import RowResult
from ci.stack.model import Stack


def shown(path: Path) -> str:
    """A path as the report prints it: relative to the working folder where it lies below it (a checkout, a
    build's downloaded artifacts), so that the report names nothing of the machine that made it."""
    where, resolved = Path.cwd().resolve(), path.resolve()
    return str(resolved.relative_to(where)) if resolved.is_relative_to(where) else str(path)


def log_file(case: Case) -> Path | None:
    """The row's full log where it lies beside its JUnit file: the harness names it relative to that file, or
    (older runs) by the absolute path of the machine that ran it, whose `logs/<name>` travels with the JUnit.
    String paths, not pathlib: a report asks this for every failing row."""
    if not case.log or not case.file:
        return None
    beside = os.path.dirname(case.file)
    for candidate in (os.path.join(beside, case.log), os.path.join(beside, "logs", os.path.basename(case.log))):
        if os.path.isfile(candidate):
            return Path(candidate)
    return None


def repro(row_id: str, rows_json: Path | None = None) -> str:
    """The command that prints a row's re-run lines. Row ids come from result files: quoted, so pasting it
    runs nothing but this command."""
    from ci.run.rerun import lines  # the run stage makes every re-run line; the report shows them

    return lines.repro_line(row_id, shown(rows_json) if rows_json else None)


@dataclass(frozen=True, kw_only=True)
class Rerun:
    hint: str  # `python -m ci repro <id> --rows-json <path>`: prints both lines
    command: str  # the line that re-runs the row itself (docker where it ran in an image), "" where unknown
    why_not: str = ""  # why no command could be made


def hint(r: RowResult) -> str:
    """The command that prints a row's re-run lines, from the rows.json beside its result where there is one."""
    case = r.cases[0] if r.cases else None
    return repro(r.id, rows_json_beside(case.file) if case else None)


def rerun(r: RowResult, st: Stack) -> Rerun:
    """How to re-run a row, from the report alone: the rows.json `ci run` left beside the row's JUnit, with the
    line's target (platform, devices, env) from `st`, the stack the report judges with."""
    case = r.cases[0] if r.cases else None
    if case is None:
        return Rerun(hint=repro(r.id), command="", why_not="no result file")
    key = (r.id, case.file, _in_image(case), os.getcwd(), st.digest)  # os.getcwd(): Path.cwd() as a str
    if key not in _MADE:  # one per row and working folder: every section of the report that names it asks
        _MADE[key] = _rerun(st, *key[:4])
    return _MADE[key]


_MADE: dict[tuple[str, str, bool, str, str], Rerun] = {}


def _rerun(st: Stack, row_id: str, file: str, in_image: bool, cwd: str) -> Rerun:
    rows_json = rows_json_beside(file)
    if rows_json is None:
        return Rerun(hint=repro(row_id), command="", why_not=f"no rows.json beside {file}")
    from ci.common.errors import UsageError
    from ci.run.rerun import lines as repro_cmd  # the run stage makes the line; the report only shows it

    try:
        lines = repro_cmd.from_rows_json(st, rows_json, row_id, base=Path(cwd))
    except UsageError as exc:
        return Rerun(hint=repro(row_id, rows_json), command="", why_not=exc.message)
    return Rerun(hint=repro(row_id, rows_json), command=lines.docker if in_image else lines.host)


@functools.lru_cache(maxsize=1024)
def rows_json_beside(junit_file: str) -> Path | None:
    """The rows.json `ci run` wrote beside a JUnit file, where there is one (looked up once per report: `forget`)."""
    found = Path(junit_file).resolve().parent / "rows.json"
    return found if found.is_file() else None


def forget() -> None:
    """Drop what the last report looked up on disk: a new report sees the files as they are now."""
    _MADE.clear()
    rows_json_beside.cache_clear()


def rerun_test(case: Case, st: Stack) -> str:
    """The line that re-runs one testcase outside the plan as its run did, or "" where its run left no rows.json."""
    rows_json = rows_json_beside(case.file)
    if case.status not in ("failure", "error") or rows_json is None:
        return ""
    from ci.common.errors import UsageError
    from ci.run.rerun import lines as repro_cmd

    try:
        lines = repro_cmd.from_rows_json(st, rows_json, f"{case.classname}::{case.name}", base=Path.cwd())
    except UsageError:
        return ""
    return lines.docker if _in_image(case) else lines.host


def image_beside(case: Case) -> str | None:
    """The image the run of `case` recorded, by content (`ci repro --report` checks and re-runs it), or None."""
    rows_json = rows_json_beside(case.file)
    if rows_json is None:
        return None
    from ci.common.errors import UsageError
    from ci.run.rerun import lines as repro_cmd
    from ci.run.rerun import rows_json_read

    try:
        image = rows_json_read.read(rows_json.resolve())[0].image
    except UsageError:
        return None
    return repro_cmd.image_of(image.model_dump() if image else None) or None


def _in_image(case: Case) -> bool:
    """Whether the case ran in an image (its re-run line is then docker's), not on a host's Python."""
    return case.image_digest not in (None, "", "none")
