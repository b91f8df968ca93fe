"""Builds of a history (ci.history.record) made to order: n days after T0, of `rows` rows of one change, for the
history's tests and the pull's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ci.history.record import Build, Judged, Run

T0 = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)


def build(n: int, *, rows: int = 3, status: str = "pass", commit: str = "aaaaaaa1", branch: str = "main") -> Build:
    runs = tuple(
        Run(
            row=f"48407.cuda-sm90.m{i}.0000000{i % 10}",
            change="48407",
            target="cuda-sm90",
            status=status,
            image="sha256:" + "1" * 64,
            commit=commit,
            metrics=(("warm_request_ms", 40.0 + n + i, "ms"), ("engine_ready_s", 90.0 + n, "s")),
        )
        for i in range(rows)
    )
    verdicts = (Judged(change="48407", target="cuda-sm90", criterion="matrix", status="pass"),)
    return Build(key=f"results:{n}", at=T0 + timedelta(days=n), branch=branch, commit=commit, stack="sha256:s",
                 images=(("cuda-sm90", "sha256:" + "1" * 64),), runs=runs, verdicts=verdicts)  # fmt: skip
