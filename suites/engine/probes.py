"""In-process probes on a running vLLM engine (VLLM_ENABLE_V1_MULTIPROCESSING=0).

Each probe patches one well-named vLLM method while it is active and restores it on exit. They read
what the acceptance criteria ask for: graph replays per draft step, eager decode steps, the attention
output of the first layer on a chosen step, indexer scoring calls.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

_LAYER = re.compile(r"layers\.(\d+)\.")


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


# --- MRV2 autoregressive speculator: draft loops and their graph replays (#46849) -----------------------


@dataclass
class DraftLoop:
    """Counts per propose: draft-decode loops, FULL graph replays inside them, CUDA-event time of each loop."""

    k: int = 0
    loops: int = 0
    replays: int = 0
    proposes: int = 0
    loop_ms: list[float] = field(default_factory=list)
    fused: bool = False

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
            end.synchronize()
            rec.loops += 1
            rec.loop_ms.append(start.elapsed_time(end))
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


# --- MLA attention outputs of the first layer on chosen steps (numerics vs a reference) ----------------


@dataclass
class Capture:
    rows: Any = None  # float32 CPU tensor of the first matching step's first-layer attention output
    steps: list[dict[str, int]] = field(default_factory=list)
    calls: int = 0  # layer-0 MLA attention calls seen on any step: 0 means the model's attention is not watched

    def unseen(self, step: str) -> str:
        """Why no `step` was captured: the model's attention never came by, or the workload made no such step."""
        if not self.calls:
            return (f"no {step} step was observed: the model's attention never ran MLAAttention.forward_impl (a "
                    "path of its own, which this probe does not watch)")  # fmt: skip
        return f"no {step} step was observed: the workload did not exercise that path"


@contextmanager
def mla_layer0_output(select: Callable[[Any], slice | None]) -> Iterator[Capture]:
    """Capture layer 0's MLA attention output (after the value up-projection) on the first step where
    `select(attn_metadata)` returns a row slice. Runs on eager and piecewise steps (FULL replays run no
    Python), which is where prefills and mixed batches go.

    Two places compute it: `MLAAttention.forward_impl` (every MLA model up to vLLM 0.28; from 0.29 only
    DeepSeek-V3.2's dense path), and from vLLM 0.29 DeepSeek-V3.2's own layer, whose sparse path calls its
    backend from `DeepseekV32Attention._sparse_indexer_and_attn` (output last) without forward_impl."""
    from vllm.model_executor.layers.attention.mla_attention import MLAAttention

    cap = Capture()

    def take(layer: Any, md: Any, output: Any) -> None:
        m = _LAYER.search(getattr(layer, "layer_name", ""))
        if not (m and m.group(1) == "0"):
            return
        cap.calls += 1
        if cap.rows is None and md is not None and output is not None:
            rows = select(md)
            if rows is not None:
                cap.rows = output[rows].float().cpu()
                cap.steps.append(
                    {"decodes": int(md.num_decodes), "prefills": int(md.num_prefills),
                     "decode_tokens": int(md.num_decode_tokens), "tokens": int(md.num_actual_tokens)}
                )  # fmt: skip

    def make(orig: Any) -> Any:
        def forward_impl(self: Any, q: Any, k_c: Any, k_pe: Any, kv_cache: Any, md: Any, *a: Any, **kw: Any) -> Any:
            out = orig(self, q, k_c, k_pe, kv_cache, md, *a, **kw)
            take(self, md, kw.get("output", a[0] if a else None))
            return out

        return forward_impl

    def make_v32(orig: Any) -> Any:
        def sparse_indexer_and_attn(self: Any, *a: Any, **kw: Any) -> Any:
            out = orig(self, *a, **kw)
            take(self, _layer_metadata(self.layer_name), kw.get("output", a[-1] if a else None))
            return out

        return sparse_indexer_and_attn

    with ExitStack() as stack:
        stack.enter_context(patched(MLAAttention, "forward_impl", make))
        v32 = _deepseek_v32_attention()
        if v32 is not None:
            stack.enter_context(patched(v32, "_sparse_indexer_and_attn", make_v32))
        yield cap


def _deepseek_v32_attention() -> Any:
    """vLLM 0.29+'s DeepSeek-V3.2 attention layer class, where it has its own sparse path; else None."""
    try:
        from vllm.models.deepseek_v32.attention import DeepseekV32Attention
    except ImportError:
        return None
    return DeepseekV32Attention if hasattr(DeepseekV32Attention, "_sparse_indexer_and_attn") else None


def _layer_metadata(layer_name: str) -> Any:
    """The attention metadata of one layer in the current step (vLLM's forward context)."""
    from vllm.forward_context import get_forward_context

    md = get_forward_context().attn_metadata
    if isinstance(md, dict):
        return md.get(layer_name)
    return md if hasattr(md, "num_actual_tokens") else None  # a micro-batched step (a list) is not watched


def pure_prefill(md: Any) -> slice | None:
    return slice(0, int(md.num_actual_tokens)) if md.num_prefills > 0 and md.num_decode_tokens == 0 else None


def mixed_prefill_rows(md: Any) -> slice | None:
    """The prefill rows of a mixed batch (decodes are ordered first)."""
    if md.num_prefills > 0 and md.num_decodes > 0:
        return slice(int(md.num_decode_tokens), int(md.num_actual_tokens))
    return None


def rel_err(a: Any, b: Any) -> float:
    """‖a − b‖ / ‖b‖ over float32 copies; NaN never passes a tolerance."""
    import torch

    if a is None or b is None or a.shape != b.shape:
        return float("nan")
    denom = torch.linalg.vector_norm(b).item()
    return torch.linalg.vector_norm(a - b).item() / denom if denom else float("nan")


# --- sparse indexer: scoring calls (#48407; the #52512 guard is engine.topk_guard) ---------------------


@dataclass
class Indexer:
    scoring_calls: int = 0
    topk_calls: int = 0


@contextmanager
def indexer() -> Iterator[Indexer]:
    """Count prefill top-k scoring (fp8_fp4_mqa_logits, top_k_per_row_prefill)."""
    import vllm._custom_ops as vops
    from vllm.model_executor.layers import sparse_attn_indexer as sai

    rec = Indexer()

    def counting(attr: str) -> Callable[[Any], Any]:
        def make(orig: Any) -> Any:
            def wrapped(*a: Any, **kw: Any) -> Any:
                setattr(rec, attr, getattr(rec, attr) + 1)
                return orig(*a, **kw)

            return wrapped

        return make

    with ExitStack() as stack:
        stack.enter_context(patched(sai, "fp8_fp4_mqa_logits", counting("scoring_calls")))
        stack.enter_context(patched(vops, "top_k_per_row_prefill", counting("topk_calls")))
        yield rec


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
