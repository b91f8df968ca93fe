"""The commands a port verdict hands the maintainer: `ci fork port` with the fork options that name this fork
(its checkout, its ref, and the upstream and base options it needs: those not found by themselves)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from ci.errors import UsageError
from ci.stack.model import Stack
from ci.upstream import history
from ci.upstream.scope import Scope


def fork_flags(st: Stack, scope: Scope) -> tuple[str, ...]:
    """--fork and --ref always; --upstream-ref where the remote rule would not find it; --base-ref and
    --base-version where the base was given so."""
    flags = ["--fork", str(scope.co.path), "--ref", scope.ref]
    if scope.upstream_ref:
        try:
            found = history.upstream_tip(scope.co, st, None)[0]
        except UsageError:
            found = None
        if found != scope.upstream_ref:
            flags += ["--upstream-ref", scope.upstream_ref]
    if scope.base and scope.base.how == "--base-ref":
        flags += ["--base-ref", scope.base.ref, "--base-version", scope.base.version]
    return tuple(flags)


def port(flags: Sequence[str], pr: int, *, with_prerequisites: bool = False) -> str:
    extra = ["--with-prerequisites"] if with_prerequisites else []
    return shlex.join(["python", "-m", "ci", "fork", "port", str(pr), *extra, *flags])
