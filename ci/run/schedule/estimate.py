"""Measured costs looked up per configuration (`Costs`: what the scheduler orders its jobs and gives its ETA by), and
`ci plan --estimate`: how long a target's matrix would take on N GPUs of a given memory, projected from the last
measured costs (ci.run.schedule.costs), by the scheduler's own packing: the jobs it would make, started in its order as
its budgets allow, each lasting what its configurations were measured to take. A projection, never a measurement: it
says how many of its configurations were measured on that target, taken from another target's same configuration, or
filled by a median."""

from __future__ import annotations

import heapq
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ci.common.errors import UsageError
from ci.common.escape import one_line
from ci.common.tables import counted
from ci.run.schedule.costs import Measured, config, load, store
from ci.run.schedule.packing import Device, Packing, jobs, next_jobs
from ci.stack.model import Stack
from ci.stack.plan import Row


class Costs:
    """Measurements looked up by configuration: for a phase, the newest of the same target, else of another target
    (the same configuration), else the median of the same model and suite, else of the phase."""

    def __init__(self, measured: Sequence[Measured]) -> None:
        self.measured = sorted(measured, key=lambda m: m.when)
        self._jobs: dict[tuple[str, tuple[str, ...]], tuple[float | None, list[str]]] = {}  # job_seconds, once a job
        self._exact: dict[tuple[str, str, str], Measured] = {}
        self._any: dict[tuple[str, str], Measured] = {}
        for m in self.measured:
            self._exact[(m.phase, m.target, m.config)] = m
            self._any[(m.phase, m.config)] = m

    def __bool__(self) -> bool:
        return bool(self.measured)

    def lookup(self, phase: str, row: Row) -> tuple[Measured | None, str]:
        """The measurement of `row`'s configuration, and where it was found: "measured" (on its target), "other
        target", or None and "none" (`job_seconds` then fills it by a median)."""
        key = config(row)
        if (m := self._exact.get((phase, row.target, key))) is not None:
            return m, "measured"
        if (m := self._any.get((phase, key))) is not None:
            return m, "other target"
        return None, "none"

    def _fallback(self, phase: str, row: Row) -> tuple[tuple[float, float, float] | None, str]:
        for how, pick in (
            ("model median", lambda m: m.model == row.model and m.suite == row.suite),
            ("phase median", lambda m: True),
        ):
            chosen = [m for m in self.measured if m.phase == phase and pick(m)]
            if chosen:
                return (
                    statistics.median(m.first_s for m in chosen),
                    statistics.median(m.further for m in chosen),
                    statistics.median(m.process_s / m.configs_in_process for m in chosen),
                ), how
        return None, "none"

    def job_seconds(self, phase: str, rows: Sequence[Row]) -> tuple[float | None, list[str]]:
        """A job's projected seconds (None where nothing at all was measured) and, per configuration, how its cost
        was found. Its process's own seconds count once, as the largest of its configurations' shares measured."""
        memo = (phase, tuple(r.id for r in rows))
        if memo not in self._jobs:
            self._jobs[memo] = self._job_seconds(phase, rows)
        return self._jobs[memo]

    def _job_seconds(self, phase: str, rows: Sequence[Row]) -> tuple[float | None, list[str]]:
        total, hows, beside = 0.0, [], 0.0
        counts: dict[str, list[Row]] = {}
        for r in rows:
            counts.setdefault(config(r), []).append(r)
        for together in counts.values():
            m, how = self.lookup(phase, together[0])
            if m is not None:
                first, further, process = m.first_s, m.further, m.process_s
            else:
                found, how = self._fallback(phase, together[0])
                if found is None:
                    return None, ["none"]
                first, further, process = found
            total += first + further * (len(together) - 1)
            beside = max(beside, process)
            hows.append(how)
        return total + beside, hows


def measured_in(folders: Sequence[Path]) -> Costs:
    """The host's store and the costs files in `folders` (a run's own earlier measurements), the newest winning."""
    try:
        return Costs(load([store(), *folders]))
    except UsageError as exc:
        print(f"costs: {exc.message}; the schedule goes by plan order alone", flush=True)
        return Costs([])


