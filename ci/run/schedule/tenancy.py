"""Which rows shared a GPU while they ran: the schedule's record, written into each row's testcases as
`stackgate.gpu_shared_with`, so that the report never judges a timing criterion from a run that shared its GPU.

The scheduler packs functional rows beside each other; timings taken beside another engine measure the neighbour as
much as the build (the #48407 prefill gap: 2.25 ms alone against 3.99 ms shared, on one H200). `ci run --alone`
gives each process its GPUs to itself; without it, what shared is recorded here, from the start and end of every
session on every device, once the schedule is over.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lxml import etree

from ci.common import contract, files

SHARED = contract.PREFIX + "gpu_shared_with"


@dataclass(frozen=True, kw_only=True)
class Tenure:
    devices: tuple[str, ...]  # the GPUs its session held ("" where the host has none)
    start: float
    end: float
    rows: tuple[str, ...]
    junit: Path


def shared(tenures: Sequence[Tenure]) -> dict[int, tuple[str, ...]]:
    """Index of each tenure that overlapped another on one of its GPUs -> the other tenures' rows."""
    out: dict[int, tuple[str, ...]] = {}
    for i, a in enumerate(tenures):
        gpus = {d for d in a.devices if d}
        others = [
            r
            for j, b in enumerate(tenures)
            if j != i and gpus & set(b.devices) and b.start < a.end and a.start < b.end
            for r in b.rows
        ]
        if others:
            out[i] = tuple(dict.fromkeys(others))
    return out


def record(tenures: Sequence[Tenure]) -> int:
    """Write each shared session's co-tenants into its JUnit's testcases; how many sessions shared."""
    found = shared(tenures)
    for i, others in found.items():
        _annotate(tenures[i].junit, others)
    return len(found)


def _annotate(junit: Path, others: Sequence[str]) -> None:
    try:
        root = etree.parse(str(junit)).getroot()
    except (OSError, etree.XMLSyntaxError):
        return  # no JUnit: its rows are recorded as lost, with nothing measured to misjudge
    for tc in root.iter("testcase"):
        props = tc.find("properties")
        if props is None:
            props = etree.Element("properties")
            tc.insert(0, props)
        for old in props.findall(f"property[@name='{SHARED}']"):
            props.remove(old)
        etree.SubElement(props, "property", name=SHARED, value=",".join(others))
    try:
        with files.staged(junit) as fh:
            etree.ElementTree(root).write(fh, encoding="utf-8", xml_declaration=True)
    except OSError as exc:  # a full disk: its timings then read as not shared; say so
        print(f"{junit}: cannot record the GPU's co-tenants ({exc.strerror or exc})", flush=True)
