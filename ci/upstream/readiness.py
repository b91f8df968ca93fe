"""Whether a change the fork lacks (or a follow-up it lacks of a change it carries) would port onto the fork's ref
today, and what stands in the way: the answer `ci fork`, `ci upstream`, `ci plan --fork`, `ci fork port` and the
report show, as data (ci.upstream.port.decision decides it from git).

Verdicts:
- clean: upstream's patch (the merge's vllm/ diff against its first parent; a PR never merged, its commits) applies
  to the ref as it is;
- clean by three-way merge: it applies only by merging each file three ways (the fork moved the lines around it);
- conflicts: the three-way merge leaves conflicting hunks (each with the upstream commits that touched its lines
  since the fork left upstream, the possible prerequisites, and the fork's own commits that touched them);
- needs prerequisites: it changes files the fork's tree lacks (nor holds under another name): upstream added them
  after the fork left it, by other commits, named with their PRs;
- in the fork: its patch is already in the ref (it reverses cleanly), or the follow-up's commit is held;
- unknown: it cannot be tried here (the commit is not in the checkout, or the change records nothing to apply).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from ci.common.tables import counted

Verdict = Literal["clean", "clean by three-way merge", "conflicts", "needs prerequisites", "in the fork", "unknown"]
VERDICTS: tuple[str, ...] = get_args(Verdict)
PORTABLE: tuple[str, ...] = ("clean", "clean by three-way merge")


@dataclass(frozen=True, kw_only=True)
class Prerequisite:
    """An upstream commit between where the fork left upstream and the change's parent that touched a conflicting
    hunk's lines: possibly what the change needs first."""

    commit: str
    subject: str
    pr: int | None  # the PR its subject names, "(#12345)"
    held: bool  # the fork carries it (a commit of its own with its patch, its subject or its cherry-pick line)

    def to_json(self) -> dict[str, Any]:
        return {"commit": self.commit, "subject": self.subject, "pr": self.pr, "held": self.held}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Prerequisite:
        pr = doc["pr"]
        return cls(
            commit=str(doc["commit"]),
            subject=str(doc["subject"]),
            pr=None if pr is None else int(pr),
            held=_bool(doc["held"]),
        )


@dataclass(frozen=True, kw_only=True)
class ForkEdit:
    """A fork commit that touched a conflicting hunk's lines on the fork's side."""

    commit: str
    subject: str
    own: bool  # one of the fork's own commits (else its release line's, below the base)

    def to_json(self) -> dict[str, Any]:
        return {"commit": self.commit, "subject": self.subject, "own": self.own}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ForkEdit:
        return cls(commit=str(doc["commit"]), subject=str(doc["subject"]), own=_bool(doc["own"]))


@dataclass(frozen=True, kw_only=True)
class Missing:
    """A file an upstream commit's patch changes that the fork's tree lacks (and holds under no other name): the
    upstream commits that created and changed it between where the fork left upstream and that commit's parent
    (oldest first), or, where it was there when the fork left, the fork's commit that removed it."""

    file: str
    commit: str  # the upstream commit whose patch needs it
    commits: tuple[Prerequisite, ...] = ()  # oldest first: the first created it
    removed_by: ForkEdit | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "commit": self.commit,
            "commits": [p.to_json() for p in self.commits],
            "removed_by": self.removed_by.to_json() if self.removed_by else None,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Missing:
        removed = doc.get("removed_by")
        return cls(
            file=str(doc["file"]),
            commit=str(doc["commit"]),
            commits=tuple(Prerequisite.from_json(p) for p in doc["commits"]),
            removed_by=ForkEdit.from_json(removed) if removed is not None else None,
        )


