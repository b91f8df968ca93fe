"""The figures of a bake and the runs from its artefact, from their results folders: per phase, the wall time, the rows
and their outcomes, GPU-seconds a row (wall x GPUs / rows), the compiles each row saw (after ready: the run's must be
0), and per model and change what its one process took; with --baked, the ids of the rows a bake or run ran to a result;
with --pick, rows to run again one process each, a model and change after another; with --compare, each row's
status and cause in an isolated run beside a shared run of the same rows (identical expected).

    python3 evidence/h200-bake-scheduled/summarize.py bake-results 205 [run 98]
    python3 evidence/h200-bake-scheduled/summarize.py --baked bake-results
    python3 evidence/h200-bake-scheduled/summarize.py --names isolate folder 120   (the phases' names, in order)
    python3 evidence/h200-bake-scheduled/summarize.py --pick N ROW,ROW,...
    python3 evidence/h200-bake-scheduled/summarize.py --compare RUN_RESULTS ISOLATE_RESULTS
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

from lxml import etree

P = "stackgate."


def cases(folder: Path) -> list[dict[str, str]]:
    found = []
    for junit in sorted(folder.rglob("junit-*.xml")):
        for tc in etree.parse(str(junit)).getroot().iter("testcase"):
            props = {p.get("name"): p.get("value") or "" for p in tc.iter("property")}
            status = next((c.tag for c in tc if c.tag in ("error", "failure", "skipped")), "pass")
            message = next((c.get("message") or "" for c in tc if c.tag in ("error", "failure", "skipped")), "")
            if message.startswith("interrupted by "):
                status = "interrupted"
            found.append({**props, "status": status, "time": tc.get("time") or "0", "message": message,
                          "file": junit.name})  # fmt: skip
    return found


def _after_ready(c: dict[str, str]) -> float:
    try:
        return float(json.loads(c.get(P + "metric.compiles_after_ready") or "{}").get("value") or 0)
    except ValueError:
        return 0.0


def summary(name: str, folder: Path, wall_s: float) -> None:
    cs = [c for c in cases(folder) if c.get(P + "row")]
    rows = {c[P + "row"] for c in cs}
    by_status: dict[str, int] = defaultdict(int)
    for c in cs:
        by_status[c["status"]] += 1
    compiles = sum(int(c.get(P + "jit.compiles") or 0) for c in cs)
    late = [(c[P + "row"], _after_ready(c), c.get(P + "jit.kernels", "")) for c in cs if _after_ready(c) > 0]
    refused = [(c[P + "row"], c["message"][:160]) for c in cs if "JIT refused" in c["message"]]
    print(f"== {name}: {len(rows)} rows in {wall_s:.0f} s wall on 1 GPU: {wall_s / max(1, len(rows)):.1f} GPU-s a row; "
          f"{dict(by_status)}; {compiles} compiles seen by the rows, {len(late)} rows compiled after ready, "
          f"{len(refused)} refused a compile")  # fmt: skip
    for row, n, kernels in late[:10]:
        print(f"   after ready: {row}: {n:g} ({kernels[:120]})")
    for row, message in refused[:10]:
        print(f"   refused: {row}: {message}")
    groups: dict[str, list[dict[str, str]]] = defaultdict(list)
    for c in cs:
        groups[c["file"]].append(c)
    for file, together in sorted(groups.items()):
        first = together[0][P + "row"].split(".")
        seconds = sum(float(c["time"]) for c in together)
        print(f"   {first[2]}/{first[0]}: {len(together)} rows, {seconds:.0f} s of rows in one process ({file})")
    causes: dict[str, int] = defaultdict(int)
    for c in cs:
        if c["status"] in ("failure", "error"):
            causes[c["message"][:90]] += 1
    for message, n in sorted(causes.items(), key=lambda kv: -kv[1])[:6]:
        print(f"   {n} x {message}")


def baked(folder: Path) -> list[str]:
    """The rows the bake ran to a result (not stopped in flight, not left by its deadline)."""
    return sorted({c[P + "row"] for c in cases(folder) if c.get(P + "row") and c["status"] != "interrupted"
                   and not c["message"].startswith("the row's harness session ended")})  # fmt: skip


def pick(n: int, rows: list[str]) -> list[str]:
    """`n` of `rows`, taken a group (change and model: one shared process) after another, so the isolated rows cover
    as many of the shared run's processes as `n` allows."""
    groups: dict[str, list[str]] = {}
    for r in rows:
        parts = r.split(".")  # change.target.model.hash, the model's name may hold dots
        groups.setdefault(f"{parts[0]}/{'.'.join(parts[2:-1])}", []).append(r)
    chosen: list[str] = []
    while len(chosen) < n and any(groups.values()):
        for left in groups.values():
            if left and len(chosen) < n:
                chosen.append(left.pop(0))
    return chosen


# what makes two runs' messages differ without a different cause: times, sizes, addresses, paths of the run
_NOISE = re.compile(r"\d+(\.\d+)?\s*(ms|s|GiB|MiB)\b|0x[0-9a-f]+|/\S+")


def _said(outcome: tuple[str, str]) -> tuple[str, str]:
    return outcome[0], _NOISE.sub("", outcome[1])


def compare(run: Path, isolate: Path) -> None:
    """A line per row whose status or cause differs between the two runs, then the count that agree."""
    shared, alone = ({c[P + "row"]: (c["status"], c["message"][:200]) for c in cases(f) if c.get(P + "row")}
                     for f in (run, isolate))  # fmt: skip
    both = sorted(set(shared) & set(alone))
    differ = [r for r in both if _said(shared[r]) != _said(alone[r])]
    for r in differ:
        print(f"{r}: shared {shared[r][0]} ({shared[r][1][:100]}) / isolated {alone[r][0]} ({alone[r][1][:100]})")
    only = sorted(set(alone) - set(shared))
    for r in only:
        print(f"{r}: isolated {alone[r][0]}, no result in the shared run")
    print(f"{len(both) - len(differ)} of {len(both)} rows the same status and cause in both; {len(differ)} differ; "
          f"{len(only)} isolated rows without a shared result")  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1] == "--baked":
        print(",".join(baked(Path(sys.argv[2]))))
        sys.exit(0)
    if sys.argv[1] == "--pick":
        print(",".join(pick(int(sys.argv[2]), [r for r in sys.argv[3].split(",") if r])))
        sys.exit(0)
    if sys.argv[1] == "--compare":
        compare(Path(sys.argv[2]), Path(sys.argv[3]))
        sys.exit(0)
    args = sys.argv[1:]
    names = ("bake", "run")
    if args[0] == "--names":
        names, args = tuple(args[1].split(",")), args[2:]
    for name, folder, wall in zip(names, args[0::2], args[1::2], strict=False):
        summary(name, Path(folder), float(wall))
