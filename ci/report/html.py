"""report.html: one self-contained page (inline CSS and SVG, no scripts, no external assets).

Every piece of text from a result passes through html.escape: test names and messages are untrusted.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from html import escape

from ci.report.view import (
    STATUS_MARK,
    ColdWarm,
    Report,
    Table,
    banner,
    change_heading,
    cold_warm,
    cold_warm_table,
    counts,
    criteria_table,
    duplicates_table,
    failing_table,
    inputs_table,
    matrix_table,
    targets,
    unplanned_table,
)

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}
th,td{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}
th{background:#f3f3f3}
td.pass{background:#e8f6e8}td.fail{background:#fbe3e3}td.warn{background:#fff4d6}
code{background:#f3f3f3;padding:0 3px}
.verdict{font-weight:bold}
.banner{background:#fff4d6;border:1px solid #e0b000;padding:.5em 1em;margin:1em 0}
"""
_CLASS = {"✅": "pass", "❌": "fail", "⚠️": "warn"}


def render(report: Report) -> str:
    res = report.results
    ready = sum(v.ready for v in report.verdicts)
    out = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
           "<title>stackgate report</title>", f"<style>{_CSS}</style></head><body>",
           "<h1>stackgate report</h1>",
           f"<p><b>{ready} of {len(report.verdicts)} imported changes ready for default enablement.</b> Rows: "
           + escape(", ".join(f"{STATUS_MARK[k]} {n}" for k, n in counts(res).items())) + "</p>"]  # fmt: skip
    warnings = banner(report)
    if warnings:
        out.append('<div class="banner"><b>Warning</b><ul>' + "".join(f"<li>{escape(w)}</li>" for w in warnings)
                   + "</ul></div>")  # fmt: skip
    for v in report.verdicts:
        title, state = change_heading(v)
        out += [f"<h2>{escape(title)}</h2>", f"<p>{escape(state)}</p>",
                f'<p class="verdict">Verdict: {escape(v.text)}</p>', _table(criteria_table(v))]  # fmt: skip
    out += ["<h2>Failing rows</h2>", _table(failing_table(res), code_col="Reproduce locally")]
    out += ["<h2>Inputs</h2>", _table(inputs_table(report))]
    dups = duplicates_table(res)
    if dups.rows:
        out += ["<h2>Rows run more than once</h2><p>Kept side by side, never merged.</p>", _table(dups)]
    for target in targets(report):
        t = matrix_table(report, target)
        if t.rows:
            out += [f"<h2>Status matrix: {escape(target)}</h2>", _table(t)]
    out.append("<h2>Cold vs warm</h2><p>Cold: first request in a fresh process. Warm: steady state.</p>")
    for v in report.verdicts:
        data = cold_warm(report, v)
        if data:
            out += [f"<h3>#{escape(v.change.id)}</h3>", _plot(v.change.acceptance.measurements.cold,
                    v.change.acceptance.measurements.warm, data), _table(cold_warm_table(v, data))]  # fmt: skip
    other = unplanned_table(res)
    if other.rows:
        out += ["<h2>Results outside the plan</h2>", _table(other)]
    out.append("</body></html>\n")
    return "\n".join(out)


def _table(t: Table, code_col: str = "") -> str:
    if not t.rows:
        return "<p><i>none</i></p>"
    code = t.headers.index(code_col) if code_col in t.headers else -1
    head = "".join(f"<th>{escape(h)}</th>" for h in t.headers)
    body = []
    for row in t.rows:
        cells = []
        for i, cell in enumerate(row):
            cls = _CLASS.get(cell.split(" ", 1)[0], "")
            attr = f' class="{cls}"' if cls else ""
            text = f"<code>{escape(cell)}</code>" if i == code else escape(cell)
            cells.append(f"<td{attr}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _plot(cold_names: Sequence[str], warm_names: Sequence[str], data: Sequence[ColdWarm]) -> str:
    """Grouped bars per target: median cold vs median warm latency (the first *_ms metric of each)."""
    cold = next((n for n in cold_names if n.endswith("_ms")), None)
    warm = next((n for n in warm_names if n.endswith("_ms")), None)
    if not cold or not warm:
        return ""
    groups: list[tuple[str, float | None, float | None]] = []
    for target in dict.fromkeys(d.target for d in data):
        c = [m.value for d in data if d.target == target for m in d.cold if m.name == cold]
        w = [m.value for d in data if d.target == target for m in d.warm if m.name == warm]
        groups.append((target, statistics.median(c) if c else None, statistics.median(w) if w else None))
    top = max([v for _, c, w in groups for v in (c, w) if v is not None] or [1.0]) or 1.0
    label_w, bar_w, bar_h = 160, 420, 14
    height = len(groups) * (2 * bar_h + 14) + 30
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 160}" height="{height}" '
             f'role="img" aria-label="cold vs warm latency">',
             f'<text x="0" y="14" font-size="12">median {escape(cold)} (cold, dark) vs {escape(warm)} '
             "(warm, light), ms</text>"]  # fmt: skip
    y = 26
    for target, c, w in groups:
        parts.append(f'<text x="0" y="{y + bar_h + 4}" font-size="12">{escape(target)}</text>')
        for value, colour in ((c, "#c0392b"), (w, "#f5b7b1")):
            width = 0 if value is None else max(1, round(bar_w * value / top))
            label = "no data" if value is None else f"{value:g} ms"
            parts.append(f'<rect x="{label_w}" y="{y}" width="{width}" height="{bar_h}" fill="{colour}"/>')
            parts.append(f'<text x="{label_w + width + 4}" y="{y + bar_h - 3}" font-size="11">{label}</text>')
            y += bar_h
        y += 14
    parts.append("</svg>")
    return "".join(parts)