@dataclass(frozen=True, kw_only=True)
class Hunk:
    upstream_lines: tuple[int, int]  # first and last line in upstream's file before the change (its parent)
    fork_lines: tuple[int, int]  # first and last line in the fork's file
    prerequisites: tuple[Prerequisite, ...] = ()  # newest first
    fork_edits: tuple[ForkEdit, ...] = ()  # newest first

    def to_json(self) -> dict[str, Any]:
        return {
            "upstream_lines": list(self.upstream_lines),
            "fork_lines": list(self.fork_lines),
            "prerequisites": [p.to_json() for p in self.prerequisites],
            "fork_edits": [e.to_json() for e in self.fork_edits],
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Hunk:
        return cls(
            upstream_lines=_span(doc["upstream_lines"]),
            fork_lines=_span(doc["fork_lines"]),
            prerequisites=tuple(Prerequisite.from_json(p) for p in doc["prerequisites"]),
            fork_edits=tuple(ForkEdit.from_json(e) for e in doc["fork_edits"]),
        )


@dataclass(frozen=True, kw_only=True)
class Conflict:
    file: str
    hunks: tuple[Hunk, ...]
    commit: str = ""  # the upstream commit whose patch conflicts (a PR never merged: one of its commits)

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "commit": self.commit, "hunks": [h.to_json() for h in self.hunks]}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Conflict:
        return cls(
            file=str(doc["file"]),
            commit=str(doc.get("commit", "")),
            hunks=tuple(Hunk.from_json(h) for h in doc["hunks"]),
        )


@dataclass(frozen=True, kw_only=True)
class Stacked:
    """A PR the change is stacked on, and what the fork holds of it."""

    pr: int
    change: str  # the change file tracking it, "" where none does
    state: str  # its state in the fork: a ChangeState's, or "held"/"not held"/"not found upstream" untracked
    commit: str = ""  # upstream's commit of it, where found

    @property
    def lacking(self) -> bool:
        return self.state in ("absent", "unknown", "partially ported", "not held", "not found upstream")

    def to_json(self) -> dict[str, Any]:
        return {"pr": self.pr, "change": self.change, "state": self.state, "commit": self.commit}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Stacked:
        return cls(
            pr=int(doc["pr"]), change=str(doc["change"]), state=str(doc["state"]), commit=str(doc.get("commit", ""))
        )


