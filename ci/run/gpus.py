"""The GPUs `ci run` gives rows: in a container only the GPUs its rows need (the harness inside gives each row
its own tp x dp of them, and skips a row needing more). Their environment, NVLink multicast off, is
`ci.engine.GPU_ENV`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable

from ci.stack.model import Target


def nvidia_uuids(capability: str) -> list[str]:
    """UUIDs of this host's NVIDIA GPUs of that compute capability, narrowed to $CUDA_VISIBLE_DEVICES (by index or
    UUID, in its order) where it is set; [] without nvidia-smi."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid,compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return []
    return visible(out, os.environ.get("CUDA_VISIBLE_DEVICES"), capability)


def visible(smi_csv: str, cuda_visible_devices: str | None, capability: str) -> list[str]:
    gpus = [[p.strip() for p in line.split(",")] for line in smi_csv.splitlines() if line.count(",") == 2]
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
