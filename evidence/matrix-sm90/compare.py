"""Each row's status and cause in the isolated run against the shared run of the same rows from the same artefact
(identical expected): a line per row that differs, then the count that agree.

    python3 evidence/matrix-sm90/compare.py RUN_RESULTS ISOLATE_RESULTS
    python3 evidence/matrix-sm90/compare.py --pick N ROW,ROW,...   (N rows, one group after another)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from lxml import etree

# what makes two runs' messages differ without a different cause: times, sizes, addresses, paths of the run
_NOISE = re.compile(r"\d+(\.\d+)?\s*(ms|s|GiB|MiB)\b|0x[0-9a-f]+|/\S+")


def outcomes(folder: Path) -> dict[str, tuple[str, str]]:
    """row id -> (status, cause), from every JUnit under `folder`."""
    found: dict[str, tuple[str, str]] = {}
    for junit in sorted(folder.rglob("junit-*.xml")):
        for tc in etree.parse(str(junit)).getroot().iter("testcase"):
            row = next((p.get("value") for p in tc.iter("property") if p.get("name") == "stackgate.row"), None)
            if not row:
                continue
            bad = next((c for c in tc if c.tag in ("error", "failure", "skipped")), None)
            status = "pass" if bad is None else bad.tag
            found[row] = (status, (bad.get("message") or "")[:200] if bad is not None else "")
    return found


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


def _said(outcome: tuple[str, str]) -> tuple[str, str]:
    return outcome[0], _NOISE.sub("", outcome[1])


def main(run: Path, isolate: Path) -> int:
    shared, alone = outcomes(run), outcomes(isolate)
    both = sorted(set(shared) & set(alone))
    differ = [r for r in both if _said(shared[r]) != _said(alone[r])]
    for r in differ:
        print(f"{r}: shared {shared[r][0]} ({shared[r][1][:100]}) / isolated {alone[r][0]} ({alone[r][1][:100]})")
    only = sorted(set(alone) - set(shared))
    for r in only:
        print(f"{r}: isolated {alone[r][0]}, no result in the shared run")
    print(f"{len(both) - len(differ)} of {len(both)} rows the same status and cause in both; {len(differ)} differ; "
          f"{len(only)} isolated rows without a shared result")  # fmt: skip
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "--pick":
        print(",".join(pick(int(sys.argv[2]), [r for r in sys.argv[3].split(",") if r])))
        sys.exit(0)
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
