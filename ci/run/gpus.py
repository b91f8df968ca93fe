"""The GPUs `ci run` gives rows: in a container only the GPUs its rows need (the harness inside gives each row
its own tp x dp of them, and skips a row needing more). Their environment, NVLink multicast off, is
`ci.engine.GPU_ENV`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import replace

from ci.errors import UsageError
from ci.run import smi
from ci.run.packing import Device
from ci.stack.model import Target


def nvidia_uuids(capability: str) -> list[str]:
    """UUIDs of this host's NVIDIA GPUs of that compute capability, narrowed to $CUDA_VISIBLE_DEVICES (by index or
    UUID, in its order) where it is set; [] without nvidia-smi."""
    out = smi.csv(["index", "uuid", "compute_cap"])
    return visible(out, os.environ.get("CUDA_VISIBLE_DEVICES"), capability) if out else []


def visible(smi_csv: str, cuda_visible_devices: str | None, capability: str) -> list[str]:
    # index, uuid, compute capability (and the memory, where it was asked for)
    gpus = [[p.strip() for p in line.split(",")][:3] for line in smi_csv.splitlines() if line.count(",") in (2, 3)]
    if cuda_visible_devices is not None:
        chosen: list[list[str]] = []
        for entry in (e.strip() for e in cuda_visible_devices.split(",")):
            match = [g for g in gpus if entry and (entry == g[0] or g[1].startswith(entry))]
            if not match or match[0] in chosen:
                break  # CUDA stops at the first entry that names no device
            chosen.append(match[0])
        gpus = chosen
    return [uuid for _, uuid, cap in gpus if cap == capability]


def container_gpus(target: Target, gpus_needed: Iterable[int], available: list[str]) -> tuple[str, ...]:
    """The GPUs a container of `target`'s rows gets: as many of `available` as its largest row needs (all of them
    where that is more than there are: the harness skips what cannot run); () means every GPU (no list known)."""
    if target.devices.gpus != "all" or not available:
        return ()
    return tuple(available[: max(max(gpus_needed, default=1), 1)])


def host_devices(target: Target, chosen: Sequence[str] = (), memory_gib: float | None = None) -> list[Device]:
    """The devices `ci run` schedules the target's rows on: this host's GPUs of the target (NVIDIA: by compute
    capability, narrowed to $CUDA_VISIBLE_DEVICES), or `chosen` (`--gpus 0,1`); each with its memory, or
    `memory_gib` for every one (`--gpu-memory`: a stand-in, or a limit). A GPU sharing the host's memory (GB10: no
    memory of its own to report) counts the host's. No GPU (the cpu target): one device, rows one at a time."""
    found = _nvidia(target.detect.nvidia_compute_capability) if target.detect.nvidia_compute_capability else []
    if chosen:
        known = {d.id: d for d in found}
        by_index = dict(enumerate(found))
        picked = []
        for c in chosen:
            d = known.get(c) or (by_index.get(int(c)) if c.isdigit() and found else None)
            if found and d is None:
                raise UsageError(
                    f"--gpus {','.join(chosen)}: no GPU {c!r} of {target.id} on this host",
                    hint=f"its GPUs: {', '.join(d.id for d in found)}",
                )
            picked.append(d or Device(id=c, memory_gib=None))
        found = picked
    if not found:
        found = [Device(id="", memory_gib=None)]  # this host's own, whatever it has
    if memory_gib is not None:
        found = [replace(d, memory_gib=memory_gib) for d in found]
    return found


def _nvidia(capability: str) -> list[Device]:
    """This host's NVIDIA GPUs of `capability` (by index, as $CUDA_VISIBLE_DEVICES narrows them) and their memory."""
    out = smi.csv(["index", "uuid", "compute_cap", "memory.total"], units=False)
    if not out:
        return []
    return devices_from(out, os.environ.get("CUDA_VISIBLE_DEVICES"), capability, _host_memory_gib())


def devices_from(smi_csv: str, cuda_visible_devices: str | None, capability: str, host_gib: float) -> list[Device]:
    rows = [[p.strip() for p in line.split(",")] for line in smi_csv.splitlines() if line.count(",") in (2, 3)]
    # MiB as nvidia-smi reports it; "[N/A]" on a GPU without memory of its own (GB10): the host's; none said: unknown
    memory = {
        r[1]: (float(r[3]) / 1024 if r[3].replace(".", "", 1).isdigit() else host_gib) if len(r) > 3 else None
        for r in rows
    }
    uuids = visible(smi_csv, cuda_visible_devices, capability)
    index = {r[1]: r[0] for r in rows}
    return [Device(id=index[u], memory_gib=memory[u]) for u in uuids]


def _host_memory_gib() -> float:
    try:
        with open("/proc/meminfo") as fh:
            kib = next(int(line.split()[1]) for line in fh if line.startswith("MemTotal:"))
        return kib / 2**20
    except (OSError, StopIteration, ValueError):
        return 0.0


def described(devices: Sequence[Device]) -> str:
    return ", ".join((d.id or "this host") + (f" ({d.memory_gib:.0f} GiB)" if d.memory_gib else "") for d in devices)
