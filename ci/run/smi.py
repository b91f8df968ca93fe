"""The one reader of `nvidia-smi` on the host side: each GPU's asked fields, in the order asked. What the host's
target is (ci.run.host), which GPUs rows get (ci.run.gpus) and the driver a caches artefact is keyed by
(ci.run.caches) all ask it here. No nvidia-smi, or one that fails or hangs: no GPUs, never an error."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence

TIMEOUT_S = 20


def csv(fields: Sequence[str], *, units: bool = True) -> str:
    """nvidia-smi's CSV for `fields`, one line a GPU (no header; without units where `units` is False); "" where
    there is no nvidia-smi or it fails."""
    if not shutil.which("nvidia-smi"):
        return ""
    form = "csv,noheader" + ("" if units else ",nounits")
    try:
        return subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(fields)}", f"--format={form}"],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def rows(fields: Sequence[str], *, units: bool = True) -> list[list[str]]:
    """Each GPU's `fields`, stripped; [] where there is none to read."""
    return [[p.strip() for p in line.split(",")] for line in csv(fields, units=units).splitlines() if line.strip()]
