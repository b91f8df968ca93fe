"""What vLLM does once per process, on the first request, timed where it happens: a row whose first request is
slower than its warm ones names what it paid for beside the ratio. Each site is a vLLM function that runs on a
first call only (a per-process cache fills), found by profiling first requests against warm ones (harness.profile,
evidence/h200-bake/profile). The frames torch.compile traces in a request are the JIT record's, not listed here."""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from harness import jit_seen
from harness import profile as profiling

from engine.probes import patched


@dataclass(frozen=True)
class Site:
    module: str
    function: str  # a module-level function, looked up by name where it is called (so patching it is seen)
    what: str  # what the user reads


SITES = (
    # vllm/v1/sample/logits_processor/__init__.py: the first SamplingParams validation of a process loads the
    # logits-processor plugins (lru_cache'd), scanning every installed distribution's entry points
    Site("vllm.v1.sample.logits_processor", "_load_logitsprocs_plugins", "vLLM logits-processor plugin scan"),
)


def _timer(what: str) -> Callable[[Any], Any]:
    def make(original: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                profiling.note_first_call(what, (time.perf_counter() - t0) * 1000.0)

        return timed

    return make


@contextmanager
def timed(sites: tuple[Site, ...] = SITES) -> Iterator[None]:
    """Time every call of the sites during the block (harness.profile.first_calls keeps them); a site the
    installed vLLM lacks is skipped: it costs nothing there."""
    with ExitStack() as stack:
        for site in sites:
            try:
                module = importlib.import_module(site.module)
            except ImportError:
                continue
            if callable(getattr(module, site.function, None)):
                stack.enter_context(patched(module, site.function, _timer(site.what)))
        yield


@contextmanager
def compiles_named(on: bool) -> Iterator[None]:
    """Where `on` (the first request): what the block compiled, in any of the engine's processes, and the frames
    torch.compile traced in it, each with its own seconds, beside the rest of its once-per-process work: the cold
    request's excess over warm is then named by what the row measured, not left "not named"."""
    if not on:
        yield
        return
    window, traced_before = jit_seen.Window(), len(profiling.traced_in_requests())
    yield
    for event in window.seen().events:
        profiling.note_first_call(
            f"Triton compile of {event.get('kernel', '?')}", float(event.get("time_s") or 0) * 1e3
        )
    for frame in profiling.traced_in_requests()[traced_before:]:
        profiling.note_first_call(f"torch.compile trace of {frame.get('site', '?')}", float(frame.get("s") or 0) * 1e3)
