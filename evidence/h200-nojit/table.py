"""The three-condition table of this folder, from its JUnit: python3 table.py (prints markdown)."""

import json
import statistics
from pathlib import Path

from junitparser.xunit2 import JUnitXml

HERE = Path(__file__).parent
CONDITIONS = {"empty": "(a) empty caches", "aot": "(b) AOT bake only", "artefact": "(c) warm-run artefact"}


def cases(folder):
    for xml in sorted(folder.glob("*/junit-*.xml")):
        for suite in JUnitXml.fromfile(str(xml)):
            for c in suite:
                if "[" in c.name:
                    yield c.name.split("[")[1].rstrip("]"), c


def metric(props, name):
    raw = props.get(f"stackgate.metric.{name}")
    return json.loads(raw)["samples"] if raw else []


def spread(xs, fmt="{:.0f}"):
    if not xs:
        return "–"
    med = statistics.median(xs)
    return fmt.format(med) + (
        f" ({fmt.format(min(xs))}–{fmt.format(max(xs))}, n={len(xs)})" if len(xs) > 1 else " (n=1)"
    )


rows = {}
for cond in CONDITIONS:
    for row, c in cases(HERE / cond):
        p = {x.name: x.value for x in c.properties()}
        d = rows.setdefault(row, {}).setdefault(
            cond,
            {"ready": [], "cold": [], "warm": [], "ratio": [], "jit": [], "new": [], "kernels": set(), "refused": 0},
        )
        cold, warm = metric(p, "cold_first_request_ms"), metric(p, "warm_request_ms")
        d["ready"] += metric(p, "engine_ready_s")
        d["cold"] += cold
        d["warm"] += warm
        if cold and warm:
            d["ratio"].append(cold[0] / statistics.median(warm))
        d["jit"].append(int(p.get("stackgate.jit.compiles", "0")))
        d["new"].append(int(p.get("stackgate.jit.cache_new_files", "0")))
        d["kernels"] |= {k for k in p.get("stackgate.jit.kernels", "").split(",") if k}
        msg = " ".join((r.message or "") for r in c.result)
        d["refused"] += "JIT refused" in msg

HEAD = (
    "row",
    "condition",
    "engine ready s",
    "first request ms",
    "warm ms (median)",
    "first / warm",
    "Triton compiles (row)",
    "new JIT cache files",
    "JIT refused",
)
print("| " + " | ".join(HEAD) + " |")
print("|---|---|---|---|---|---|---|---|---|")
for row in sorted(rows):
    for cond, label in CONDITIONS.items():
        d = rows[row].get(cond)
        if not d:
            continue
        runs = len(d["jit"])
        print(
            f"| {row} | {label} | {spread(d['ready'], '{:.1f}')} | {spread(d['cold'])} | "
            f"{statistics.median(d['warm']):.0f} | {spread(d['ratio'], '{:.2f}x')} | "
            f"{'/'.join(map(str, d['jit']))} | {'/'.join(map(str, d['new']))} | {d['refused']} of {runs} |"
        )
