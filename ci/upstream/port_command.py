"""The commands a port verdict hands the maintainer: `ci fork port` with the fork options that name this fork
(its checkout, its ref, and the upstream and base options it needs: those not found by themselves). Made from parsed
fields alone (a PR number, whether its prerequisites come first, the fork options), never taken from a file: the
report shows a port read back from an upstream.json by making its command again here."""

from __future__ import annotations

from collections.abc import Sequence

from ci.escape import command
from ci.stack.model import Stack
from ci.upstream.readiness import PORTABLE, Readiness
from ci.upstream.scope import Scope


def fork_flags(st: Stack, scope: Scope) -> tuple[str, ...]:
    """--fork and --ref always, and the --upstream-ref/--base-ref/--base-version the user gave (the scope's own)."""
    return scope.options


def port(flags: Sequence[str], pr: int, *, with_prerequisites: bool = False) -> str:
    extra = ["--with-prerequisites"] if with_prerequisites else []
    return command(["python", "-m", "ci", "fork", "port", str(pr), *extra, *flags])


def of(flags: Sequence[str], r: Readiness) -> str:
    """The next step of a port verdict: `ci fork port` of its PR (its prerequisites first where, with them, it ports),
    where there is something to try; "" where it is in the fork or cannot be tried here."""
    if r.verdict not in (*PORTABLE, "conflicts", "needs prerequisites"):
        return ""
    return port(flags, r.pr, with_prerequisites=r.after_prerequisites in PORTABLE)
