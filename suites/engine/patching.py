"""One vLLM method replaced while a probe is active, and restored after: what every probe (`engine.probes`,
`engine.mla_probes`) is built on."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def patched(owner: Any, name: str, make: Callable[[Any], Any]) -> Iterator[None]:
    """Replace owner.name with make(original) for the duration; restore it afterwards."""
    had_own = name in vars(owner) if isinstance(owner, type) else hasattr(owner, "__dict__") and name in owner.__dict__
    original = getattr(owner, name)
    setattr(owner, name, make(original))
    try:
        yield
    finally:
        if had_own or isinstance(owner, type):
            setattr(owner, name, original)
        else:
            delattr(owner, name)