@dataclass(frozen=True, kw_only=True)
class Stability:
    """Whether upstream has settled the change: merged (when, and whether upstream's ref holds it), open, closed;
    follow-ups merged after it; a revert."""

    upstream: str  # "merged on 2026-08-11 as a311916a291c, on upstream/main"
    follow_ups: tuple[str, ...] = ()  # "#52512 merged on 2026-08-18, after it: GLM-5.2 ..."
    reverted: str = ""  # "reverted upstream by 1234abcd5678 'Revert ...'", or ""
    stable: bool = False  # merged and not reverted

    def to_json(self) -> dict[str, Any]:
        return {
            "upstream": self.upstream,
            "follow_ups": list(self.follow_ups),
            "reverted": self.reverted,
            "stable": self.stable,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Stability:
        return cls(
            upstream=str(doc["upstream"]),
            follow_ups=_strs(doc["follow_ups"]),
            reverted=str(doc["reverted"]),
            stable=_bool(doc["stable"]),
        )


@dataclass(frozen=True, kw_only=True)
class Readiness:
    pr: int
    change: str  # the change it ports; for a follow-up, the change it follows up
    follow_up: bool
    verdict: Verdict
    detail: str  # what was tried and found, in one line
    patch: tuple[str, ...] = ()  # the upstream commits whose vllm/ diff makes the port, oldest first
    files: tuple[str, ...] = ()  # the files the patch changes
    three_way: tuple[str, ...] = ()  # those that apply only by a three-way merge (or conflict)
    conflicts: tuple[Conflict, ...] = ()
    missing: tuple[Missing, ...] = ()  # needs prerequisites: the files it changes that the fork lacks
    moved: tuple[tuple[str, str], ...] = ()  # (upstream's path, the fork's): files the fork holds under another name
    # The prerequisite chain, closed, oldest first (the order to port them in, and what --with-prerequisites ports):
    # the PRs it is stacked on that the fork lacks, the upstream commits that created and changed the files it needs,
    # and those that touched its conflicting lines; then the same for each of them, to a bound
    # (ci.upstream.port.prerequisites)
    prerequisites: tuple[Prerequisite, ...] = ()
    after_prerequisites: str = ""  # the verdict with the chain ported first ("" where there is no chain)
    chain: str = ""  # the chain's outcome in one line: "ports after 2 prerequisites (#47327, #46808): all clean"
    stopped_at: str = ""  # the upstream commit where the chain stops ("" where it does not)
    # every commit of the chain (or the change) that conflicts or lacks files, in order, each taken past as upstream
    # has it; `cut`: the bound cut the chain at the last of them (what the commits after it need was not looked for)
    stops: tuple[str, ...] = ()
    cut: bool = False
    stacked_on: tuple[Stacked, ...] = ()
    stability: Stability | None = None
    command: str = ""  # the next step: the port, or what makes it possible

    @property
    def label(self) -> str:
        return f"#{self.pr} (follow-up of #{self.change})" if self.follow_up else f"#{self.pr}"

    def short(self) -> str:
        """The verdict in a table cell: "clean", "conflicts: speculator.py (3 hunks)", "needs prerequisites:
        attention.py (not in the fork)"."""
        if self.verdict == "needs prerequisites":
            names = ", ".join(dict.fromkeys(m.file.rsplit("/", 1)[-1] for m in self.missing))
            return f"needs prerequisites: {names} (not in the fork)"
        if self.verdict != "conflicts":
            return self.verdict
        hunks = sum(len(c.hunks) for c in self.conflicts)
        names = ", ".join(c.file.rsplit("/", 1)[-1] for c in self.conflicts)
        return f"conflicts: {names} ({counted(hunks, 'hunk')})"

    def to_json(self) -> dict[str, Any]:
        return {
            "pr": self.pr,
            "change": self.change,
            "follow_up": self.follow_up,
            "verdict": self.verdict,
            "detail": self.detail,
            "patch": list(self.patch),
            "files": list(self.files),
            "three_way": list(self.three_way),
            "conflicts": [c.to_json() for c in self.conflicts],
            "missing": [m.to_json() for m in self.missing],
            "moved": [list(m) for m in self.moved],
            "prerequisites": [p.to_json() for p in self.prerequisites],
            "after_prerequisites": self.after_prerequisites,
            "chain": self.chain,
            "stopped_at": self.stopped_at,
            "stops": list(self.stops),
            "cut": self.cut,
            "stacked_on": [s.to_json() for s in self.stacked_on],
            "stability": self.stability.to_json() if self.stability else None,
            "command": self.command,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Readiness:
        if doc["verdict"] not in VERDICTS:
            raise ValueError(f"unknown port verdict {doc['verdict']!r}")
        stability = doc.get("stability")
        return cls(
            pr=int(doc["pr"]),
            change=str(doc["change"]),
            follow_up=_bool(doc["follow_up"]),
            verdict=doc["verdict"],
            detail=str(doc["detail"]),
            patch=_strs(doc["patch"]),
            files=_strs(doc["files"]),
            three_way=_strs(doc["three_way"]),
            conflicts=tuple(Conflict.from_json(c) for c in doc["conflicts"]),
            missing=tuple(Missing.from_json(m) for m in doc.get("missing", ())),
            moved=tuple(_pair(m) for m in doc.get("moved", ())),
            prerequisites=tuple(Prerequisite.from_json(p) for p in doc["prerequisites"]),
            after_prerequisites=str(doc.get("after_prerequisites", "")),
            chain=str(doc.get("chain", "")),
            stopped_at=str(doc.get("stopped_at", "")),
            stops=_strs(doc.get("stops", [])),
            cut=_bool(doc.get("cut", False)),
            stacked_on=tuple(Stacked.from_json(s) for s in doc["stacked_on"]),
            stability=Stability.from_json(stability) if stability is not None else None,
            command=str(doc["command"]),
        )


def _bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


def _strs(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"expected a list of strings, got {str(value)[:80]!r}")
    return tuple(value)


def _pair(value: object) -> tuple[str, str]:
    if not isinstance(value, list) or len(value) != 2 or not all(isinstance(v, str) for v in value):
        raise ValueError(f"expected [upstream's path, the fork's path], got {str(value)[:80]!r}")
    return value[0], value[1]


def _span(value: object) -> tuple[int, int]:
    if not isinstance(value, list) or len(value) != 2 or not all(isinstance(v, int) for v in value):
        raise ValueError(f"expected [first line, last line], got {value!r}")
    return value[0], value[1]
