"""Which row runs next, and on which GPUs: a host's rows packed onto its devices by memory budget.

A random-weight row holds a fixed KV budget (12 GiB, `suites/engine/config.py`) beside its small weights and CUDA
context, so several share one device; a row with hub weights takes whole devices. A row of N GPUs gets N devices
that fit it, and waits for them: rows behind it are not started on devices it is waiting for. Rows of one model and
change run one after another (they share warm JIT caches and never race on them), in plan order. A row that held
more than its budget when it last ran in the results folder (the harness records its process's peak) is budgeted
what it held, so the next run does not pack it where it cannot fit.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from lxml import etree

from ci.common import contract
from ci.stack import rows_json
from ci.stack.model import Stack
from ci.stack.plan import Row

# The KV budget of a random-weight row's engine unless its model sets one (models.yaml kv_cache_gib; the harness's
# engine.config.DUMMY_KV_CACHE_BYTES), and what its process holds beside it: weights of at most a few GiB, the CUDA
# context and its graphs. At the default a row is budgeted 18 GiB: seven fit on an H200's 139 GiB (as the shrunk
# campaign ran them), six on a GB10; a tiny model's row (2 GiB of KV) 8.
DUMMY_KV_GIB = 12.0
BESIDE_KV_GIB = 6.0
DUMMY_ROW_GIB = DUMMY_KV_GIB + BESIDE_KV_GIB
# A shared process keeps two engines (a row test's and its reference: suites/engine/in_process.py SHARED_ENGINES); the
# second adds its KV budget and little else (evidence/h200-engine-sharing: two tiny engines held 0.1 GiB beyond KV).
SHARED_JOB_GIB = DUMMY_ROW_GIB + DUMMY_KV_GIB
# Beyond the peak torch's allocator reports for a row (stackgate.gpu_peak_gib): the CUDA context and what is
# allocated outside torch. A measured row is budgeted its peak and this, never less than its planned budget: rows of
# sparse MLA held 27.7-31.4 GiB each (evidence/h200-52512), far over 18, and would not fit six to a GB10.
MEASURED_MARGIN_GIB = 2.0


def planned_gib(kv_gib: float, rows: int) -> float:
    """A random-weight job's budget before any measurement: one row's process, or a shared process of `rows` rows
    (two engines kept)."""
    return kv_gib + BESIDE_KV_GIB + (kv_gib if rows > 1 else 0.0)


@dataclass(frozen=True)
class Device:
    id: str  # what CUDA_VISIBLE_DEVICES / docker --gpus take: an index or a UUID
    memory_gib: float | None  # None: unknown, one row at a time


@dataclass(frozen=True)
class Job:
    rows: tuple[Row, ...]  # one row, or the rows of one group that share a process (its first is `row`)
    gpus: int
    memory_gib: float | None  # per device; None: the whole devices
    group: str  # model/change: its rows run one at a time
    planned_gib: float | None = None  # memory_gib before the rows' measured peaks raised it

    @property
    def row(self) -> Row:
        return self.rows[0]


GPU_PEAK = contract.PREFIX + "gpu_peak_gib"  # what the harness measures of a row's process (harness.child)


def measured_peaks(folders: Sequence[Path]) -> dict[str, float]:
    """Per row, the most GPU memory (GiB) its process held in the runs whose JUnit `folders` hold
    (`stackgate.gpu_peak_gib`): what the next run budgets it, where that is more than the default."""
    found: dict[str, float] = {}
    for folder in folders:
        for junit in sorted(folder.glob("junit-*.xml")):
            try:
                root = etree.parse(str(junit)).getroot()
            except (OSError, etree.XMLSyntaxError):
                continue
            for tc in root.iter("testcase"):
                props = {p.get("name"): p.get("value") for p in tc.iter("property")}
                row, peak = props.get(contract.PREFIX + "row"), props.get(GPU_PEAK)
                try:
                    gib = float(peak or "nan")
                except ValueError:
                    continue
                if row and math.isfinite(gib):
                    found[row] = max(found.get(row, gib), gib)
    return found


def jobs(
    rows: Sequence[Row],
    st: Stack,
    *,
    share: bool = False,
    peaks: Mapping[str, float] | None = None,
    seconds: Callable[[Sequence[Row]], float | None] | None = None,
) -> list[Job]:
    """The rows as jobs: the widest first (they would wait longest behind narrow ones), then the longest by measured
    cost (`seconds`: a job's projected seconds, from ci.run.schedule.costs; the longest first packs tightest), then the
    rows of the largest groups (a group's rows run one after another: the longest chains start first), else in plan
    order. `share`: the random-weight rows of one GPU of a group are one job, one process (harness.shared), holding two
    engines. `peaks`: GiB a row's process held when it last ran (`measured_peaks`), which raises its budget."""
    peaks = peaks or {}

    def budget(planned: float, together: Sequence[Row], extra: float = 0.0) -> float:
        seen = [peaks[r.id] for r in together if r.id in peaks]
        return max(planned, max(seen) + MEASURED_MARGIN_GIB + extra) if seen else planned

    out: list[Job] = []
    shared: dict[tuple[str, str], list[Row]] = {}  # by group and suite: one process runs one suite's rows
    for row in rows:
        model = st.models.get(row.model)
        dummy = model is not None and model.weights == "dummy"
        group = f"{row.model}/{row.change}"
        if share and dummy and max(row.gpus, 1) == 1:
            shared.setdefault((group, row.suite), []).append(row)
            continue
        planned = planned_gib(model.kv_cache_gib, 1) if model is not None and dummy else None
        memory = budget(planned, [row]) if planned is not None else None
        out.append(Job(rows=(row,), gpus=max(row.gpus, 1), memory_gib=memory, group=group, planned_gib=planned))
    for (group, _suite), together in shared.items():
        kv = st.models[together[0].model].kv_cache_gib
        planned = planned_gib(kv, len(together))
        # a peak measured in a process of its own held one engine at a time: the kept second engine adds its KV
        memory = budget(planned, together, kv if len(together) > 1 else 0.0)
        out.append(Job(rows=tuple(together), gpus=1, memory_gib=memory, group=group, planned_gib=planned))
    order = {r.id: n for n, r in enumerate(rows)}
    size = Counter(j.group for j in out for _ in j.rows)
    # a shared job builds an engine per configuration and runs each further row in seconds: its length is its engines
    engines = Counter(g for g, _ in {(j.group, engine(r)) for j in out for r in j.rows}) if share else Counter()
    cost = {id(j): (seconds(j.rows) or 0.0) if seconds is not None else 0.0 for j in out}
    return sorted(out, key=lambda j: (-j.gpus, -cost[id(j)], -engines[j.group], -size[j.group], order[j.row.id]))


def engine(row: Row) -> tuple[object, ...]:
    """What a row's engine is built from: every axis but the workload (the host side of harness Row.engine)."""
    return rows_json.engine(row)


class Packing:
    """The devices' free memory and their rows, as jobs start and end."""

    def __init__(self, devices: Sequence[Device], *, alone: bool = False) -> None:
        self.devices = list(devices)
        self.alone = alone  # one session per device: what a timing comparison's runs take
        self.used: dict[str, float] = {d.id: 0.0 for d in devices}
        self.rows: dict[str, int] = {d.id: 0 for d in devices}
        self.whole: set[str] = set()  # devices a hub-weight row holds

    def fits_at_all(self, job: Job) -> bool:
        return job.gpus <= len(self.devices) and all(
            job.memory_gib is None or d.memory_gib is None or job.memory_gib <= d.memory_gib
            for d in self.devices[: job.gpus]
        )

    def place(self, job: Job) -> tuple[str, ...] | None:
        """The devices `job` starts on now (reserved), or None where not enough are free."""
        free = [d for d in self.devices if self._takes(d, job)]
        if len(free) < job.gpus:
            return None
        # the emptiest first: rows spread over the devices before they share one
        chosen = sorted(free, key=lambda d: (self.rows[d.id], self.used[d.id]))[: job.gpus]
        for d in chosen:
            self.rows[d.id] += 1
            if job.memory_gib is None:
                self.whole.add(d.id)
            else:
                self.used[d.id] += job.memory_gib
        return tuple(d.id for d in chosen)

    def release(self, job: Job, ids: Sequence[str]) -> None:
        for i in ids:
            self.rows[i] -= 1
            if job.memory_gib is None:
                self.whole.discard(i)
            else:
                self.used[i] -= job.memory_gib

    def _takes(self, d: Device, job: Job) -> bool:
        if d.id in self.whole or (self.alone and self.rows[d.id]):
            return False
        if job.memory_gib is None or d.memory_gib is None:
            return self.rows[d.id] == 0
        return self.used[d.id] + job.memory_gib <= d.memory_gib


def next_jobs(pending: list[Job], packing: Packing, busy_groups: set[str]) -> list[tuple[Job, tuple[str, ...]]]:
    """The jobs to start now, in order, each with its devices (taken out of `pending`). A job whose group is busy
    waits its turn; a job of several GPUs that cannot be placed stops the round, so that the devices it waits for
    free up instead of filling with narrower rows."""
    started = []
    groups = set(busy_groups)
    for job in list(pending):
        if job.group in groups:
            continue
        ids = packing.place(job)
        if ids is None:
            if job.gpus > 1:
                break
            continue
        pending.remove(job)
        groups.add(job.group)
        started.append((job, ids))
    return started
