"""In-process probes on a running vLLM engine (VLLM_ENABLE_V1_MULTIPROCESSING=0).

Each probe patches one well-named vLLM method while it is active and restores it on exit. They read
what the acceptance criteria ask for: graph replays per draft step, eager decode steps, the attention
output of the first layer on a chosen step, indexer scoring calls.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from engine.mla_probes import (  # noqa: F401  (the MLA probes, named through this module by the suites)
    Capture,
    Indexer,
    dense_prefill_off,
    indexer,
    mixed_prefill_rows,
    mla_layer0_output,
    pure_prefill,
    rel_err,
)
from engine.patching import patched

# --- MRV2 autoregressive speculator: draft loops and their graph replays (#46849) -----------------------


@dataclass
class DraftLoop:
    """Counts per propose: draft-decode loops, FULL graph replays inside them, CUDA-event time of each loop."""

    k: int = 0
    loops: int = 0
    replays: int = 0
    proposes: int = 0
    fused: bool = False
    # each loop's CUDA events, read once the GPU has passed them: a synchronize inside the loop would stall the
    # pipeline every step and time the stall with it
    events: list[tuple[Any, Any]] = field(default_factory=list)
    _ms: list[float] = field(default_factory=list)

    @property
    def loop_ms(self) -> list[float]:
        """GPU time of each draft loop so far, between its two CUDA events (waits for the last one)."""
        for start, end in self.events[len(self._ms) :]:
            end.synchronize()
            self._ms.append(start.elapsed_time(end))
        return list(self._ms)

    @property
    def replays_per_loop(self) -> float | None:
        return self.replays / self.loops if self.loops else None

    @property
    def draft_step_ms(self) -> list[float]:
        """Time per draft decode step: each loop covers k-1 steps."""
        steps = max(self.k - 1, 1)
        return [ms / steps for ms in self.loop_ms]


@contextmanager
def draft_loop(model_runner: Any) -> Iterator[DraftLoop]:
    import torch

    spec = getattr(model_runner, "speculator", None)
    if spec is None or not hasattr(spec, "decode_cudagraph_manager"):
        raise RuntimeError(
            f"{type(model_runner).__name__} has no autoregressive speculator: the fused draft graph lives in "
            "model runner v2 (VLLM_USE_V2_MODEL_RUNNER=1)"
        )
    rec = DraftLoop(k=int(spec.num_speculative_steps))
    name = "_fused_multi_step_decode" if hasattr(spec, "_fused_multi_step_decode") else "_multi_step_decode"
    rec.fused = name == "_fused_multi_step_decode" and bool(getattr(spec, "use_fused_multi_step_decode", True))

    def count_replay(orig: Any) -> Any:
        def run_fullgraph(*a: Any, **kw: Any) -> Any:
            rec.replays += 1
            return orig(*a, **kw)

        return run_fullgraph

    def time_loop(orig: Any) -> Any:
        def loop(*a: Any, **kw: Any) -> Any:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            with torch.profiler.record_function("stackgate.draft_decode"):
                out = orig(*a, **kw)
            end.record()
            rec.loops += 1
            rec.events.append((start, end))
            return out

        return loop

    def count_propose(orig: Any) -> Any:
        def propose(*a: Any, **kw: Any) -> Any:
            rec.proposes += 1
            return orig(*a, **kw)

        return propose

    with ExitStack() as stack:
        stack.enter_context(patched(spec.decode_cudagraph_manager, "run_fullgraph", count_replay))
        stack.enter_context(patched(spec, name, time_loop))
        stack.enter_context(patched(spec, "propose", count_propose))
        yield rec


LAUNCH_EVENTS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")


def launches_in_windows(prof: Any, window: str = "stackgate.draft_decode") -> tuple[int, int, int]:
    """(kernel launches, graph launches, windows) inside the named profiler ranges."""
    events = list(prof.events())
    spans = [(e.time_range.start, e.time_range.end) for e in events if e.name == window]

    def inside(e: Any) -> bool:
        return any(s <= e.time_range.start and e.time_range.end <= t for s, t in spans)

    kernels = sum(1 for e in events if e.name in LAUNCH_EVENTS and inside(e))
    graphs = sum(1 for e in events if e.name == "cudaGraphLaunch" and inside(e))
    return kernels, graphs, len(spans)


# --- CUDA-graph dispatch: which steps ran eagerly (#46514 MTP under full graphs) ------------------------


@dataclass
class Dispatches:
    by_dispatcher: dict[int, Counter] = field(default_factory=dict)
    draft_proposes: int = 0
    draft_eager: int = 0

    def decode_modes(self, dispatcher: Any) -> Counter:
        return self.by_dispatcher.get(id(dispatcher), Counter())


@contextmanager
def dispatches(model_runner: Any) -> Iterator[Dispatches]:
    """Record the CUDA-graph mode chosen for each uniform-decode step, and drafts that replayed no graph."""
    import torch
    from vllm.v1.cudagraph_dispatcher import CudagraphDispatcher

    rec = Dispatches()

    def dispatch(orig: Any) -> Any:
        def wrapped(self: Any, num_tokens: int, uniform_decode: bool = False, *a: Any, **kw: Any) -> Any:
            mode, desc = orig(self, num_tokens, uniform_decode, *a, **kw)
            if uniform_decode:
                rec.by_dispatcher.setdefault(id(self), Counter())[str(getattr(mode, "name", mode))] += 1
            return mode, desc

        return wrapped

    replays = {"n": 0}

    def count_replay(orig: Any) -> Any:
        def replay(graph: Any, *a: Any, **kw: Any) -> Any:
            replays["n"] += 1
            return orig(graph, *a, **kw)

        return replay

    def propose(orig: Any) -> Any:
        def wrapped(*a: Any, **kw: Any) -> Any:
            before = replays["n"]
            out = orig(*a, **kw)
            rec.draft_proposes += 1
            rec.draft_eager += int(replays["n"] == before)
            return out

        return wrapped

    with ExitStack() as stack:
        stack.enter_context(patched(CudagraphDispatcher, "dispatch", dispatch))
        stack.enter_context(patched(torch.cuda.CUDAGraph, "replay", count_replay))
        breakable = _breakable_capture()
        if breakable is not None:  # its segments replay through bound methods taken at capture, unseen above
            stack.enter_context(patched(breakable, "replay", count_replay))
        drafter = getattr(model_runner, "drafter", None)
        if drafter is not None and hasattr(drafter, "propose"):
            stack.enter_context(patched(drafter, "propose", propose))
        yield rec


def _breakable_capture() -> Any:
    """vLLM's breakable CUDA graph (DeepSeek-V4, MiniMax-M3: `VLLM_USE_BREAKABLE_CUDAGRAPH`, vLLM 0.26+), whose
    `replay` runs graph segments bound to `torch.cuda.CUDAGraph.replay` when they were captured; else None."""
    try:
        from vllm.compilation.breakable_cudagraph import BreakableCUDAGraphCapture
    except ImportError:
        return None
    return BreakableCUDAGraphCapture


# --- timing helpers ---------------------------------------------------------------------------------


def decode_tok_s(outputs: list[Any]) -> float | None:
    """Decode throughput from the engine's own per-request timestamps (needs disable_log_stats=False)."""
    firsts, lasts, tokens = [], [], 0
    for o in outputs:
        m = getattr(o, "metrics", None)
        if m is None or not getattr(m, "first_token_ts", 0) or not getattr(m, "last_token_ts", 0):
            return None
        firsts.append(m.first_token_ts)
        lasts.append(m.last_token_ts)
        tokens += max(int(m.num_generation_tokens) - 1, 0)
    span = max(lasts) - min(firsts)
    return tokens / span if span > 0 else None


def wall_ms(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t0) * 1000.0, out
