"""Static SVG bar charts with an axis and ticks: cold beside warm of one quantity, per row, with the
min–max of the repeated samples as a whisker. No script, no external asset."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from ci.report.triage import Pair

LABEL_W, PLOT_W, BAR_H, GAP = 260, 420, 11, 10
COLD, WARM = "#b03a2e", "#e6a39b"


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least `top`."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return [i * step for i in range(math.ceil(top / step) + 1)]


def _extent(m) -> tuple[float, float]:
    return (min(m.samples), max(m.samples)) if m.samples else (m.value, m.value)


def chart(quantity: str, unit: str, pairs: Sequence[Pair]) -> str:
    top = max(max(_extent(p.cold)[1], _extent(p.warm)[1]) for p in pairs)
    ticks = nice_ticks(top)
    scale = PLOT_W / ticks[-1]
    height = 34 + len(pairs) * (2 * BAR_H + GAP) + 28
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {LABEL_W + PLOT_W + 70} {height}" '
           f'role="img" aria-label="{escape(quantity)}: cold and warm per row">',
           f'<text x="0" y="14" class="t">{escape(quantity)} ({escape(unit)}): cold (dark) and warm (light) per row; '
           "whiskers span the repeated samples</text>"]  # fmt: skip
    y0, y = 26, 26
    for p in pairs:
        out.append(f'<text x="{LABEL_W - 6}" y="{y + BAR_H + 4}" text-anchor="end" class="l">{escape(p.row)}</text>')
        for m, colour in ((p.cold, COLD), (p.warm, WARM)):
            w = max(1.0, m.value * scale)
            lo, hi = _extent(m)
            tip = f"{escape(m.name)}: {m.value:g} {escape(m.unit)} (n={m.repeats})"
            out.append(f'<rect x="{LABEL_W}" y="{y}" width="{w:.1f}" height="{BAR_H - 1}" fill="{colour}">'
                       f"<title>{tip}</title></rect>")  # fmt: skip
            if hi > lo:
                mid = y + BAR_H / 2
                out.append(f'<line x1="{LABEL_W + lo * scale:.1f}" x2="{LABEL_W + hi * scale:.1f}" y1="{mid}" '
                           f'y2="{mid}" stroke="#222"/>')  # fmt: skip
            out.append(f'<text x="{LABEL_W + w + 4:.1f}" y="{y + BAR_H - 2}" class="v">{m.value:.3g}</text>')
            y += BAR_H
        y += GAP
    axis = y + 4
    out.append(f'<line x1="{LABEL_W}" x2="{LABEL_W + PLOT_W}" y1="{axis}" y2="{axis}" stroke="#444"/>')
    for t in ticks:
        x = LABEL_W + t * scale
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y0 - 2}" y2="{axis + 4}" stroke="#ddd"/>')
        out.append(f'<text x="{x:.1f}" y="{axis + 16}" text-anchor="middle" class="v">{t:g}</text>')
    out.append("</svg>")
    return "".join(out)
