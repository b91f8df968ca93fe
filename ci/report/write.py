"""`python -m ci report`: every target's JUnit -> report.md, report.html and report.json.

All three are rendered in memory first and then swapped in with os.replace, so a run that fails
anywhere leaves the previous report as it was. The exit code (`ci report`) says whether planned rows failed
(1), an input was broken under --strict (7), or no report could be produced (2, 5); docs/report.md.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import orjson

from ci.common import second_cpu
from ci.common.errors import ReportError, UsageError
from ci.common.escape import redacted
from ci.common.tables import counted
from ci.report import across as across_builds
from ci.report import html, json_doc, markdown
from ci.report.rerun_hints import forget
from ci.report.sections import first_screen
from ci.report.sections.first_screen import outside
from ci.report.view import Report, counts, status_tables
from ci.results import baseline, junit_read, merge, sides
from ci.results.junit import FileRead
from ci.stack import loader, plan
from ci.stack.model import Stack
from ci.stack.plan import Plan
from ci.upstream import state as upstream_state
from ci.upstream.port.tried import Tried

OUTPUTS = ("report.md", "report.html", "report.json")
T = TypeVar("T")
_FORK_CASES = 2000  # rows and testcases from which rendering in two processes pays


def build(
    stack_dir: Path,
    inputs: Sequence[Path],
    baseline_path: Path | None,
    *,
    targets: Sequence[str] = (),
    suites: Sequence[str] = (),
    changes: Sequence[str] = (),
    rows: Sequence[str] = (),
    compare_paths: Sequence[Path] = (),
    labels: Sequence[str] = (),
    upstream_path: Path | None = None,
    out: Path | None = None,
    made_with: Sequence[str] = (),
    loaded: tuple[Stack, Plan] | None = None,
    begun: junit_read.Begun | None = None,
    subject: upstream_state.Snapshot | None = None,
    stock: bool = False,
    history: Path | None = None,
    tried: Sequence[Tried] = (),
) -> Report:
    """The report over the planned rows the filters keep (all of them by default). With `compare_paths`, one results
    folder or JUnit file per further side, the report is side A's (`inputs`) with the comparison added. `begun`:
    `inputs` as the caller started reading them (reading.begin), before this was imported. `subject`: the fork the
    rows were run to judge (`ci main`), each change's state in it on the first screen; `stock`: the locked release was
    judged by --stock, a fork being configured. `history`: the history file this build is set beside
    (ci.report.across; `remember` adds it there). `tried`: the changes tried as ports (ci main --try-port), each
    leading the first screen."""
    forget()  # rows.json files looked up by an earlier report in this process may have changed
    st, whole = loaded or (loader.load(stack_dir), None)  # `loaded`: the stack and plan the caller already made
    whole = whole or plan.build(st)
    p = whole.select(targets=targets, suites=suites, changes=changes).only(rows)
    kept = {(r.change, r.target) for r in p.rows}
    left_out = {(r.change, r.target): _filter(r, targets, suites, changes) for r in whole.rows}
    res = merge.collect(begun or inputs, p)
    base, base_read = None, None
    if baseline_path is not None:
        # A baseline that cannot be used is an input problem shown in the report, not a reason to
        # withhold it: the regression criterion then reads "missing".
        try:
            base = baseline.load(baseline_path)
            base_read = FileRead(path=str(baseline_path), status="ok", problem="")
        except ReportError as exc:
            base_read = FileRead(path=str(baseline_path), status="unreadable", problem=exc.message)
    in_scope = {r.change for r in p.rows} if (targets or suites or changes or rows) else set(st.changes)
    across = None
    if history is None:
        verdicts = sides.judge(st, res, base, in_scope)
    else:  # quarantined rows held or waived as the stack says, before anything else reads the verdicts
        across, verdicts = across_builds.make(st, res, history, lambda r: sides.judge(st, r, base, in_scope))
    rebase: dict[str, Any] = {**_upstream(upstream_path), "out": out, "made_with": tuple(made_with)}
    rebase["history"] = across
    rebase.update(left_out={k: v for k, v in left_out.items() if k not in kept}, subject=subject, stock=stock)
    rebase["tried"] = tuple(tried)
    if subject is not None and "upstream" not in rebase:
        rebase["upstream"] = subject
    if not compare_paths:
        return Report(stack=st, plan=p, results=res, verdicts=verdicts, baseline=base_read, **rebase)
    names = sides.labels([inputs, *([c] for c in compare_paths)], labels)
    filtered = bool(targets or suites or changes or rows)
    each = [sides.side(names[0], inputs, res, verdicts, filtered)]
    for name, path in zip(names[1:], compare_paths, strict=True):
        other = merge.collect([path], p)  # each side judged as side A is, against the same baseline
        each.append(sides.side(name, [path], other, sides.judge(st, other, base, in_scope), filtered))
    compared = sides.compare(each, st)
    # one judgement per criterion: a change judged as ported on side A is judged so everywhere the report says it
    as_ported = {p.change: p.verdict for p in compared.ported if p.fork == names[0]}
    verdicts = tuple(as_ported.get(v.change.id, v) for v in verdicts)
    compared = replace(compared, sides=(replace(compared.sides[0], verdicts=verdicts), *compared.sides[1:]))
    return Report(
        stack=st,
        plan=p,
        results=res,
        verdicts=verdicts,
        baseline=base_read,
        comparison=compared,
        **rebase,
    )


def _filter(row: plan.Row, targets: Sequence[str], suites: Sequence[str], changes: Sequence[str]) -> str:
    """The filter that leaves a planned row out of the report."""
    if targets and row.target not in targets:
        return "--target"
    if changes and row.change not in changes:
        return "--change"
    return "--suite" if suites and row.suite not in suites else "--rows"


def _upstream(path: Path | None) -> dict[str, Any]:
    """The --upstream document (ci upstream --format json), or the reason it cannot be used, shown in the report."""
    if path is None:
        return {}
    try:
        return {
            "upstream": upstream_state.read(path),
            "upstream_read": FileRead(path=str(path), status="ok", problem=""),
        }
    except UsageError as exc:
        status = "unreadable" if path.exists() else "not found"
        return {"upstream_read": FileRead(path=str(path), status=status, problem=exc.message)}


def render(report: Report) -> dict[str, bytes]:
    """report.md, report.html and report.json, rendered in memory (as `write` renders them)."""
    theirs = _start(report, lambda: _json_and_around(report))
    tables = status_tables(report)
    page = html.render(report, tables).encode()
    doc, (head, tail) = theirs()
    md = markdown.assemble((head, markdown.matrices(tables), tail)).encode()
    return {"report.md": _secretless(md), "report.html": _secretless(page), "report.json": _secretless(doc)}


def write(report: Report, out: Path) -> None:
    """Render `report` and write it to `out` as `write_atomic` does. A large report is rendered by two processes
    (ci.common.second_cpu): the status matrices, for the HTML and the Markdown, and what both halves read of every row
    are made first (`_settle`); then a forked child renders report.json, writes it to its temporary file, and renders
    the Markdown around the matrices, while this process renders the HTML and puts report.md together (cut to
    Buildkite's limit). The two halves then take about as long, and the 15 MB of a 10,000-testcase report.json never
    cross between them."""

    def json_written(temps: Mapping[str, str]) -> tuple[list[str], list[str]]:
        doc, around = _json_and_around(report)
        _fill(temps["report.json"], doc)
        return around

    with staged(out, OUTPUTS) as temps:
        tables = status_tables(report)
        _settle(report)
        theirs = _start(report, lambda: json_written(temps))
        _fill(temps["report.html"], html.render(report, tables).encode())
        matrices = markdown.matrices(tables)
        head, tail = theirs()  # where the child failed, this process does its part too
        _fill(temps["report.md"], markdown.assemble((head, matrices, tail)).encode())


def _settle(report: Report) -> None:
    """What the halves read of every row's cases, made once before the fork: each row's metrics, its runs' JSON and
    its time. Made after it, each process walked every case for them, and paid a copy-on-write fault for each page
    it touched."""
    for r in report.results.rows:
        _ = r.metrics, r.runs_json, r.seconds  # cached properties: computed here, once, and kept on the row


def _start(report: Report, fn: Callable[[], T]) -> Callable[[], T]:
    """`fn` in a forked child where the report is large enough for the fork to pay; else here, when asked."""
    large = len(report.results.rows) + sum(len(r.cases) for r in report.results.rows) >= _FORK_CASES
    return second_cpu.start(fn) if large else fn


def _json_and_around(report: Report) -> tuple[bytes, tuple[list[str], list[str]]]:
    # report.json by orjson, compact: json's encoder took as long as building the document (10,000 testcases hold
    # half a million samples). Every number in it was read as finite (ci.results.metrics) or computed from those.
    doc = orjson.dumps(json_doc.to_json(report), option=orjson.OPT_APPEND_NEWLINE)
    return doc, markdown.around(report)


def write_atomic(out: Path, files: Mapping[str, bytes]) -> None:
    """Write every file beside its final name, then rename them all: nothing half-written is ever seen. The set is
    replaced as a whole (`staged`)."""
    with staged(out, files) as temps:
        for name, data in files.items():
            _fill(temps[name], data)


def _fill(tmp: str, data: bytes) -> None:
    with open(tmp, "wb") as fh:
        fh.write(_secretless(data))
        fh.flush()
        os.fsync(fh.fileno())


def _secretless(data: bytes) -> bytes:
    """A report file with no URL's userinfo in it (`ci.common.escape.redacted`): a token in a fork's remote, an
    upstream.json or a failure message is never written."""
    if b"://" not in data or b"@" not in data:
        return data
    return redacted(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")


@contextlib.contextmanager
def staged(out: Path, names: Iterable[str]) -> Iterator[dict[str, str]]:
    """A temporary file beside each of `names` in `out`, to be filled in the block (by any process); when the block
    ends, they are renamed over their names as a whole: where one rename fails, the files already renamed get their
    previous version back (kept as hard links until every rename is done), so the folder never mixes two reports.
    Where the block raises, nothing is renamed and the temporary files are removed."""
    temps: dict[str, str] = {}
    kept: dict[str, str] = {}  # name -> a hard link to the file it replaces
    done: list[str] = []
    umask = os.umask(0)  # mkstemp makes 0600 files; give the report the mode a plain open() would
    os.umask(umask)
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name in names:
            fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{name}.", suffix=".tmp")
            os.close(fd)
            temps[name] = tmp
            os.chmod(tmp, 0o666 & ~umask)
        yield temps
        for name in temps:
            if (out / name).exists():
                kept[name] = f"{temps[name]}.previous"
                os.link(out / name, kept[name])
        for name, tmp in temps.items():
            os.replace(tmp, out / name)
            done.append(name)
    except OSError as exc:
        for name in done:  # back to the previous report, whole
            if name in kept:
                os.replace(kept.pop(name), out / name)
            else:
                os.unlink(out / name)
        raise ReportError(
            f"{out}: cannot write the report: {exc.strerror or exc}", hint="check that --out names a writable directory"
        ) from None
    finally:
        for tmp in [*temps.values(), *kept.values()]:
            if os.path.exists(tmp):
                os.unlink(tmp)


BAD = ("failure", "error", "conflict", "incomplete")  # a row or testcase in one of these fails `ci report`


def failing(report: Report, *, outside_informational: bool = False) -> bool:
    """Whether a row of the plan failed, errored, disagreed or was cut short, or a testcase outside the plan failed
    (unless those were declared informational): `ci report` then exits 1."""
    planned = any(r.status in BAD for r in report.results.rows if r.planned is not None)
    return planned or (not outside_informational and outside(report)[1] > 0)


def summary(report: Report, out: Path, *, outside_informational: bool = False) -> str:
    """What was written, and how it stands; the banner's warnings go to stderr as well, grouped by kind."""
    for line in first_screen.warnings(report):
        print(f"warning: {line}", file=sys.stderr)
    res = report.results
    ready = sum(v.ready for v in report.verdicts)
    tally = ", ".join(f"{n} {status}" for status, n in counts(res).items())
    n_out, bad_out = outside(report)
    told = (
        (
            f", {counted(n_out, 'testcase')} outside the plan ({bad_out} failed or errored"
            f"{'; informational' if outside_informational else ''})"
        )
        if n_out
        else ""
    )
    line = (
        f"wrote {', '.join(OUTPUTS)} to {out}: {counted(len(res.rows), 'row')} ({tally}){told}, "
        f"{counted(len(res.inputs), 'input')} ({len(res.problems())} with problems); "
        f"{ready} of {counted(len(report.verdicts), 'change')} ready"
    )
    if h := report.history:
        kept = counted(len(h.earlier) + 1, "build")
        line += f"; history {h.path}: {kept}, {counted(len(h.quarantined), 'row')} quarantined"
    c = report.comparison
    if c:
        line += (
            f"; compared {' vs '.join(c.labels)}: {counted(len(c.lines), 'row metric')}, "
            f"{counted(len(c.partial), 'row')} missing from a side"
        )
    return line


def problems(report: Report) -> bool:
    """Whether any input, of any side, or the --upstream document was missing, empty or unreadable (--strict)."""
    others = report.comparison.sides[1:] if report.comparison else ()
    rebase = report.upstream_read is not None and report.upstream_read.status != "ok"
    return bool(report.results.problems()) or any(s.results.problems() for s in others) or rebase
