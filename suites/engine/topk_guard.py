"""The #52512 guard: with the all -1 top-k condition forced, no sparse-attention read may consume an all -1 row.

vllm#52512: GLM-5.2 degenerated into repeated tokens after its sparse attention read a top-k buffer that held
only -1 ("no token"): a dense short prefill (#48407) had skipped the indexer, and a layer that reuses a full
layer's top-k (IndexShare) read the rows nobody wrote. A real token always attends at least to itself, so an
all -1 row read by sparse attention is the bug, whatever the weights.

Forcing: before every engine step, every top-k indices buffer the model holds is filled with -1. A row no
indexer writes during the step then reads as all -1; without it, a buffer left from an earlier, longer
request can hold stale, plausible indices and the bad read goes unseen.

Watching: the sparse-MLA implementation of the row's backend, resolved through vLLM's backend registry
(`AttentionBackendEnum[name].get_class().get_impl_cls()`); its `forward_mqa` reads
`topk_indices_buffer[:num_tokens]` (FLASHMLA_SPARSE, FLASHINFER_MLA_SPARSE, ROCM_AITER_MLA_SPARSE in vLLM
0.26.0). The model's attention layers must run that very method: a backend, or a model with attention of its
own (DeepSeek-V4's layers read the buffer themselves), that cannot be watched so raises CannotWatch before
anything is generated, naming what holds the buffer, and the row fails saying why, never "0 bad reads". A step
that replays a FULL CUDA graph runs no Python, and a short prefill may take dense MHA and read no top-k at all,
so the forced steps run without CUDA graphs (the runner's graph dispatcher is told NONE; a runner without one is
refused), and a guard that saw no sparse read says so: the row fails, as a guard that watched nothing proves
nothing.

Broken on purpose (`break_reads`, the suite's STACKGATE_BREAK_TOPK=1): every sparse read first throws away what
the indexers wrote, so each top-k row reads as all -1, which is #52512's bad read made certain. A row run so must
fail, naming the reads: that is how the guard is shown able to fail on the real kernel.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from engine.probes import patched

BUFFER = "topk_indices_buffer"
# The sparse-MLA backends whose implementation's forward_mqa reads BUFFER[:num_tokens], read in vLLM 0.26.0's
# source (v1/attention/backends/mla/{flashmla_sparse,flashinfer_mla_sparse,rocm_aiter_mla_sparse}.py). A sparse
# backend the stack adds is checked against the source and listed here before its rows carry the guard.
READ_BY = ("FLASHMLA_SPARSE", "FLASHINFER_MLA_SPARSE", "ROCM_AITER_MLA_SPARSE")
SHOWN = 3  # row indices kept per bad read, for the message
ENV_BREAK = "STACKGATE_BREAK_TOPK"  # "1": the guard's positive control (module docstring); never set in CI rows


class CannotWatch(Exception):
    """The guard cannot watch this backend's sparse reads, or cannot force the condition; it says which."""


@dataclass
class TopkReads:
    backend: str
    impl: str  # the watched implementation class
    layers: int = 0  # attention layers that run it
    reads: int = 0  # sparse reads of the top-k buffer seen
    forced_steps: int = 0  # engine steps that began with every top-k buffer all -1
    minus_one: list[dict[str, int | list[int]]] = field(default_factory=list)  # one entry per read with such rows
    broken: bool = False  # the buffer was broken on purpose before every read (the guard's own positive control)

    def read(self, buf: Any, tokens: int) -> None:
        """One sparse read of the buffer's first `tokens` rows."""
        self.reads += 1
        rows = minus_one_rows(buf[:tokens])
        if rows:
            self.minus_one.append({"read": self.reads, "tokens": tokens, "rows": len(rows), "first_rows": rows[:SHOWN]})

    def to_json(self) -> dict[str, object]:
        return {
            "backend": self.backend,
            "impl": self.impl,
            "layers": self.layers,
            "reads": self.reads,
            "forced_steps": self.forced_steps,
            "all_minus_one_reads": self.minus_one[:SHOWN],
            "broken_on_purpose": self.broken,
        }


def broken_on_purpose() -> bool:
    """The guard's positive control is asked for: the top-k buffer is broken before every sparse read."""
    return os.environ.get(ENV_BREAK) == "1"


def minus_one_rows(rows: Any) -> list[int]:
    """Indices of the rows that are all -1: a torch tensor [tokens, topk], or lists of ints."""
    if hasattr(rows, "eq"):
        if rows.shape[0] == 0 or rows.shape[-1] == 0:
            return []
        return rows.eq(-1).all(dim=-1).nonzero().flatten().tolist()
    return [i for i, row in enumerate(rows) if len(row) and all(v == -1 for v in row)]


def _vllm_backend(name: str) -> type:
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    return AttentionBackendEnum[name].get_class()


