"""Is this row's hardware here, and which GPUs does it get? A GPU row on a machine without that GPU, or with
fewer of them than the row's tp x dp, is skipped with the reason ("needs N GPUs").

Detection asks the driver's tools and sysfs, never imports torch: it runs once per parent process
before any row starts, and importing torch there would cost seconds and touch the GPU.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_KFD_NODES = Path("/sys/class/kfd/kfd/topology/nodes")


# NVLink multicast off in every row (and so in every process a row starts): multicast objects can leave a
# shared host's GPUs unusable for everyone. `ci run` and `ci bake` pass the same switches (ci/engine.py, GPU_ENV).
NO_MULTICAST = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
    "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm",  # vLLM's default, mnnvl, allocates NVSwitch multicast memory
}


@dataclass(frozen=True)
class Gpu:
    index: str
    uuid: str
    capability: str
    name: str = ""  # the card's model as the driver names it ("NVIDIA H100 80GB HBM3")
    memory: str = ""  # its memory as nvidia-smi gives it ("81559 MiB")
    driver: str = ""

    def card(self) -> str:
        """The card in words, as a result names it: a target's label is not the card that ran."""
        detail = ", ".join(x for x in (self.memory, f"driver {self.driver}" if self.driver else "") if x)
        name = self.name or f"NVIDIA GPU of compute capability {self.capability}"
        return f"{name} ({detail})" if detail else name


_QUERY = "index,uuid,compute_cap,name,memory.total,driver_version"  # the fields of `Gpu`, in its order


@functools.cache
def nvidia_gpus() -> tuple[Gpu, ...]:
    """The NVIDIA GPUs this process may use: nvidia-smi's list (which ignores $CUDA_VISIBLE_DEVICES) narrowed to
    the ones $CUDA_VISIBLE_DEVICES names, by index or UUID, in its order."""
    if not shutil.which("nvidia-smi"):
        return ()
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={_QUERY}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    return visible(parse_gpus(out), os.environ.get("CUDA_VISIBLE_DEVICES"))


def parse_gpus(text: str) -> tuple[Gpu, ...]:
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) in (3, 6) and parts[0].isdigit():
            gpus.append(Gpu(*parts))
    return tuple(gpus)


def visible(gpus: tuple[Gpu, ...], cuda_visible_devices: str | None) -> tuple[Gpu, ...]:
    """CUDA's rule: the listed devices in the listed order, up to the first entry that names none."""
    if cuda_visible_devices is None:
        return gpus
    out = []
    for entry in (e.strip() for e in cuda_visible_devices.split(",")):
        match = [g for g in gpus if entry and (g.index == entry or g.uuid == entry or g.uuid.startswith(entry))]
        if not match or match[0] in out:
            break
        out.append(match[0])
    return tuple(out)


def nvidia_capabilities() -> tuple[str, ...]:
    """Compute capability of each usable NVIDIA GPU ("9.0", "12.1"), one entry per GPU."""
    return tuple(g.capability for g in nvidia_gpus())


def assign(target: Mapping[str, Any], gpus_needed: int) -> dict[str, str]:
    """The environment that gives one row its GPUs: the first `gpus_needed` (at least one) of this target's GPUs
    here, by nvidia-smi index in $CUDA_VISIBLE_DEVICES (vLLM reads an index there as NVML's, as nvidia-smi
    numbers them); rows run one at a time, so each takes the same first ones. Nothing for a target other than
    NVIDIA's (the cpu self-test, ROCm's single-GPU boxes)."""
    if target.get("family") != "cuda":
        return {}
    want = target.get("nvidia_compute_capability")
    mine = [g.index for g in nvidia_gpus() if g.capability == want][: max(gpus_needed, 1)]
    return {"CUDA_VISIBLE_DEVICES": ",".join(mine)} if mine else {}


def cards(target: Mapping[str, Any], gpus_needed: int) -> str:
    """The cards a row of this target runs on here, in words ("" for the cpu target): the same GPUs `assign`
    gives it, by model, memory and driver; for AMD, the gfx name (the KFD topology names no model)."""
    if target.get("family") == "cuda":
        want = target.get("nvidia_compute_capability")
        mine = [g for g in nvidia_gpus() if g.capability == want][: max(gpus_needed, 1)]
        names = [g.card() for g in mine]
        return " + ".join(f"{names.count(n)} x {n}" if names.count(n) > 1 else n for n in dict.fromkeys(names))
    if target.get("family") == "rocm":
        want = target.get("amdgpu_gfx")
        return f"AMD GPU {want}" if want in amdgpu_gfx() else ""
    return ""


@functools.cache
def amdgpu_gfx() -> tuple[str, ...]:
    """gfx name of each AMD GPU from the KFD topology (gfx_target_version 110501 -> gfx1151)."""
    names = []
    for props in sorted(_KFD_NODES.glob("*/properties")):
        try:
            lines = props.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            key, _, value = line.partition(" ")
            if key == "gfx_target_version" and value.strip().isdigit() and int(value) > 0:
                v = int(value)
                names.append(f"gfx{v // 10000}{(v // 100) % 100:x}{v % 100:x}")
    return tuple(names)


def absent_reason(target: Mapping[str, Any], gpus_needed: int) -> str | None:
    """Why this target's rows cannot run here, or None when they can."""
    family, tid = target.get("family"), target.get("id", "?")
    if family == "cpu":
        return None
    if family == "cuda":
        want = target.get("nvidia_compute_capability")
        have = [c for c in nvidia_capabilities() if c == want]
        what = f"NVIDIA GPU with compute capability {want}"
        found = ", ".join(nvidia_capabilities()) or "none"
    elif family == "rocm":
        want = target.get("amdgpu_gfx")
        have = [g for g in amdgpu_gfx() if g == want]
        what = f"AMD GPU {want}"
        found = ", ".join(amdgpu_gfx()) or "none"
    else:
        return f"unknown target family {family!r}"
    if not have and gpus_needed > 1:
        return f"hardware absent: row needs {gpus_needed} GPUs ({what}); found {found}"
    if not have:
        return f"hardware absent: {tid} needs an {what}; found {found}"
    if len(have) < gpus_needed:
        return f"hardware absent: row needs {gpus_needed} GPUs ({what}); {len(have)} present"
    return None
