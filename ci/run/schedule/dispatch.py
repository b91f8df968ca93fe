"""`ci run` over a host's devices: every job its own harness session, started as devices free up (`schedule`); the
suites of one `ci main` share one schedule, each writing to its own results folder.

Each row writes its own JUnit (`junit-<target>-<suite>-<shard>.<row hash>.xml`) beside the run's one rows.json,
so that a stop loses nothing finished, `--resume` skips every row with a result and runs again the one a stop
interrupted, and `--deadline` stops starting rows in time for every JUnit to be written. A session that ends
without its JUnit (the harness died) leaves one that says so: the row fails, it is never silently missing.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from lxml import etree

from ci.common import contract, files, signals
from ci.common.errors import NOTHING_RAN, StackgateError
from ci.common.tables import counted
from ci.run import guard, host
from ci.run.exit_status import NOT_RUN, record_not_run
from ci.run.finished import lost_case, outcome, recount, resume_from, row_outcomes  # noqa: F401 (outcome: named here too)
from ci.run.schedule import costs, estimate, tenancy
from ci.run.schedule.packing import Device, Job, Packing, jobs, measured_peaks, next_jobs
from ci.stack.model import Stack
from ci.stack.plan import Row

DEADLINE_EXIT = 9
UNREACHED = "not run"  # a row of a shared job that a stop ended before it began: --resume runs it


class DeadlineReached(StackgateError):
    exit_code = DEADLINE_EXIT


@dataclass
class Running:
    job: Job
    devices: tuple[str, ...]
    proc: subprocess.Popen[bytes]
    junit: Path
    started: float


def row_junit(out: Path, target: str, suite: str, shard: int, row_id: str) -> Path:
    return contract.ResultsDir(out, target, suite, shard).junit(row_id)


@dataclass(frozen=True, kw_only=True)
class Plan:
    """What the sessions need: how to start one row's session on some devices, and where its JUnit goes."""

    command: Callable[[Job, tuple[str, ...], Path], tuple[list[str], dict[str, str] | None, Path | None]]
    junit: Callable[[Job], Path]
    out: Path


