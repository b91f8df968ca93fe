"""The fork under test, found and read: its checkout, the commit its ref names, its base, and which imported
changes it holds (each change's port commits, `fork.commits`, resolved in that checkout).

A change whose commits the checkout lacks, or that are not in the ref's history, is "absent in the fork",
said with the commits it looked for; a change that records none is "not recorded" there, never present.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ci.errors import UsageError
from ci.stack.model import ForkSource, Stack
from ci.upstream.checkout import Checkout

ENV_FORK = "STACKGATE_FORK"


@dataclass(frozen=True, kw_only=True)
class Held:
    change: str
    state: str  # "present", "absent", "not recorded"
    commits: tuple[str, ...]  # the full ids found (present), or the ids looked for
    why: str


@dataclass(frozen=True, kw_only=True)
class Fork:
    source: ForkSource
    checkout: Checkout
    commit: str  # what the ref names
    base_commit: str  # what the base ref names
    held: dict[str, Held]

    @property
    def present(self) -> tuple[str, ...]:
        return tuple(c for c, h in self.held.items() if h.state == "present")


def source(st: Stack) -> ForkSource:
    if st.fork is None:
        raise UsageError(
            f"{st.root}/fork.yaml: the stack names no fork under test",
            hint="add stack/fork.yaml (name, checkout, ref, base); README 'The fork under test'",
        )
    return st.fork


def checkout_path(st: Stack, override: Path | None = None) -> Path:
    """--fork, else $STACKGATE_FORK, else fork.yaml's checkout (relative to the stack folder)."""
    src = source(st)
    chosen = override or os.environ.get(ENV_FORK) or src.checkout
    if "://" in str(chosen) or str(chosen).startswith("git@"):
        raise UsageError(
            f"fork checkout {chosen} is a URL: stackgate reads a local clone, offline",
            hint=f"git clone {chosen} DIR && export {ENV_FORK}=DIR",
        )
    path = Path(chosen).expanduser()
    return path if path.is_absolute() else (st.root / path).resolve()


def open_fork(st: Stack, override: Path | None = None) -> Fork:
    src = source(st)
    path = checkout_path(st, override)
    if not path.exists():
        raise UsageError(
            f"fork checkout {path} does not exist (stack/fork.yaml checkout, ${ENV_FORK} or --fork)",
            hint=f"clone the fork there, or export {ENV_FORK}=PATH_OF_YOUR_CLONE",
        )
    co = Checkout.open(path)
    commit, base = co.commit(src.ref), co.commit(src.base.ref)
    for name, found in (("ref", commit), ("base.ref", base)):
        if found is None:
            ref = src.ref if name == "ref" else src.base.ref
            raise UsageError(
                f"stack/fork.yaml {name} {ref!r} names no commit in {path}",
                hint=f"git -C {path} fetch origin {ref}, or correct {name} (refs here: "
                f"{', '.join(co.refs()[:8]) or 'none'})",
            )
    assert commit and base
    if not co.is_ancestor(base, commit):
        raise UsageError(
            f"stack/fork.yaml base.ref {src.base.ref} is not in the history of ref {src.ref} ({path})",
            hint="base.ref names the release tree the fork's ref was built on",
        )
    return Fork(source=src, checkout=co, commit=commit, base_commit=base, held=holdings(st, co, base, commit))


def holdings(st: Stack, co: Checkout, base: str, tip: str) -> dict[str, Held]:
    """Each imported change: present where all its port commits are in base..tip (by id, or by the patch-id its
    file records where a rebase replaced the commit), else absent, naming what was looked for."""
    wanted = {c: ch.fork.commits for c, ch in st.changes.items() if ch.upstream is not None}
    full = co.resolve(i for ids in wanted.values() for i in ids)
    recorded = {c: st.changes[c].fork.patch_ids for c in wanted}
    by_patch = {p: c for c, p in co.patch_ids(f"{base}..{tip}").items()} if any(recorded.values()) else {}
    held: dict[str, Held] = {}
    for change, ids in wanted.items():
        if not ids:
            held[change] = Held(
                change=change, state="not recorded", commits=(), why="its change file lists no fork.commits"
            )
            continue
        found, missing = [], []
        for short in ids:
            commit = full.get(short)
            if commit and co.is_ancestor(commit, tip) and not co.is_ancestor(commit, base):
                found.append(commit)
            elif (patch := recorded[change].get(short)) and patch in by_patch:
                found.append(by_patch[patch])
            else:
                missing.append(short)
        if missing:
            held[change] = Held(
                change=change,
                state="absent",
                commits=tuple(ids),
                why=f"absent in the fork: {', '.join(missing)} not in {base[:12]}..{tip[:12]}",
            )
        else:
            held[change] = Held(
                change=change, state="present", commits=tuple(found), why=f"{len(found)} port commit(s) in the fork"
            )
    return held
