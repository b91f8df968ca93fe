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


rows = {}
FOLDER = HERE / (sys.argv[1] if len(sys.argv) > 1 else "artefact")
for xml in sorted(FOLDER.glob("c*/junit-*.xml")):
    for suite in JUnitXml.fromfile(str(xml)):
        for case in suite:
            if "[" not in case.name:
                continue
            p = {x.name: x.value for x in case.properties()}
            row = case.name.split("[")[1].rstrip("]")
            d = rows.setdefault(row, {k: [] for k in ("ready", "cold", "ratio", "jit", "new")})
            cold, warm = samples(p, "cold_first_request_ms"), samples(p, "warm_request_ms")
            d["ready"] += samples(p, "engine_ready_s")
            d["cold"] += cold
            d["ratio"].append(cold[0] / statistics.median(warm))
            d["jit"].append(p.get("stackgate.jit.compiles", "?"))
            d["new"].append(p.get("stackgate.jit.cache_new_files", "?"))
print("| row | engine ready s | first request ms | first / warm | Triton compiles | new JIT cache files |")
print("|---|---|---|---|---|---|")
for row, d in sorted(rows.items()):
    print(
        f"| {row} | {spread(d['ready'], '{:.1f}')} | {spread(d['cold'])} | {spread(d['ratio'], '{:.2f}x')} "
        f"| {'/'.join(d['jit'])} | {'/'.join(d['new'])} |"
    )
