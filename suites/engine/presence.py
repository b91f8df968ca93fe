"""Is the imported change in the vLLM under test? The probe its change file names (engine.tracked.PROBES) says, and
names the code it looked for.

A row whose change is absent fails with "change absent in vLLM <version>" rather than passing or
skipping: stock vLLM lacks some of the fork's ports, and that must show in the report.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine import tracked


@dataclass(frozen=True)
class Presence:
    change: str
    present: bool
    evidence: str  # what was looked for, and where

    def message(self) -> str:
        return f"change #{self.change} absent in {build_name()}: {self.evidence}"


def build_name() -> str:
    """The vLLM under test as a reader names it: a fork build by its fork, ref, what it was built without or the port
    tried on it, and its commit ("fork demo-fork main without #46849 (ffa236ab7621)"), a stock release by its
    version."""
    root = vllm_root()
    try:
        from harness import vllm_build

        doc = vllm_build.read_manifest(root) if root is not None else None
    except (ImportError, OSError, ValueError):
        doc = None
    if not doc:
        return f"vLLM {vllm_version()}"
    fork = doc.get("fork") or {}
    without = f" without #{doc['without']}" if doc.get("without") else ""
    port = doc.get("port") if isinstance(doc.get("port"), dict) else {}
    with_port = f" with the port of #{port['change']}" if port.get("change") else ""
    return f"fork {fork.get('name')} {fork.get('ref')}{without}{with_port} ({str(fork.get('built', ''))[:12]})"


def vllm_root() -> Path | None:
    """The installed vllm package directory, found without importing vllm."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def vllm_version() -> str:
    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        root = vllm_root()
        return f"(unversioned, at {root})" if root else "(not installed)"


def vllm_commit() -> str | None:
    """The git commit the vLLM build was made from, where its build recorded one (vcs-versioning writes
    `vllm/_version.py` with `commit_id`, e.g. "gffd46bfab" for 0.26.0; a fork's wheel names the fork's)."""
    root = vllm_root()
    if root is None or not (root / "_version.py").is_file():
        return None
    import re

    found = re.search(r"""commit_id\s*=\s*['"]([^'"]+)['"]""", (root / "_version.py").read_text())
    return found.group(1) if found else None


def of(row: Any) -> Presence:
    """Whether the row's change is in the vLLM under test, by the probe its change file names (rows.json `probe`,
    engine.tracked.PROBES). A row naming no probe, or one this image's suites lack, is a LookupError saying so."""
    name = row.get("probe")
    if name is None:
        raise LookupError(
            f"row {row.id}: rows.json names no probe for change #{row.change}: it was written before change files "
            "named their probes; write it again from the stack (python -m ci run, or python -m ci repro ROW --report)"
        )
    probe = tracked.PROBES.get(str(name))
    if probe is None:
        raise LookupError(
            f"row {row.id}: probe {name!r} is not one of suites/engine/tracked.py's PROBES "
            f"({', '.join(sorted(tracked.PROBES))}); the image's suites are older than the stack that wrote rows.json: "
            "rebuild the image, or run with --suites-dir suites"
        )
    present, evidence = probe(vllm_root())
    return Presence(row.change, present, evidence)