def run(
    st: Stack,
    rows: Sequence,
    devices: Sequence[Device],
    plans: Mapping[str, Plan],
    *,
    resume: bool = False,
    deadline_s: float | None = None,
    share: bool = False,
    contents: Mapping[str, str] | None = None,
    alone: bool = False,
    phase: str = "run",
) -> int:
    """Run every row, as many at once as the devices hold; the exit status of `ci run`. `plans`: per suite, how its
    rows start and where their results go (several suites share the devices: one schedule for the host). `share`:
    the rows of a group run in one process each (`packing.jobs`), one JUnit per job. `contents`: each row's content
    digest in the rows.json just written, which a result must have been made with to count for `resume`. `alone`: each
    session has its GPUs to itself (timed runs); else which sessions shared a GPU is recorded in their JUnit. `phase`:
    what the jobs' measured costs are recorded as ("run", or "bake": ci.run.schedule.costs), which the next schedule
    reads for its packing order and its ETA."""
    start = time.monotonic()
    folders = sorted({p.out for p in plans.values()})
    for folder in folders:
        (folder / NOT_RUN).unlink(missing_ok=True)  # what an earlier run left unstarted is this run's to start
    peaks = measured_peaks(folders)  # read before this run's own files replace the last run's
    done: dict[str, str] = {}
    if not resume:  # an earlier run's results in this folder must not stand in for this run's
        for row in rows:
            plans[row.suite].junit(_alone(row)).unlink(missing_ok=True)
    else:
        done = resume_from(folders, rows, contents or {})
    known = estimate.measured_in(folders)
    seconds = (lambda together: known.job_seconds(phase, together)[0]) if known else None
    pending = jobs([r for r in rows if r.id not in done], st, share=share, peaks=peaks, seconds=seconds)
    projected = {id(j): seconds(j.rows) if seconds else None for j in pending}
    groups_total = len(pending)
    measured: dict[Path, list[costs.Measured]] = {}
    where = host.describe()
    raised = sorted(j.memory_gib for j in pending if j.memory_gib and j.planned_gib and j.memory_gib > j.planned_gib)
    if raised:
        print(
            f"memory budgets: {len(raised)} job(s) above their planned budget, up to {raised[-1]:.1f} GiB, from the "
            f"GPU memory their rows held when they last ran here (stackgate.gpu_peak_gib)",
            flush=True,
        )
    packing = Packing(devices, alone=alone)
    tenures: list[tenancy.Tenure] = []
    for job in list(pending):  # a row wider than the host: on every device, where the harness says it cannot run
        if not packing.fits_at_all(job):
            pending[pending.index(job)] = replace(job, gpus=len(devices), memory_gib=None)
    for job in pending:  # a job's file is named by its first row: a file an earlier run left there goes
        plans[job.row.suite].junit(job).unlink(missing_ok=True)
    total, finished, running, took = sum(len(j.rows) for j in pending), 0, [], []
    deadline = start + deadline_s if deadline_s is not None else None
    reserve = min(30.0, deadline_s / 4) if deadline_s is not None else 0.0
    cut = False
    with signals.forwarding(lambda sig: [signals.pass_on(r.proc, sig) for r in running]) as received:
        while pending or running:
            now = time.monotonic()
            if deadline is not None and now >= deadline - reserve and not cut:
                cut = True  # the rows in flight are stopped; each session writes its JUnit, the interrupted row too
                for r in running:
                    r.proc.terminate()
            if not received and not cut:
                guess = statistics.median(took) if took else 0.0
                if deadline is None or now + guess <= deadline - reserve:
                    for job, ids in next_jobs(pending, packing, {r.job.group for r in running}):
                        plan = plans[job.row.suite]
                        argv, env, cwd = plan.command(job, ids, plan.junit(job))
                        log = plan.out / "logs" / f"session-{job.row.id}.log"
                        with files.fresh(log) as fh:
                            proc = subprocess.Popen(
                                argv,
                                env=env,
                                cwd=cwd,
                                stdout=fh,
                                stderr=subprocess.STDOUT,
                                preexec_fn=signals.die_with_parent,
                            )
                        running.append(Running(job=job, devices=ids, proc=proc, junit=plan.junit(job), started=now))
                elif not running:
                    break  # no row can start and end in time, and none is in flight: waiting only holds the GPUs
            for r in [r for r in running if r.proc.poll() is not None]:
                running.remove(r)
                packing.release(r.job, r.devices)
                rows_of = tuple(row.id for row in r.job.rows)
                tenures.append(
                    tenancy.Tenure(
                        devices=r.devices, start=r.started, end=time.monotonic(), rows=rows_of, junit=r.junit
                    )
                )
                wall = time.monotonic() - r.started
                took += [wall / len(r.job.rows)] * len(r.job.rows)
                plan_out = plans[r.job.row.suite].out
                measured.setdefault(plan_out, []).extend(costs.measure_job(phase, r.job.rows, r.junit, wall, where))
                on = f" on GPU {','.join(r.devices)}" if any(r.devices) else ""
                for row_id, said in _settle(r, contents or {}, stopping=bool(received) or cut).items():
                    done[row_id] = said
                    finished += 1
                    left = total - finished
                    eta = _eta(statistics.median(took) * left / max(1, len(running)), pending, running, projected)
                    shared = f" (one process, {len(r.job.rows)} rows)" if len(r.job.rows) > 1 else ""
                    print(
                        f"[{total - left}/{total}] {said:<11} {row_id}  {wall:.0f} s{on}{shared}"
                        f" · {left} left, ETA {_minutes(eta) if left else 'done'}",
                        flush=True,
                    )
                if (share and len(r.job.rows) > 1) or phase == "bake":  # `eta`: as its last row's line says
                    jobs_left = len(pending) + len(running)
                    print(
                        f"  group {r.job.group} ({r.job.row.suite}): {_configs(r.job.rows)}, {len(r.job.rows)} rows in "
                        f"{wall:.0f} s{on} · {groups_total - jobs_left} of {groups_total} jobs done, "
                        f"ETA {_minutes(eta) if jobs_left else 'done'}",
                        flush=True,
                    )
            if (received or cut) and not running:
                break
            time.sleep(0.2)
    for folder, found in measured.items():
        costs.record(folder, found)
    if tenancy.record(tenures):
        print("GPU shared: the rows that ran beside another engine carry stackgate.gpu_shared_with", flush=True)
    if received:
        raise guard.Stopped(received[0], Path(os.path.commonpath(folders)))
    unreached = [row_id for row_id, said in done.items() if said == UNREACHED]
    for row_id in unreached:
        del done[row_id]
    left_over = [*unreached, *(r.id for j in pending for r in j.rows)]
    by_id = {r.id: r for r in rows}
    # without a deadline, only a signal from outside this run (to a row's own session) stops rows in flight
    why = (
        f"not started before ci run's --deadline ({deadline_s:g} s)"
        if deadline_s is not None
        else ("not started: the session it shared was stopped by a signal from outside this run")
    )
    for suite, plan in plans.items():
        mine = [i for i in left_over if by_id[i].suite == suite]
        if mine:
            record_not_run(plan.out, by_id[mine[0]].target, suite, mine, why, "run the same ci run with --resume")
    statuses = list(done.values())
    tally = ", ".join(f"{statuses.count(s)} {s}" for s in sorted(set(statuses)))
    print(f"{counted(len(statuses), 'row')}: {tally}", flush=True)
    if deadline_s is None and (unreached or "interrupted" in statuses):
        print(
            f"{counted(statuses.count('interrupted'), 'row')} stopped in flight and {len(unreached)} not started: "
            "their session was stopped by a signal from outside this run (--resume runs them again)",
            flush=True,
        )
        return 1
    if pending or unreached or "interrupted" in statuses:
        raise DeadlineReached(
            f"--deadline {deadline_s:g} s: {counted(sum(len(j.rows) for j in pending) + len(unreached), 'row')} not "
            "started, "
            f"{statuses.count('interrupted')} stopped in flight; the rest have their JUnit in "
            f"{', '.join(map(str, folders))}",
            hint="run the same command with --resume to go on",
        )
    if any(s in ("failure", "error", "missing") for s in statuses):
        return 1
    return NOTHING_RAN if statuses and all(s == "skipped" for s in statuses) else 0


