"""The conditions a timed request runs under, kept the same in every run so that runs of one build agree.

On a one-GPU host a tiny row's warm latencies are set by the host's CPU more than by its GPU: one process of a build
runs "fast" and the next "slow" (evidence/h100-timing-46849: warm ITL 3.5-5.2 ms over five runs of one build, each
run's own samples within a few percent). What a process can hold steady without touching the accelerator's settings:

- `pin`: every thread of this process on the same CPUs in every run (`$STACKGATE_TIMING_CPUS`, a list such as
  `4-7` or `4,5,6,7`), and torch's CPU threads as many as those CPUs, once the engine is ready (its start, which
  compiles on every core, is left alone). Unset: nothing is pinned, as before.
- `settle`: the garbage the last request left is collected before the next timed one starts, never inside it.

What was pinned is recorded on the row (`timing_cpus`), so a report can tell runs made under other conditions.
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

ENV_CPUS = "STACKGATE_TIMING_CPUS"
_pinned: tuple[int, ...] = ()


class BadCpuList(ValueError):
    """$STACKGATE_TIMING_CPUS cannot be used on this host."""


def parse_cpus(text: str, allowed: set[int]) -> tuple[int, ...]:
    """`text` (`4-7`, `4,5,6,7`, `2,4-5`) as sorted CPU numbers, each one this process may run on."""
    cpus: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise BadCpuList(f"${ENV_CPUS}={text!r}: {part!r} is not a CPU number or a range such as 4-7")
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first:
            raise BadCpuList(f"${ENV_CPUS}={text!r}: the range {part!r} runs backwards")
        cpus.update(range(first, last + 1))
    outside = sorted(cpus - allowed)
    if outside:
        raise BadCpuList(
            f"${ENV_CPUS}={text!r}: CPU {', '.join(map(str, outside))} is not one this process may run on "
            f"(it may run on {_ranges(sorted(allowed))}); name CPUs from that list"
        )
    return tuple(sorted(cpus))


def pin() -> tuple[int, ...]:
    """Every thread of this process onto `$STACKGATE_TIMING_CPUS`, once per process; () where it is unset."""
    global _pinned
    text = os.environ.get(ENV_CPUS, "").strip()
    if not text or _pinned:
        return _pinned
    cpus = parse_cpus(text, set(os.sched_getaffinity(0)))
    for task in Path("/proc/self/task").iterdir():  # sched_setaffinity(0) would move only the calling thread
        try:
            os.sched_setaffinity(int(task.name), cpus)
        except (ProcessLookupError, ValueError):  # a thread that ended meanwhile
            continue
    os.sched_setaffinity(0, cpus)
    try:
        import torch

        torch.set_num_threads(len(cpus))
    except ImportError:
        pass
    _pinned = cpus
    return cpus


def pinned() -> str:
    """The CPUs this process's threads were pinned to, as `4-7`; "" where none were."""
    return _ranges(list(_pinned)) if _pinned else ""


def settle() -> None:
    """Before a timed request: collect what the last one left, so no collection lands inside this one."""
    gc.collect()


def _ranges(cpus: list[int]) -> str:
    out: list[str] = []
    for c in cpus:
        if out and out[-1].split("-")[-1] == str(c - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{c}"
        else:
            out.append(str(c))
    return ",".join(out)
