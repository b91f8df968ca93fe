"""What one run of a target's suite is: its rows, where its results go, how long an item may take, what its JIT caches
start from, and how its rows are scheduled over the host's devices (None: one session, one after another)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ci.common import contract
from ci.stack import plan
from ci.stack.model import Target


@dataclass(frozen=True, kw_only=True)
class RunSpec:
    target: Target
    suite: str
    rows: tuple[plan.Row, ...]
    out: Path
    suites_dir: Path | None  # None: the image's suites (docker) or this checkout's (host)
    timeout_s: float
    shard: int = 0
    caches: Path | None = None  # a bake artefact to install first (--host only)
    unbaked: bool = False  # --host only: no AOT bake, the rows start from empty JIT caches
    keep_caches: bool = False  # with unbaked: what earlier unbaked runs here compiled is reused ("as found")
    schedule: Schedule | None = None  # None: one harness session runs every row, one after another

    @property
    def junit(self) -> Path:
        return contract.ResultsDir(self.out, self.target.id, self.suite, self.shard).junit()

    @property
    def rows_json(self) -> Path:
        return self.out / "rows.json"


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """`ci run` over the host's devices (ci.run.schedule.dispatch): each row its own session, packed by memory."""

    gpus: tuple[str, ...] = ()  # --gpus: these devices (default every GPU of the target on this host)
    gpu_memory_gib: float | None = None  # --gpu-memory: each device's, in place of what it reports
    resume: bool = False
    deadline_s: float | None = None
    isolate: bool = False  # --isolate: every row a process of its own (the control of shared processes)
    alone: bool = False  # --alone: each process has its GPUs to itself (timed runs: ci.run.schedule.tenancy)
