"""What `ci upstream` answers for each change, and its JSON document (upstream.json), which `ci report --upstream`
reads back to show each change's rebase state beside its verdict.

States, one per change:
- converged: the upstream merge commit (or, where none is recorded, every commit of the PR) is an ancestor of HEAD;
- ported: a patch equal (`git patch-id --stable`) to each port commit, or to upstream's own (the merge commit's or
  a PR commit's), is among the fork's own commits (REF..HEAD);
- ported, edited: a fork commit changes the files the change changes, most of them with the same edit (file
  patch-ids), but its patch differs (a conflict resolved): the files edited otherwise are named;
- partially ported: some are, the others are named as missing;
- diverged: ported, but upstream commits after the port's base changed the same files (listed);
- absent: nothing of it is in the fork (checked: merge commit not reached, no port patch found);
- unknown: it could not be checked (port commits not in this checkout, no merge commit recorded); `fix` says how;
- not imported: the change imports nothing from upstream (the harness self-test).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from ci.errors import UsageError
from ci.escape import one_line
from ci.upstream.readiness import Readiness

State = Literal[
    "converged", "ported", "ported, edited", "partially ported", "diverged", "absent", "unknown", "not imported"
]
STATES: tuple[str, ...] = get_args(State)
HELD: tuple[str, ...] = ("converged", "ported", "ported, edited", "partially ported", "diverged")
SCHEMA = 2
READS = (1, 2)  # schema 1 (before carried_by, merge and the fork's name, ref and base) reads with those empty


@dataclass(frozen=True, kw_only=True)
class Upstreamed:
    """An upstream commit after the port's base that changed files the port changes."""

    commit: str
    subject: str
    files: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class ChangeState:
    change: str
    state: State
    detail: str  # what was found, in one line
    recorded: str  # the upstream state the stack records, with its date: "merged on 2026-07-28 (as of 2026-11-29)"
    pr: str = ""  # "vllm-project/vllm#48407"; "" for a change that imports nothing
    present: tuple[tuple[str, str], ...] = ()  # (port commit as recorded, the fork commit carrying its patch)
    missing: tuple[str, ...] = ()  # port commits whose patch is not in the fork
    unchecked: tuple[str, ...] = ()  # port commits that could not be compared (not in the checkout, nothing recorded)
    diverged: tuple[Upstreamed, ...] = ()
    flags: tuple[str, ...] = ()  # what needs doing: convergence, a missing base, a port carried after convergence
    fix: str = ""  # how to make an unknown state known
    # the fork commits that carry it, oldest first: what `--without` reverts (upstream's merge commit where the fork
    # merged upstream; empty where it is absent, unknown, or converged through the base release)
    carried_by: tuple[str, ...] = ()
    merge: str = ""  # converged: upstream's merge commit, full, where the checkout holds it (an ablation reverts it)
    follow_ups_missing: tuple[str, ...] = ()  # merged follow-ups (a fix of it) the fork lacks while holding it
    port: Readiness | None = None  # absent or partially ported: whether it ports today (ci.upstream.port_check)
    follow_up_ports: tuple[Readiness, ...] = ()  # held: each follow-up upstream merged, held or how it would port

    @property
    def held(self) -> bool:
        """Whether the fork holds the change (some of it at least): its rows run on the fork."""
        return self.state in HELD

    @property
    def diverged_files(self) -> tuple[str, ...]:
        return tuple(sorted({f for u in self.diverged for f in u.files}))

    def to_json(self) -> dict[str, Any]:
        return {
            "change": self.change,
            "state": self.state,
            "detail": self.detail,
            "recorded": self.recorded,
            "pr": self.pr,
            "present": [{"commit": c, "in_fork": f} for c, f in self.present],
            "missing": list(self.missing),
            "unchecked": list(self.unchecked),
            "diverged": {
                "files": list(self.diverged_files),
                "commits": [{"commit": u.commit, "subject": u.subject, "files": list(u.files)} for u in self.diverged],
            },
            "flags": list(self.flags),
            "fix": self.fix,
            "carried_by": list(self.carried_by),
            "merge": self.merge,
            "follow_ups_missing": list(self.follow_ups_missing),
            **({"port": self.port.to_json()} if self.port else {}),
            **({"follow_up_ports": [f.to_json() for f in self.follow_up_ports]} if self.follow_up_ports else {}),
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ChangeState:
        if doc["state"] not in STATES:
            raise ValueError(f"unknown state {doc['state']!r}")
        return cls(
            change=str(doc["change"]),
            state=doc["state"],
            detail=str(doc["detail"]),
            recorded=str(doc["recorded"]),
            pr=str(doc["pr"]),
            present=tuple((str(p["commit"]), str(p["in_fork"])) for p in doc["present"]),
            missing=tuple(map(str, doc["missing"])),
            unchecked=tuple(map(str, doc["unchecked"])),
            diverged=tuple(
                Upstreamed(commit=str(u["commit"]), subject=str(u["subject"]), files=tuple(map(str, u["files"])))
                for u in doc["diverged"]["commits"]
            ),
            flags=tuple(map(str, doc["flags"])),
            fix=str(doc["fix"]),
            carried_by=tuple(map(str, doc.get("carried_by", ()))),
            merge=str(doc.get("merge", "")),
            follow_ups_missing=tuple(map(str, doc.get("follow_ups_missing", ()))),
            port=Readiness.from_json(doc["port"]) if doc.get("port") is not None else None,
            follow_up_ports=tuple(Readiness.from_json(f) for f in doc.get("follow_up_ports", ())),
        )


@dataclass(frozen=True, kw_only=True)
class Snapshot:
    """Every change's state in one fork at one ref, against upstream's main and the fork's base release."""

    fork: str  # the checkout's path
    head: str  # the commit judged (`ref`)
    upstream_ref: str  # "" where the checkout has no upstream history (the base alone bounds the fork's own)
    upstream: str  # the commit the ref named
    merge_base: str  # where the fork's own commits branch off upstream's main ("" without it)
    shallow: bool
    fork_commits: int  # how many non-merge commits are the fork's own (`own`)
    changes: tuple[ChangeState, ...]
    name: str = ""  # the fork's name (stack/fork.yaml's, or its checkout folder's)
    ref: str = "HEAD"
    own: str = ""  # the fork's own commits as a range: "upstream/main..main", "v0.26.0..main"
    base_version: str = ""  # the base release ("" where not known)
    base_ref: str = ""
    base: str = ""  # the commit base_ref names
    base_how: str = ""  # how the base was found ("" where it is not known)
    base_unknown: str = ""  # why it is not known, and what makes it known
    left_date: str = ""  # the date of merge_base: where the ref left upstream's main
    options: tuple[str, ...] = ()  # the options that name this fork at this ref, as the user gave them
    # the commits whose patch the fork took back (ci.upstream.reverts): known where the fork was read, not written
    undone: frozenset[str] = frozenset()

    def get(self, change: str) -> ChangeState:
        return next(c for c in self.changes if c.change == change)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "kind": "stackgate.upstream",
            "fork": self.fork,
            "head": self.head,
            "upstream_ref": self.upstream_ref,
            "upstream": self.upstream,
            "merge_base": self.merge_base,
            "shallow": self.shallow,
            "fork_commits": self.fork_commits,
            "name": self.name,
            "ref": self.ref,
            "own": self.own,
            "base": {"version": self.base_version, "ref": self.base_ref, "commit": self.base, "how": self.base_how},
            "base_unknown": self.base_unknown,
            "left_date": self.left_date,
            "options": list(self.options),
            "changes": [c.to_json() for c in self.changes],
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Snapshot:
        if doc.get("kind") != "stackgate.upstream" or doc.get("schema") not in READS:
            raise ValueError(f"not a stackgate.upstream document of schema {' or '.join(map(str, READS))}")
        base = doc.get("base") or {}
        return cls(
            fork=str(doc["fork"]),
            head=str(doc["head"]),
            upstream_ref=str(doc["upstream_ref"]),
            upstream=str(doc["upstream"]),
            merge_base=str(doc["merge_base"]),
            shallow=bool(doc["shallow"]),
            fork_commits=int(doc["fork_commits"]),
            changes=tuple(ChangeState.from_json(c) for c in doc["changes"]),
            name=str(doc.get("name", "")),
            ref=str(doc.get("ref", "HEAD")),
            own=str(doc.get("own", "")),
            base_version=str(base.get("version", "")),
            base_ref=str(base.get("ref", "")),
            base=str(base.get("commit", "")),
            base_how=str(base.get("how", "")),
            base_unknown=str(doc.get("base_unknown", "")),
            left_date=str(doc.get("left_date", "")),
            options=fork_options(doc.get("options", [])),
        )


FORK_OPTIONS = ("--fork", "--ref", "--upstream-ref", "--base-ref", "--base-version")  # what names a fork at a ref


def fork_options(value: object) -> tuple[str, ...]:
    """The options that name a fork at a ref, read back from a document: pairs of a fork option and its value, and
    nothing else (a command made from them takes no other option from a file)."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value) or len(value) % 2:
        raise ValueError("options: not a list of fork options and their values")
    for flag in value[0::2]:
        if flag not in FORK_OPTIONS:
            raise ValueError(f"options: {flag!r} is not a fork option ({', '.join(FORK_OPTIONS)})")
    return tuple(value)


_MAKE = "python -m ci upstream --fork CHECKOUT --ref REF --format json > upstream.json"


def read(path: Path) -> Snapshot:
    """upstream.json as `ci upstream --format json` wrote it, read as data from elsewhere (`ci.untrusted`); anything
    else is a UsageError naming the file."""
    from ci import untrusted  # its validation library loads only where a file from elsewhere is read

    kind = untrusted.Kind(what="an upstream.json written by python -m ci upstream", limit=64 << 20, fix=_MAKE)
    doc = untrusted.json_value(untrusted.read_bytes(Path(path), kind), kind, str(path))
    try:
        return Snapshot.from_json(doc)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        problem = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc).splitlines()[0]
        raise UsageError(
            f"{one_line(path)}: not an upstream.json written by python -m ci upstream ({one_line(problem)})",
            hint=_MAKE,
        ) from None
