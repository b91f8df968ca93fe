"""The (c) table of a folder of runs (default artefact/, host B), from its JUnit: python3 table.py [FOLDER]
(prints markdown)."""

import json
import statistics
import sys
from pathlib import Path

from junitparser.xunit2 import JUnitXml

HERE = Path(__file__).parent


def samples(props, name):
    raw = props.get(f"stackgate.metric.{name}")
    return json.loads(raw)["samples"] if raw else []


def spread(xs, fmt="{:.0f}"):
    med = statistics.median(xs)
    return f"{fmt.format(med)} ({fmt.format(min(xs))}–{fmt.format(max(xs))}, n={len(xs)})"


SHORT = {
    "vLLM logits-processor plugin scan": "plugin scan",
    "a prompt length's first use (measured on a new one after the warm requests)": "new prompt length",
}
rows = {}
FOLDER = HERE / (sys.argv[1] if len(sys.argv) > 1 else "artefact")
for xml in sorted(FOLDER.glob("c*/junit-*.xml")):
    for suite in JUnitXml.fromfile(str(xml)):
        for case in suite:
            if "[" not in case.name:
                continue
            p = {x.name: x.value for x in case.properties()}
            row = case.name.split("[")[1].rstrip("]")
            d = rows.setdefault(row, {k: [] for k in ("ready", "cold", "ratio", "jit", "new", "paid")})
            cold, warm = samples(p, "cold_first_request_ms"), samples(p, "warm_request_ms")
            d["ready"] += samples(p, "engine_ready_s")
            d["cold"] += cold
            d["ratio"].append(cold[0] / statistics.median(warm))
            d["jit"].append(p.get("stackgate.jit.compiles", "?"))
            d["new"].append(p.get("stackgate.jit.cache_new_files", "?"))
            over = cold[0] - statistics.median(warm)
            named = [
                (w.rsplit(" (", 1)[0], float(w.rsplit("(", 1)[1].split()[0]))
                for w in (p.get("stackgate.first_request_only") or "").split("; ")
                if w.endswith(" ms)")
            ]
            d["paid"].append((over, named))
print("| row | engine ready s | first request ms | first / warm | Triton compiles | new JIT cache files |")
print("|---|---|---|---|---|---|")
for row, d in sorted(rows.items()):
    print(
        f"| {row} | {spread(d['ready'], '{:.1f}')} | {spread(d['cold'])} | {spread(d['ratio'], '{:.2f}x')} "
        f"| {'/'.join(d['jit'])} | {'/'.join(d['new'])} |"
    )
if any(d["paid"] for d in rows.values()):  # what the first request paid over the warm median, per run
    print()
    print("| row | run | over warm ms | named by the row (ms) | not named ms |")
    print("|---|---|---|---|---|")
    for row, d in sorted(rows.items()):
        for n, (over, named) in enumerate(d["paid"], 1):
            parts = "; ".join(f"{SHORT.get(w, w)} {ms:.0f}" for w, ms in named) or "none"
            print(f"| {row} | {n} | {over:.0f} | {parts} | {over - sum(ms for _, ms in named):.0f} |")
