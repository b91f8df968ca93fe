"""What a person watching the run sees: one line per finished item, and a summary table at the end."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from harness.junit_file import Case

_WORD = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP", "error": "ERROR"}


class Progress:
    def __init__(self, total: int, write: Callable[[str], None]) -> None:
        self.total = total
        self.done = 0
        self.start = time.monotonic()
        self._write = write

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def starting(self, nodeid: str) -> None:
        self._write(f"[{self.done + 1}/{self.total} {self.elapsed():6.1f}s] {nodeid} ...")

    def finished(self, case: Case) -> None:
        self.done += 1
        o = case.outcome
        reason = f": {o.message}" if o.message and o.status != "passed" else ""
        self._write(
            f"[{self.done}/{self.total} {self.elapsed():6.1f}s] {_WORD[o.status]:5} {case.nodeid} "
            f"({o.duration_s:.2f} s){reason}"
        )


def summary(cases: list[Case], elapsed_s: float, junit_path: str) -> str:
    counts = Counter(c.outcome.status for c in cases)
    rows = [(c.nodeid, _WORD[c.outcome.status], f"{c.outcome.duration_s:.2f}", c.outcome.message) for c in cases]
    headers = ("test", "status", "s", "reason")
    widths = [max(len(h), *(len(str(r[i])) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    widths[-1] = len(headers[-1])  # the reason column is last and left ragged
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()  # noqa: E731
    out = [line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    totals = ", ".join(f"{counts[s]} {s}" for s in ("passed", "failed", "error", "skipped"))
    out.append(f"{len(cases)} items in {elapsed_s:.1f} s: {totals}; JUnit: {junit_path}")
    return "\n".join(out)
