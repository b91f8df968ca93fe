"""Reading the JIT sentinel: compiles seen during a window, in every process, and the AOT check.

The sentinel (`stackgate_jit_sentinel` in the images, `harness.jit_sentinel` in a checkout) appends one
JSON line per real Triton compile to $STACKGATE_JIT_LOG from any process that loads it. A window is a
log offset plus a snapshot of the cache directories, so it sees compiles in EngineCore and worker
processes too, not only in the test's own process. Where the sentinel is not importable nothing is
known: the window says so (`available` is False) and callers record the property as absent, never 0.
"""

from __future__ import annotations

import importlib
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from harness import boundary, jit_log

ENV_LOG = boundary.ENV_JIT_LOG
_MISSING = object()
_sentinel_cache: Any = _MISSING


def sentinel() -> ModuleType | None:
    """The sentinel module, or None where it is not installed."""
    global _sentinel_cache
    if _sentinel_cache is _MISSING:
        _sentinel_cache = None
        for name in ("stackgate_jit_sentinel", "harness.jit_sentinel"):
            try:
                mod = importlib.import_module(name)
            except ImportError:
                continue
            # importable is not enough: only a sentinel installed at interpreter start records compiles
            if not hasattr(mod, "installed") or mod.installed():
                _sentinel_cache = mod
                break
    return _sentinel_cache


def cache_dirs() -> list[Path]:
    """Every directory a JIT path of the stack writes into (CONTEXT.md: the backstop across processes); the
    list is the sentinel's, which the images carry on their own."""
    return [Path(d) for d in jit_log.cache_dirs()]


def _snapshot(dirs: list[Path]) -> frozenset[str]:
    return jit_log.snapshot([str(d) for d in dirs])


def _new_files(before: frozenset[str], dirs: list[Path]) -> list[str]:
    return jit_log.new_files(before, [str(d) for d in dirs])


@dataclass(frozen=True)
class Seen:
    """What a window saw. `compiles` is None where the sentinel is absent: unknown, not zero."""

    compiles: int | None
    kernels: tuple[str, ...]
    cache_new_files: tuple[str, ...]
    events: tuple[dict, ...] = ()  # the compiles' own events, with their key parts

    @property
    def available(self) -> bool:
        return self.compiles is not None

    def named(self) -> tuple[str, ...]:
        """Each kernel once, with how many times it compiled where more than once ("k ×2": a second
        specialization), so the names account for the count."""
        counts = Counter(str(e.get("kernel", "?")) for e in self.events)
        return tuple(f"{k} ×{counts[k]}" if counts[k] > 1 else k for k in self.kernels)


class Window:
    """Compiles and new cache files from construction until `seen()`; cheap enough for every row."""

    def __init__(self, log: str | os.PathLike[str] | None = None) -> None:
        self._mod = sentinel()
        self._log = Path(log) if log else (Path(os.environ[ENV_LOG]) if os.environ.get(ENV_LOG) else None)
        self._offset = self._log.stat().st_size if self._log and self._log.exists() else 0
        self._dirs = cache_dirs()
        self._before = _snapshot(self._dirs)

    def seen(self) -> Seen:
        new = tuple(_new_files(self._before, self._dirs))
        if self._mod is None or self._log is None:
            return Seen(compiles=None, kernels=(), cache_new_files=new)
        if not self._log.exists():
            return Seen(compiles=0, kernels=(), cache_new_files=new)
        events, _ = jit_log.read_events(str(self._log), self._offset)
        real = jit_log.compiles(events)
        kernels = tuple(dict.fromkeys(str(e.get("kernel", "?")) for e in real))
        return Seen(compiles=len(real), kernels=kernels, cache_new_files=new, events=tuple(real))


def expect_aot(seen: Seen, what: str = "this row") -> None:
    """Fail the test where a row that expected ahead-of-time kernels saw a compile, naming them."""
    import pytest

    if not seen.available:
        pytest.fail(f"cannot prove {what} ran without JIT: the JIT sentinel is not installed in this environment")
    if seen.compiles:
        pytest.fail(f"{what} expected AOT kernels but saw {seen.compiles} JIT compile(s): {', '.join(seen.kernels)}")
