"""run.sh's plan: "stream suite row group gpus" lines for cuda-sm90's shrunk-model and DSpark/DFlash rows.

usage: [ONLY=text] [GROUP=row] plan.py one|b1|all RESULTS STREAMS
Rows with a result in RESULTS/*/junit-*.xml are left out (a row that a stop interrupted is not). GLM-5.2's #48407 row
comes first, then the #52512 guard's positive control ("break") until it has a result. The rows of one model and
change form a group, which runs in one stream on one caches root (its rows reuse what the first compiled); the groups
are spread over the streams by row count, most rows first. ONLY: just the rows whose model id or row id holds one of
its comma-separated texts (ONLY=deepseek-v4,hy3-shrunk.0a112c21); GROUP=row:
every row a group of its own (its own caches root: rows run side by side, each compiling for itself).
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

from junitparser.xunit2 import JUnitXml

DRAFTERS = ("tiny-qwen3-dspark", "tiny-qwen3-dflash")
PREFER = ("FLASH_ATTN", "FLASHMLA_SPARSE")


def finished(pattern: str) -> set[str]:
    """Row ids with a result in these JUnit files; a row stopped by SIGTERM runs again."""
    out = set()
    for f in glob.glob(pattern):
        for suite in JUnitXml.fromfile(f):
            for case in suite:
                res = case.result[0] if case.result else None
                if not (res is not None and (res.message or "").startswith("interrupted by SIG")):
                    out.add(case.name.split("[")[-1].rstrip("]"))
    return out


def main(which: str, res: str, streams: int) -> None:
    plan = subprocess.run(
        [sys.executable, "-m", "ci", "plan", "--target", "cuda-sm90", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = [r for r in json.loads(plan.stdout)["rows"] if r["model"].endswith("-shrunk") or r["model"] in DRAFTERS]
    only = os.environ.get("ONLY", "").split(",")
    rows = [
        r
        for r in rows
        if (which == "all" or int(r["batch"]) == 1) and any(t in r["model"] or t in r["id"] for t in only)
    ]
    # batch 1 first; a row on one GPU before one that needs two (tp or dcp 2), which a one-GPU host skips
    rows.sort(
        key=lambda r: (
            int(r["batch"]),
            r["suite"],
            r["model"],
            r["change"],
            int(r["gpus"]) > 1,
            r["spec_method"] is None,
            r["backend"] not in PREFER,
            r["id"],
        )
    )
    glm = next((r for r in rows if (r["suite"], r["model"], r["change"]) == ("sparse_mla", "glm-5.2-shrunk", "48407")),
               None)  # fmt: skip
    if which == "one":  # the first of each model, suite and change; each model's first row before any one's second
        firsts: dict[tuple[str, str, str], dict] = {}
        for r in rows:
            firsts.setdefault((r["suite"], r["model"], r["change"]), r)
        seen: set[str] = set()
        rows = sorted(firsts.values(), key=lambda r: r["model"] in seen or seen.add(r["model"]) or False)
    rows.sort(key=lambda r: r is not glm)  # stable: the others keep their order
    done = finished(f"{res}/s*-s*/junit-*.xml")
    todo = [(r["suite"], r) for r in rows if r["id"] not in done]
    if glm is not None and not finished(f"{res}/s*-break-*/junit-*.xml"):
        todo.insert(1 if todo and todo[0][1] is glm else 0, ("break", glm))
    load: dict[str, int] = {}
    for _, r in todo:
        load[group(r)] = load.get(group(r), 0) + 1
    stream_of, sizes = {}, [0] * streams
    for g in sorted(load, key=lambda g: -load[g]):
        s = sizes.index(min(sizes))
        stream_of[g], sizes[s] = s, sizes[s] + load[g]
    for suite, r in todo:
        print(stream_of[group(r)], suite, r["id"], group(r), r["gpus"])


def group(row: dict) -> str:
    return row["id"] if os.environ.get("GROUP") == "row" else f"{row['model']}.{row['change']}"


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