def impl_class(backend: str, registry: Callable[[str], type] = _vllm_backend) -> type:
    """The implementation whose `forward_mqa` reads the top-k buffer for `backend`, or CannotWatch."""
    try:
        impl = registry(backend).get_impl_cls()
    except Exception as exc:  # an unknown name, a backend not built for this platform, no vLLM at all
        raise CannotWatch(f"cannot watch backend {backend}: its implementation does not resolve ({exc})") from exc
    if not callable(getattr(impl, "forward_mqa", None)):
        raise CannotWatch(
            f"cannot watch backend {backend}: {impl.__qualname__} has no forward_mqa, the sparse read the guard watches"
        )
    return impl


def buffers(model: Any) -> list[Any]:
    """Every distinct top-k indices buffer held by the model's modules (the indexers and the shared layers)."""
    found: dict[int, Any] = {}
    for module in model.modules():
        buf = getattr(module, BUFFER, None)
        if buf is not None and hasattr(buf, "fill_"):
            found.setdefault(id(buf), buf)
    return list(found.values())


def _watched_layers(model: Any, impl: type) -> int:
    """How many attention layers run `impl.forward_mqa` as it is now (a subclass that overrides it is not watched);
    CannotWatch naming what the layers run where none does."""
    runs = [type(m.impl) for m in model.modules() if hasattr(getattr(m, "impl", None), "forward_mqa")]
    watched = [cls for cls in runs if getattr(cls, "forward_mqa", None) is impl.forward_mqa]
    if not watched:
        seen = ", ".join(sorted({cls.__qualname__ for cls in runs})) or "no sparse-attention implementation"
        holders = sorted({type(m).__name__ for m in model.modules() if getattr(m, BUFFER, None) is not None})
        held = f"; its {BUFFER} is held by {', '.join(holders)}: attention of the model's own" if holders else ""
        raise CannotWatch(
            f"cannot watch the sparse reads: the model's attention layers run {seen}, not "
            f"{impl.__qualname__}.forward_mqa{held}"
        )
    return len(watched)


def _capturing() -> bool:
    """A CUDA graph is being captured: reading the buffer back would break the capture."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available() and torch.cuda.is_current_stream_capturing())


def _vllm_graph_none() -> Any:
    from vllm.config.compilation import CUDAGraphMode

    return CUDAGraphMode.NONE


def _without_graphs(model_runner: Any, none: Callable[[], Any]) -> Any:
    """The forced steps run eagerly: every dispatch of the runner's CUDA-graph dispatcher may choose NONE only."""
    dispatcher = getattr(model_runner, "cudagraph_dispatcher", None)
    if not callable(getattr(dispatcher, "dispatch", None)):
        raise CannotWatch(
            f"cannot run the forced steps without CUDA graphs: {type(model_runner).__name__} has no "
            "cudagraph_dispatcher, and a graph replays its sparse reads unseen"
        )
    eager = {none()}

    def make(orig: Any) -> Any:
        def dispatch(*a: Any, **kw: Any) -> Any:
            return orig(*a, **{**kw, "valid_modes": eager, "invalid_modes": None})

        return dispatch

    return patched(dispatcher, "dispatch", make)


def _tokens(q: Any, md: Any) -> int:
    n = getattr(md, "num_actual_tokens", None)
    return int(n) if n is not None else int((q[0] if isinstance(q, tuple) else q).shape[0])


@contextmanager
def watch(
    backend: str,
    model_runner: Any,
    *,
    registry: Callable[[str], type] = _vllm_backend,
    graph_none: Callable[[], Any] = _vllm_graph_none,
    break_reads: bool = False,
) -> Iterator[TopkReads]:
    """Force all -1 top-k buffers at every step and record each sparse read of an all -1 row; with `break_reads`,
    also empty the buffer right before every read (the guard's positive control: every read must then be caught)."""
    impl = impl_class(backend, registry)
    forced = buffers(model_runner.model)
    if not forced:
        raise CannotWatch(
            f"cannot force the #52512 condition: {type(model_runner.model).__name__} holds no "
            f"{BUFFER} (not a sparse-indexer model?)"
        )
    layers = _watched_layers(model_runner.model, impl)
    rec = TopkReads(backend=backend, impl=impl.__qualname__, layers=layers, broken=break_reads)

    def force(orig: Any) -> Any:
        def execute_model(*a: Any, **kw: Any) -> Any:
            for buf in forced:
                buf.fill_(-1)
            rec.forced_steps += 1
            return orig(*a, **kw)

        return execute_model

    def read(orig: Any) -> Any:
        def forward_mqa(self: Any, q: Any, kv_cache: Any, md: Any, layer: Any) -> Any:
            buf = getattr(self, BUFFER, None)
            if buf is None:
                raise CannotWatch(f"cannot watch backend {backend}: {type(self).__qualname__} holds no {BUFFER}")
            if not _capturing():
                if break_reads:
                    buf.fill_(-1)  # what the indexers wrote is lost: every row reads as "no token"
                rec.read(buf, _tokens(q, md))
            return orig(self, q, kv_cache, md, layer)

        return forward_mqa

    with ExitStack() as stack:
        stack.enter_context(_without_graphs(model_runner, graph_none))
        stack.enter_context(patched(impl, "forward_mqa", read))
        stack.enter_context(patched(model_runner, "execute_model", force))
        yield rec
