"""A caches artefact from elsewhere (`ci run --host --caches`, `ci bake --host --from`), read as data: a regular file
(a FIFO would block tarfile forever), its members counted and sized from their headers before a byte of them is read,
its manifest strict JSON of bounded depth with every field of its type (a size is a whole number of bytes, a digest
64 hex digits, a row's outcome one a bake records), and every member one the manifest lists, of the size it says."""

from __future__ import annotations

import contextlib
import tarfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from ci.common import contract, untrusted
from ci.common.escape import one_line

MANIFEST = "stackgate-caches.json"
_MANIFEST_MAX = 16 << 20  # every file of every cache, with its sha256: a few MB
BOUNDS = untrusted.Bounds(count=500_000, member=8 << 30, total=128 << 30)  # a warm bake: 18 MB, 2,000 files


def kind(fix: str) -> untrusted.Kind:
    return untrusted.Kind(what="a caches artefact", limit=BOUNDS.total, fix=fix, depth=8)


class Entry(untrusted.Record):
    path: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    bytes: int = Field(ge=0, le=BOUNDS.member)


RowId = Annotated[str, StringConstraints(pattern=rf"^{contract.ROW_ID.pattern}$", max_length=300)]
Baked = Literal["pass", "failure", "error", "skipped"]  # a row the bake ran to a result (ci.run.finished.row_outcomes)


class Manifest(untrusted.Record):
    key: dict[str, str | dict[str, str]]
    files: list[Entry]
    rows: dict[RowId, Baked] | None = None  # a warm bake's rows and their outcome there; None: not recorded (aot)

    @property
    def listed(self) -> dict[str, tuple[int, str]]:
        """The artefact's files by path: (bytes, sha256)."""
        return {f.path: (f.bytes, f.sha256) for f in self.files}


@contextlib.contextmanager
def opened(artefact: Path, fix: str) -> Iterator[tuple[tarfile.TarFile, list[tarfile.TarInfo], Manifest]]:
    """The artefact open, every member's header checked against BOUNDS, and its manifest read."""
    with untrusted.opened_tar(artefact, kind(fix)) as tar:
        members = list(untrusted.members(tar, BOUNDS, str(artefact), fix))
        head = next((m for m in members if m.name == MANIFEST), None)
        if head is None or not head.isfile() or head.size > _MANIFEST_MAX:
            raise untrusted.BadInput(f"{one_line(artefact)}: no {MANIFEST}: not a caches artefact", hint=fix)
        data = tar.extractfile(head).read()  # type: ignore[union-attr]
        yield (
            tar,
            [m for m in members if m is not head],
            untrusted.parse(data, Manifest, kind(fix), f"{artefact}: {MANIFEST}"),
        )


def manifest(artefact: Path) -> Manifest:
    """An artefact's manifest, its members' headers checked (nothing unpacked)."""
    fix = "pass an artefact ci bake --host --out DIR made"
    try:
        with opened(artefact, fix) as (_, _, made):
            return made
    except untrusted.DAMAGED as exc:
        raise untrusted.BadInput(f"{one_line(artefact)}: a damaged caches artefact ({exc})", hint=fix) from None


def listing(artefact: Path) -> dict[str, str]:
    """An artefact's files by path: their sha256, as its manifest lists them (nothing unpacked)."""
    return {f.path: f.sha256 for f in manifest(artefact).files}


def check_members(listed: Mapping[str, tuple[int, str]], members: list[tarfile.TarInfo], artefact: Path) -> None:
    """Every member a regular file the manifest lists, of the size it says (from the headers, before a byte is
    unpacked: a huge member not in the manifest is never written), and every listed file present."""
    seen = set()
    for m in members:
        rel = m.name.removeprefix("root/")
        if not m.name.startswith("root/") or not m.isfile() or rel not in listed:
            raise ValueError(f"member {one_line(m.name)} is not in its manifest")
        if m.size != listed[rel][0]:
            raise ValueError(f"member {one_line(m.name)} holds {m.size} bytes, its manifest says {listed[rel][0]}")
        seen.add(rel)
    if missing := sorted(set(listed) - seen):
        raise ValueError(f"{len(missing)} file(s) of its manifest are missing, e.g. {one_line(missing[0])}")
