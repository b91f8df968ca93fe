"""The fork under test, found and read: one fork at one ref (ci.upstream.scope) and what it holds of each imported
change, as ci.upstream.holds.classify answers it for every verb: converged (the base release or a merge of upstream
holds it), ported (as it is, edited, or in part) by commits of the fork's own, absent, unknown."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ci.common.errors import UsageError
from ci.stack.model import Stack
from ci.upstream.checkout import Checkout
from ci.upstream.holds import classify
from ci.upstream.scope import Base, Scope, from_args, open_scope
from ci.upstream.state import ChangeState, Snapshot


@dataclass(frozen=True, kw_only=True)
class Fork:
    scope: Scope
    snap: Snapshot

    @property
    def checkout(self) -> Checkout:
        return self.scope.co

    @property
    def name(self) -> str:
        return self.scope.name

    @property
    def ref(self) -> str:
        return self.scope.ref

    @property
    def commit(self) -> str:
        """What the ref names."""
        return self.scope.head

    @property
    def base(self) -> Base:
        return self.scope.require_base()

    @property
    def present(self) -> tuple[str, ...]:
        """The imported changes the fork holds, whole or in part: their rows run on it."""
        return tuple(c.change for c in self.snap.changes if c.held)

    @property
    def absent(self) -> tuple[str, ...]:
        return tuple(c.change for c in self.snap.changes if c.state == "absent")

    def state(self, change: str) -> ChangeState:
        try:
            return self.snap.get(change)
        except StopIteration:
            known = ", ".join(c.change for c in self.snap.changes if c.pr)
            raise UsageError(f"unknown change {change!r}", hint=f"one of {known}") from None

    def describe(self) -> str:
        """The fork in a line: its name, ref and commit, its checkout and its base."""
        base = self.scope.base
        on = f"vLLM {base.version} ({base.ref} = {base.commit[:12]})" if base else "an unknown base release"
        return f"{self.name}: {self.ref} = {self.commit[:12]} in {self.checkout.path}, over {on}"


def of(st: Stack, where: Scope) -> Fork:
    return Fork(scope=where, snap=classify.survey(st, where))


def open_fork(st: Stack, override: Path | None = None, **refs: str | None) -> Fork:
    """The fork `override` (else $STACKGATE_FORK, else stack/fork.yaml's) at `ref` (refs: ref, upstream_ref,
    base_ref, base_version)."""
    return of(st, open_scope(st, fork=override, **refs))


def from_command(st: Stack, args: object) -> Fork:
    """The fork a command line's fork options name (ci.common.options.add_fork)."""
    return of(st, from_args(st, args))
