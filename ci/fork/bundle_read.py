"""A fork bundle from elsewhere (`ci fork build --bundle`, `ci main --compare-without --bundles`), read as data before
anything is built from it: a regular file (a FIFO would block tarfile forever), every member's header within bounds
(a 2 MB bundle can claim a 512 MB member), its manifest strict JSON of bounded depth with each field of its type (a
`held` that is a list, a commit that is a number), and every overlay member one the manifest lists. The harness's
`apply` (suites/harness/vllm_build.py) reads the same bundle again, with bounds of its own, where it lays it."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from pydantic import Field

from ci.common import untrusted
from ci.common.escape import one_line

MANIFEST = "stackgate-fork.json"  # the names harness.vllm_build reads (a test holds them together)
OVERLAY = "overlay/"
# a vllm/ overlay holds Python files and their data: the largest vLLM source file is under 1 MB
BOUNDS = untrusted.Bounds(count=100_000, member=64 << 20, total=2 << 30)


class ForkBlock(untrusted.Record):
    name: str
    ref: str
    commit: str | None = None
    built: str | None = None


class BaseBlock(untrusted.Record):
    version: str
    ref: str | None = None
    commit: str | None = None
    release_commit: str | None = None


class Held(untrusted.Record):
    state: str
    commits: list[str] = Field(default_factory=list)


class Manifest(untrusted.Record):
    fork: ForkBlock
    base: BaseBlock
    changes: list[str]
    held: dict[str, Held] = Field(default_factory=dict)
    without: str | None = None
    files: dict[str, str]
    deleted: list[str]

    def what(self) -> str:
        """The build it names, in words: `name ref (commit) over vLLM version (commit)` (its own words, escaped)."""
        f, b = self.fork, self.base
        fork, base = (f.commit or "no commit")[:12], (b.commit or "no commit")[:12]
        return one_line(f"{f.name} {f.ref} ({fork}) over vLLM {b.version} ({base})")


def kind(fix: str) -> untrusted.Kind:
    return untrusted.Kind(what="a fork bundle (ci fork bundle)", limit=BOUNDS.total, fix=fix, depth=8)


def read(bundle: Path, fix: str) -> Manifest:
    """The bundle's manifest, after every member's header is found within BOUNDS, a regular file under overlay/vllm/
    that the manifest lists; a BadInput (exit 2) naming the bundle, the member or field, and `fix` otherwise."""
    where = one_line(bundle)
    made: Manifest | None = None
    overlay: list[str] = []
    try:
        with untrusted.opened_tar(bundle, kind(fix)) as tar:
            for info in untrusted.members(tar, BOUNDS, str(bundle), fix):
                if info.name == MANIFEST and info.isfile():
                    data = tar.extractfile(info).read()  # type: ignore[union-attr]  (bounded above)
                    made = untrusted.parse(data, Manifest, kind(fix), f"{bundle}: {MANIFEST}")
                elif info.name.startswith(OVERLAY):
                    rel = PurePosixPath(info.name[len(OVERLAY) :])
                    if not info.isfile() or rel.is_absolute() or ".." in rel.parts or rel.parts[:1] != ("vllm",):
                        raise untrusted.BadInput(
                            f"{where}: {one_line(info.name)} is no regular file under vllm/", hint=fix
                        )
                    overlay.append(rel.as_posix())
    except untrusted.DAMAGED as exc:
        raise untrusted.BadInput(f"{where}: a damaged fork bundle ({type(exc).__name__}: {exc})", hint=fix) from None
    if made is None:
        raise untrusted.BadInput(f"{where}: no {MANIFEST}: not a fork bundle", hint=fix)
    unlisted = sorted(set(overlay) - set(made.files)) or sorted(set(made.files) - set(overlay))
    if unlisted:
        raise untrusted.BadInput(
            f"{where}: {one_line(unlisted[0])} is in the bundle or its manifest but not both: a damaged bundle",
            hint=fix,
        )
    return made