@dataclass(frozen=True, kw_only=True)
class Projection:
    phase: str
    rows: int
    jobs: int
    wall_s: float
    devices: int
    found: Counter[str]  # per configuration: how its cost was found (measured, other target, model median, ...)
    unplaceable: tuple[Row, ...]  # rows wider than the devices given
    hub_unmeasured: tuple[Row, ...]  # rows with hub weights whose configuration was never measured

    @property
    def gpu_s_per_row(self) -> float:
        placed = self.rows - len(self.unplaceable) - len(self.hub_unmeasured)
        return self.wall_s * self.devices / placed if placed else 0.0


def devices(count: int, memory_gib: float) -> list[Device]:
    """`count` GPUs of `memory_gib` each, as the scheduler packs them."""
    return [Device(str(n), memory_gib) for n in range(count)]


def project(st: Stack, rows: Sequence[Row], devices: Sequence[Device], known: Costs, phase: str) -> Projection:
    """The wall time of `rows` on `devices` as the scheduler packs them (shared processes), each job lasting its
    projected seconds."""
    seconds = {}

    def cost(together: Sequence[Row]) -> float:
        got, _ = known.job_seconds(phase, together)
        if got is None:
            raise UsageError(
                f"no {phase} costs measured: nothing to project from",
                hint="run the target's rows once with ci run --host (or ci bake --host) on a GPU host; "
                "or pass --costs FILE (a costs.json a scheduled run wrote)",
            )
        return got

    def hub(r: Row) -> bool:  # a download and a whole GPU: a random-weight row's median says nothing of it
        model = st.models.get(r.model)
        return model is not None and model.weights != "dummy" and known.lookup(phase, r)[0] is None

    hub_unmeasured = tuple(r for r in rows if hub(r))
    left_out = {r.id for r in hub_unmeasured}
    pending = jobs([r for r in rows if r.id not in left_out], st, share=True, seconds=cost)
    packing = Packing(devices)
    unplaceable = [j for j in pending if not packing.fits_at_all(j)]
    pending = [j for j in pending if packing.fits_at_all(j)]
    found: Counter[str] = Counter()
    for j in pending:
        seconds[id(j)] = cost(j.rows)
        found.update(known.job_seconds(phase, j.rows)[1])
    count = len(pending)
    now, running, order = 0.0, [], 0  # running: (end, n, job, devices)
    while pending or running:
        for job, ids in next_jobs(pending, packing, {j.group for _, _, j, _ in running}):
            order += 1
            heapq.heappush(running, (now + seconds[id(job)], order, job, ids))
        if not running:
            break  # nothing fits and nothing runs: the rest cannot start here (never, by fits_at_all)
        now, _, job, ids = heapq.heappop(running)
        packing.release(job, ids)
    return Projection(
        phase=phase,
        rows=len(rows),
        jobs=count,
        wall_s=now,
        devices=len(devices),
        found=found,
        unplaceable=tuple(r for j in unplaceable for r in j.rows),
        hub_unmeasured=hub_unmeasured,
    )


def describe(p: Projection, memory_gib: float, hosts: Sequence[str]) -> list[str]:
    """The projection in a few lines, saying what it is made of."""
    how = ", ".join(f"{n} {k}" for k, n in sorted(p.found.items(), key=lambda kv: -kv[1]))
    where = "; ".join(sorted({one_line(h) for h in hosts})) or "unknown hosts"  # a costs file's own words
    lines = [
        f"{p.phase}: {clock(p.wall_s)} wall projected on {counted(p.devices, 'GPU')} of {memory_gib:g} GiB for "
        f"{counted(p.rows - len(p.unplaceable) - len(p.hub_unmeasured), 'row')} in "
        f"{counted(p.jobs, 'process', 'processes')} "
        f"({p.gpu_s_per_row:.1f} GPU-seconds a row)",
        f"  engine configurations' costs: {how} (measured on {where})",
    ]
    if p.hub_unmeasured:
        lines.append(
            f"  {counted(len(p.hub_unmeasured), 'row')} with hub weights: no cost of theirs measured, not in the "
            "projection"
        )
    if p.unplaceable:
        need = f"{counted(len(p.unplaceable), 'row')} {'needs' if len(p.unplaceable) == 1 else 'need'}"
        lines.append(f"  {need} more GPUs than {p.devices}: not in the projection")
    return lines


def clock(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min" if h else f"{m} min {s:02d} s"
