"""Static SVG bar charts with an axis and ticks: cold beside warm of one quantity, per row, with the
min–max of the repeated samples as a whisker. No script, no external asset.

Readable where people read them: each row's name on its own line above its bars (never clipped), sized in CSS
pixels (width and height given: a page never scales it down to a phone's width; it scrolls there, its text as large
as on a desktop), each value's label after the end of its bar and its whisker (never struck through by it), plain
numbers with the unit (no scientific notation), and a log axis where the values span decades (a 1,500 ms cold bar
beside a 40 ms warm one). A trend (`trend`): one change's metric over its last builds, with its 7-day mean and 30-day
best."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from ci.history.trends import Trend
from ci.report.sections.triage import Pair

LEFT, PLOT_W, BAR_H, NAME_H, GAP = 24, 420, 14, 18, 10  # LEFT: room for the first tick's number
COLD, WARM = "#b03a2e", "#e6a39b"
DECADES = 1.5  # a log axis once the largest value is over 10**1.5 (about 32) times the smallest


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least `top`."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return [i * step for i in range(math.ceil(top / step) + 1)]


def num(v: float) -> str:
    """A plain number: 1,496 not 1.5e+03; 0.274 not 2.74e-01; three significant digits below 100."""
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    digits = max(0, 2 - math.floor(math.log10(abs(v))))
    return f"{v:.{min(digits, 6)}f}".rstrip("0").rstrip(".")


def _extent(m) -> tuple[float, float]:
    return (min(m.samples), max(m.samples)) if m.samples else (m.value, m.value)


class _Axis:
    """Linear from 0, or log10 between the decades around the positive values."""

    def __init__(self, low: float, top: float) -> None:
        self.log = low > 0 and top / low > 10**DECADES
        if self.log:
            self.lo, self.hi = math.floor(math.log10(low)), math.ceil(math.log10(top))
            self.ticks = [10.0**e for e in range(self.lo, self.hi + 1)]
        else:
            self.ticks = nice_ticks(top)

    def x(self, v: float) -> float:
        if self.log:
            span = max(self.hi - self.lo, 1)
            return LEFT + PLOT_W * (math.log10(max(v, 10.0**self.lo)) - self.lo) / span
        return LEFT + PLOT_W * v / self.ticks[-1]


def chart(quantity: str, unit: str, pairs: Sequence[Pair]) -> str:
    values = [v for p in pairs for m in (p.cold, p.warm) for v in (*_extent(m), m.value)]
    positive = [v for v in values if v > 0]
    axis = _Axis(min(positive) if positive else 0.0, max(values) if values else 0.0)
    scale_note = "log scale" if axis.log else "linear scale"
    height = 30 + len(pairs) * (NAME_H + 2 * BAR_H + GAP) + 30
    width = LEFT + PLOT_W + 110
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{escape(quantity)}: cold and warm per row">',
        f'<text x="0" y="16" class="t">{escape(quantity)} ({escape(unit)}, {scale_note}): cold (dark), warm '
        "(light)</text>",
    ]
    y0 = y = 28
    for p in pairs:
        out.append(f'<text x="{LEFT}" y="{y + NAME_H - 5}" class="l">{escape(p.row)}</text>')
        y += NAME_H
        for m, colour in ((p.cold, COLD), (p.warm, WARM)):
            end = max(LEFT + 1.5, axis.x(m.value))
            lo, hi = _extent(m)
            tip = f"{escape(m.name)}: {num(m.value)} {escape(m.unit)} (n={m.repeats})"
            out.append(
                f'<rect x="{LEFT}" y="{y}" width="{end - LEFT:.1f}" height="{BAR_H - 2}" fill="{colour}">'
                f"<title>{tip}</title></rect>"
            )
            if hi > lo:
                mid = y + BAR_H / 2 - 1
                out.append(f'<line x1="{axis.x(lo):.1f}" x2="{axis.x(hi):.1f}" y1="{mid}" y2="{mid}" stroke="#222"/>')
            label = max(end, axis.x(hi)) + 4  # after the bar and its whisker: no line through the number
            out.append(f'<text x="{label:.1f}" y="{y + BAR_H - 3}" class="v">{num(m.value)} {escape(m.unit)}</text>')
            y += BAR_H
        y += GAP
    base = y + 2
    out.append(f'<line x1="{LEFT}" x2="{LEFT + PLOT_W}" y1="{base}" y2="{base}" stroke="#444"/>')
    for t in axis.ticks:
        x = axis.x(t)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y0}" y2="{base + 4}" stroke="#ddd"/>')
        out.append(f'<text x="{x:.1f}" y="{base + 18}" text-anchor="middle" class="v">{num(t)}</text>')
    out.append("</svg>")
    return "".join(out)


TREND_W, TREND_H, T_LEFT, T_RIGHT, T_TOP, T_BOTTOM = 470, 132, 52, 170, 26, 24
NOW, LINE = "#b03a2e", "#555"


def trend(t: Trend, title: str) -> str:
    """One change's metric on one target over its last builds: each build a point (this one dark), the 7-day mean a
    dashed line and the 30-day best a dotted one, each labelled at the right; the least and greatest values on the
    axis; the first and last builds named under it."""
    values = [p.value for p in t.points] + [v for v in (t.mean, t.best) if v is not None]
    lo, hi = min(values), max(values)
    if hi == lo:
        lo, hi = lo - (abs(lo) or 1) * 0.1, hi + (abs(hi) or 1) * 0.1
    span_x, span_y = TREND_W - T_LEFT - T_RIGHT, TREND_H - T_TOP - T_BOTTOM
    n = len(t.points)

    def x(i: int) -> float:
        return T_LEFT + (span_x * i / (n - 1) if n > 1 else span_x / 2)

    def y(v: float) -> float:
        return T_TOP + span_y * (hi - v) / (hi - lo)

    unit = escape(t.unit)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{TREND_W}" height="{TREND_H}" '
        f'viewBox="0 0 {TREND_W} {TREND_H}" role="img" aria-label="{escape(title)}">',
        f'<text x="0" y="15" class="t">{escape(title)}</text>',
        f'<line x1="{T_LEFT}" x2="{T_LEFT}" y1="{T_TOP}" y2="{T_TOP + span_y}" stroke="#444"/>',
        f'<text x="{T_LEFT - 4}" y="{T_TOP + 4}" text-anchor="end" class="v">{num(hi)}</text>',
        f'<text x="{T_LEFT - 4}" y="{T_TOP + span_y + 4}" text-anchor="end" class="v">{num(lo)}</text>',
    ]
    label_y: list[float] = []  # where each line's label went: a second one too near moves clear of the first
    for value, name, dash in ((t.mean, "7-day mean", "5,3"), (t.best, "30-day best", "1,3")):
        if value is not None:
            out.append(
                f'<line x1="{T_LEFT}" x2="{T_LEFT + span_x}" y1="{y(value):.1f}" y2="{y(value):.1f}" '
                f'stroke="{LINE}" stroke-dasharray="{dash}"/>'
            )
            at = y(value) + 4
            if label_y and abs(at - label_y[0]) < 14:
                at = label_y[0] + (14 if at >= label_y[0] else -14)
            label_y.append(at)
            out.append(f'<text x="{T_LEFT + span_x + 6}" y="{at:.1f}" class="v">{name} {num(value)} {unit}</text>')
    coords = " ".join(f"{x(i):.1f},{y(p.value):.1f}" for i, p in enumerate(t.points))
    out.append(f'<polyline points="{coords}" fill="none" stroke="{LINE}"/>')
    for i, p in enumerate(t.points):
        last = i == n - 1
        tip = f"{escape(p.called)}, {p.at:%Y-%m-%d}: {num(p.value)} {unit} (median of {p.rows})"
        out.append(
            f'<circle cx="{x(i):.1f}" cy="{y(p.value):.1f}" r="{4 if last else 2.5}" '
            f'fill="{NOW if last else LINE}"><title>{tip}</title></circle>'
        )
    base = T_TOP + span_y + 16
    out.append(f'<text x="{T_LEFT}" y="{base}" class="v">{escape(t.points[0].called)}</text>')
    if n > 1:
        end = escape(t.points[-1].called)
        out.append(f'<text x="{T_LEFT + span_x}" y="{base}" text-anchor="end" class="v">{end}</text>')
    out.append("</svg>")
    return "".join(out)
