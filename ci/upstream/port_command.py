"""The commands a port verdict hands the maintainer: `ci fork port` with the fork options that name this fork
(its checkout, its ref, and the upstream and base options it needs: those not found by themselves)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from ci.stack.model import Stack
from ci.upstream.scope import Scope


def fork_flags(st: Stack, scope: Scope) -> tuple[str, ...]:
    """--fork and --ref always, and the --upstream-ref/--base-ref/--base-version the user gave (the scope's own)."""
    return scope.options


def port(flags: Sequence[str], pr: int, *, with_prerequisites: bool = False) -> str:
    extra = ["--with-prerequisites"] if with_prerequisites else []
    return shlex.join(["python", "-m", "ci", "fork", "port", str(pr), *extra, *flags])
