"""Is this row's hardware here? A GPU row on a machine without that GPU is skipped with the reason.

Detection asks the driver's tools and sysfs, never imports torch: it runs once per parent process
before any row starts, and importing torch there would cost seconds and touch the GPU.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_KFD_NODES = Path("/sys/class/kfd/kfd/topology/nodes")


@functools.cache
def nvidia_capabilities() -> tuple[str, ...]:
    """Compute capability of each visible NVIDIA GPU ("9.0", "12.1"), one entry per GPU."""
    if not shutil.which("nvidia-smi"):
        return ()
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(line.strip() for line in out.splitlines() if line.strip())


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
    if not have:
        return f"hardware absent: {tid} needs an {what}; found {found}"
    if len(have) < gpus_needed:
        return f"hardware absent: row needs {gpus_needed} GPUs ({what}); {len(have)} present"
    return None
