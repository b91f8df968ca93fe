"""report.html: one self-contained page for triage (inline CSS and SVG, no scripts, no external assets).

Rendered from `templates/report.html.j2` by Jinja2 with autoescape on: every piece of text from a result
is untrusted, and only the SVG that `ci.report.plot` builds (escaping what it embeds) goes in unescaped.
Order: the verdict table, then per change its cause, criteria, failing rows (full message, log, duration,
the line that re-runs each) and cold beside warm; then the status matrices, folded where nothing ran.
"""

from __future__ import annotations

import contextlib
from functools import cache

import jinja2
import jinja2.bccache
import markupsafe

from ci.common import options, owned, tables
from ci.common.escape import redacted
from ci.report import plot
from ci.report.sections import (
    across_view,
    at_target,
    combinations,
    comparison,
    first_screen,
    model_pairs,
    port_step,
    rebase,
    triage,
)
from ci.report.view import (
    FAILING,
    STATUS_MARK,
    Report,
    Table,
    change_heading,
    counts,
    duplicates_table,
    inputs_table,
    status_tables,
    unplanned_table,
)

_STATUS_CLASS = {"pass": "pass", "fail": "fail", "missing": "warn"}
_ROW_CLASS = {
    "pass": "pass",
    "failure": "fail",
    "error": "fail",
    "conflict": "warn",
    "skipped": "warn",
    "incomplete": "warn",
    "not run": "",
}


SHOWN_CAUSES = 3  # causes a change shows on the first screen, one line each (whole on hover); its section has all


@cache
def template() -> jinja2.Template:
    """The page's Jinja2 template, once per process. Its compiled code is kept in this user's cache (Jinja's bytecode
    cache, keyed by the template's source): compiling it took 35 ms of every report, reading it back 0.5 ms."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("ci.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        bytecode_cache=_compiled_cache(),
    )
    env.globals["counted"] = tables.counted
    env.finalize = _secretless
    return env.get_template("report.html.j2")


class _Compiled(jinja2.FileSystemBytecodeCache):
    """Jinja's bytecode cache, where a cache that cannot be written is no error: the template is compiled again."""

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        with contextlib.suppress(OSError):
            super().dump_bytecode(bucket)


def _secretless(value: object) -> object:
    """Every value the page prints without a URL's userinfo (`ci.common.escape.redacted`); markup stays markup."""
    if isinstance(value, str) and "://" in value:
        text = redacted(value)
        return markupsafe.Markup(text) if isinstance(value, markupsafe.Markup) else text
    return value


def _compiled_cache() -> _Compiled | None:
    """Compiled code runs as it loads: it is kept only in a folder nobody else could write to (`ci.common.owned`;
    Jinja's own check of ownership and mode applies only to the folder it picks itself)."""
    folder = options.cache_home() / "jinja"
    try:
        owned.make(folder)
    except OSError:
        return None  # a read-only home: compiled in memory, every time
    return _Compiled(str(folder)) if owned.usable(folder, "the report template's compiled code") else None


def _tally(c: dict[str, int]) -> str:
    return ", ".join(f"{n} {k}" for k, n in c.items()) or "none"  # words: a phone may lack the emoji font


def _matrix(target: str, t: Table) -> dict[str, object]:
    status = t.headers.index("Runs?")
    order = [0, status, *(i for i in range(1, len(t.headers)) if i != status)]  # the result beside the row id
    words = {mark: status for status, mark in STATUS_MARK.items()}  # a phone may lack the emoji font
    rows = tuple(tuple(words.get(r[i], r[i]) for i in order) for r in t.rows)
    tally: dict[str, int] = {}
    for r in rows:
        tally[r[1]] = tally.get(r[1], 0) + 1
    return {
        "target": target,
        "headers": tuple(t.headers[i] for i in order),
        "rows": rows,
        "tally": ", ".join(f"{k} {n}" for k, n in tally.items()),
        "open": any(r[1] != "not run" for r in rows),
        "classes": _ROW_CLASS,
    }


STATE_CLASS = {
    "ready": "pass",
    "fails": "fail",
    "not run": "notrun",
    "no rows": "fail",
    "waived": "pass",
    "not in this report": "notrun",
}


def render(report: Report, tables: dict[str, Table] | None = None) -> str:
    """The page; `tables`: each target's status matrix where the caller made them (view.status_tables)."""
    verdicts = []
    trends = report.history.trends if report.history else ()
    for v in report.verdicts:
        title, state = change_heading(v, report.results)
        label, _, name = title.partition(" ")
        by_quantity: dict[tuple[str, str], list[triage.Pair]] = {}
        for p in triage.pairs(report, v):
            by_quantity.setdefault((p.quantity, p.cold.unit), []).append(p)
        verdicts.append(
            {
                "id": v.change.id,
                "label": label,
                "title": name,
                "track": v.change.track,
                "state": state,
                "ready": v.ready,
                "text": v.text,
                "held_back": at_target.held_back(report, v),
                "causes": triage.causes(report, v),
                "failing": triage.failing(report, v),
                "criteria": [(c.name, c.status, c.evidence) for c in v.criteria],
                "charts": [plot.chart(q, unit, ps) for (q, unit), ps in by_quantity.items()],
                "rebase": rebase.cell(report, v.change.id),
                "rebase_line": rebase.line(report, v.change.id),
                "across": across_view.tables(report, v.change.id, values=False),  # each build's value: its chart
                "trends": [plot.trend(t, across_view.title(report, t)) for t in trends if t.change == v.change.id],
            }
        )
    status = status_tables(report) if tables is None else tables
    matrices = [_matrix(target, t) for target, t in status.items()]
    comp = combinations.table(report)
    named = model_pairs.table(report)
    extra: list[tuple[str, Table]] = [
        (f"{combinations.heading(report)} ({combinations.tally(comp)})", comp),
        (f"Named models, each beside its shrunk twin ({model_pairs.tally(named)})", named),
        ("Inputs", inputs_table(report)),
        ("Rows run more than once (kept side by side, never merged)", duplicates_table(report.results)),
        ("Results outside the plan", unplanned_table(report)),
    ]
    c = report.comparison
    compared = None
    if c is not None:
        compared = {"title": comparison.title(c), "intro": comparison.intro(c), "tables": comparison.tables(c)}
    first = first_screen.entries(report)
    tried = []
    for v in report.verdicts:  # a change tried as a port leads: ready or not, why, and the next step
        if lead := port_step.lead(report, v):
            command, note = first_screen.next_step(report, v)
            tried.append(
                {
                    "lead": lead,
                    "ready": v.ready,
                    "command": command,
                    "note": note,
                    "builds": port_step.builds(report, v.change.id),
                }
            )
    return template().render(
        tried=tried,
        comparison=compared,
        ready=sum(v.ready for v in report.verdicts),
        verdicts=verdicts,
        tally=_tally(counts(report.results)),
        outside=first_screen.outside_line(report),
        banner=first_screen.warnings(report),
        judged=first_screen.judged(report),
        first=first,
        forked=any(e.fork for e in first),
        baseline=first_screen.baseline(first),
        shown_causes=SHOWN_CAUSES,
        mark=first_screen.mark,
        said=at_target.said,
        state_class=STATE_CLASS,
        matrices=matrices,
        extra=extra,
        status_class=_STATUS_CLASS,
        failing_marks=set(FAILING),
        history=across_view.lines(report),
        across_rows=across_view.rows(report),
        rebase=rebase.where(report) if report.upstream else "",
        rebase_given=report.upstream_read is not None,
    )