def _settle(r: Running, contents: Mapping[str, str], *, stopping: bool = False) -> dict[str, str]:
    """Each row's outcome; a row the job's session ended without a result for (the harness died) gets a testcase
    saying so, added to the job's JUnit (written where there was none). `stopping`: the run was told to stop (a
    signal, the deadline): a row without a result never ran, and --resume runs it."""
    found = row_outcomes(r.junit)
    said = {row.id: found.get(row.id, "missing") for row in r.job.rows}
    lost = [row for row in r.job.rows if said[row.id] == "missing"]
    if not lost or stopping or "interrupted" in found.values():  # a stop cut the job: the rows after it never ran
        return {k: (UNREACHED if v == "missing" else v) for k, v in said.items()}
    code = r.proc.returncode
    message = (
        f"the row's harness session ended (exit {code}) without writing its JUnit: no result of this row "
        f"exists; its output: logs/session-{r.job.row.id}.log"
    )
    try:
        root = etree.parse(str(r.junit)).getroot()
        suite = next(root.iter("testsuite"))
    except (OSError, etree.XMLSyntaxError, StopIteration):
        root = etree.Element("testsuites")
        suite = etree.SubElement(root, "testsuite", name=r.junit.stem.removeprefix("junit-"), tests="0", errors="0")
        props = etree.SubElement(suite, "properties")
        etree.SubElement(props, "property", name="stackgate.target", value=r.job.row.target)
        etree.SubElement(props, "property", name="stackgate.suite", value=r.job.row.suite)
    for row in lost:
        tc = etree.SubElement(suite, "testcase", name=lost_case(row.id), classname="harness", time="0")
        tprops = etree.SubElement(tc, "properties")
        etree.SubElement(tprops, "property", name="stackgate.row", value=row.id)
        if contents.get(row.id):  # the row's own result, as a harness would have recorded it (--resume counts it)
            etree.SubElement(tprops, "property", name=contract.PREFIX + contract.ROW_CONTENT, value=contents[row.id])
        etree.SubElement(tc, "error", message=message)
    recount(suite)
    try:
        with files.staged(r.junit) as fh:
            etree.ElementTree(root).write(fh, encoding="utf-8", xml_declaration=True)
    except OSError as exc:  # a full disk: the row is counted as failed here, and said so, if it cannot be recorded
        why = exc.strerror or exc
        print(f"{r.junit}: cannot record {counted(len(lost), 'row')} without a result ({why})", flush=True)
    return said


def _eta(
    by_rows: float, pending: Sequence[Job], running: Sequence[Running], projected: Mapping[int, float | None]
) -> float:
    """The time left: from the measured costs of the jobs not yet done where every one of them has one (the work
    left over the jobs in flight, at least the longest of them), else from the rows' median so far (`by_rows`)."""
    left = [projected.get(id(j)) for j in [*pending, *(r.job for r in running)]]
    if any(s is None for s in left):  # no costs measured for this phase: every job has one, or none has
        return by_rows
    now = time.monotonic()
    flight = [max(0.0, (projected[id(r.job)] or 0.0) - (now - r.started)) for r in running]
    work = sum(projected[id(j)] or 0.0 for j in pending) + sum(flight)
    return max(work / max(1, len(running)), max(flight, default=0.0))


def _configs(rows: Sequence[Row]) -> str:
    n = len({costs.config(r) for r in rows})
    return counted(n, "engine configuration")


def _alone(row: Row) -> Job:
    return Job(rows=(row,), gpus=max(row.gpus, 1), memory_gib=None, group="")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"
