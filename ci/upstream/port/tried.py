"""A change the fork lacks, ported onto the fork's ref on a scratch ref to be judged by its own rows before anyone makes
the port for real (`ci main --try-port`): what was ported (the prerequisite chain first, where one was needed), onto
which fork commit, the commits made, the ref they were on, and the command that makes the port for real. Ids and PR
numbers only: a report carries this, and a report holds no upstream subject or code."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ci.common.tables import counted
from ci.upstream.readiness import PORTABLE, Prerequisite, Readiness


@dataclass(frozen=True, kw_only=True)
class Tried:
    change: str  # the change tried, "46514"
    pr: int
    readiness: str  # its port verdict as `ci fork` gave it: clean, by a three-way merge, needs prerequisites, conflicts
    how: str  # how the port applied, after its prerequisites where any: "clean" or "clean by three-way merge"
    prerequisites: tuple[Prerequisite, ...]  # ported first, oldest first (empty where none was needed)
    onto: str  # the fork commit the port was made on
    commits: tuple[tuple[str, str], ...]  # (the port's commit, the upstream commit it ports), oldest first
    ref: str  # the scratch ref it was made on, or the branch it was kept as
    kept: bool = False  # `ref` is a branch the user asked to keep (--keep-port-branch)
    command: str = ""  # the port made for real: `python -m ci fork port X [--with-prerequisites] --fork ... --ref ...`

    @property
    def tip(self) -> str:
        return self.commits[-1][0] if self.commits else self.onto

    @property
    def said(self) -> str:
        """How it ported, in the report's words: "clean", "clean, 2 prerequisites", "clean by three-way merge, 1
        prerequisite"."""
        return self.how + (f", {counted(len(self.prerequisites), 'prerequisite')}" if self.prerequisites else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "change": self.change,
            "pr": self.pr,
            "readiness": self.readiness,
            "how": self.how,
            "said": self.said,
            "onto": self.onto,
            "tip": self.tip,
            "commits": [c for c, _ in self.commits],
            "upstream_commits": [u for _, u in self.commits],
            "prerequisites": [{"commit": p.commit, "pr": p.pr} for p in self.prerequisites],
            "ref": self.ref,
            "kept": self.kept,
            "command": self.command,
        }


def with_prerequisites(r: Readiness) -> bool:
    """The port takes its prerequisite chain first: the change does not port alone, and does after the chain."""
    return bool(r.prerequisites) and r.after_prerequisites in PORTABLE


def triable(r: Readiness) -> bool:
    """Whether the port can be made cleanly, as it is or after its prerequisite chain (each of its commits clean, or
    clean by a three-way merge): what `--try-port` tries; a conflict anywhere is the maintainer's to resolve first."""
    if r.follow_up or r.verdict in ("in the fork", "unknown"):
        return False
    return with_prerequisites(r) or (r.verdict in PORTABLE and not r.prerequisites)


def how(r: Readiness) -> str:
    """How the port applies: after its chain where it takes one, else as its own verdict says."""
    return r.after_prerequisites if with_prerequisites(r) else r.verdict
