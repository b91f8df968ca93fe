"""Which target the local host is: the embedded default for the main job."""

from __future__ import annotations

import os
from pathlib import Path

from ci.errors import UsageError
from ci.run import smi
from ci.stack.model import Stack, Target

ENV_OVERRIDE = "STACKGATE_TARGET"
_KFD_NODES = Path("/sys/class/kfd/kfd/topology/nodes")


def nvidia_compute_capabilities() -> set[str]:
    return {r[0] for r in smi.rows(["compute_cap"]) if r and r[0]}


def amdgpu_gfx_names() -> set[str]:
    """gfx names from the KFD topology (gfx_target_version 110501 -> gfx1151); no ROCm tools needed."""
    names = set()
    for props in _KFD_NODES.glob("*/properties"):
        try:
            text = props.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "gfx_target_version" and value.strip().isdigit() and int(value) > 0:
                v = int(value)
                major, minor, step = v // 10000, (v // 100) % 100, v % 100
                names.add(f"gfx{major}{minor:x}{step:x}")
    return names


def detect(stack: Stack) -> Target:
    """The target named by $STACKGATE_TARGET, else the first whose accelerator is present, else the fallback."""
    wanted = os.environ.get(ENV_OVERRIDE)
    if wanted:
        if wanted not in stack.targets:
            raise UsageError(f"${ENV_OVERRIDE}={wanted} is not a target", hint=f"one of {', '.join(stack.targets)}")
        return stack.targets[wanted]
    caps, gfx = nvidia_compute_capabilities(), amdgpu_gfx_names()
    for target in stack.targets.values():
        if target.detect.nvidia_compute_capability in caps or target.detect.amdgpu_gfx in gfx:
            return target
    return next(t for t in stack.targets.values() if t.detect.fallback)


def present(target: Target) -> bool:
    """Whether this host has the target's accelerator (the fallback target, the CPU, is always present)."""
    d = target.detect
    return d.fallback or has(d.nvidia_compute_capability, d.amdgpu_gfx)


def has(nvidia_compute_capability: str | None, amdgpu_gfx: str | None) -> bool:
    """Whether this host has that accelerator (neither named: a CPU target, always here)."""
    if nvidia_compute_capability is None and amdgpu_gfx is None:
        return True
    return nvidia_compute_capability in nvidia_compute_capabilities() or amdgpu_gfx in amdgpu_gfx_names()


def describe() -> str:
    """The accelerators this host has, in a few words, for messages."""
    found = [f"NVIDIA compute capability {c}" for c in sorted(nvidia_compute_capabilities())]
    found += sorted(amdgpu_gfx_names())
    return ", ".join(found) or "no NVIDIA or AMD GPU found"
