"""In-process probes on a running vLLM engine's MLA attention (VLLM_ENABLE_V1_MULTIPROCESSING=0): the first layer's
attention output on chosen steps (numerics against a reference), and the sparse indexer's scoring calls."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from engine.patching import patched

_LAYER = re.compile(r"layers\.(\d+)\.")


# --- MLA attention outputs of the first layer on chosen steps (numerics vs a reference) ----------------


@dataclass
class Capture:
    rows: Any = None  # float32 CPU tensor of the first matching step's first-layer attention output
    steps: list[dict[str, int]] = field(default_factory=list)
    calls: int = 0  # layer-0 MLA attention calls seen on any step: 0 means the model's attention is not watched

    def unseen(self, step: str) -> str:
        """Why no `step` was captured: the model's attention never came by, or the workload made no such step."""
        if not self.calls:
            return (
                f"no {step} step was observed: the model's attention never ran MLAAttention.forward_impl (a "
                "path of its own, which this probe does not watch)"
            )
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
                    {
                        "decodes": int(md.num_decodes),
                        "prefills": int(md.num_prefills),
                        "decode_tokens": int(md.num_decode_tokens),
                        "tokens": int(md.num_actual_tokens),
                    }
                )

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


def dense_prefill_off(model: Any) -> str:
    """Why the model's sparse MLA layers take no dense-MHA prefill, or "": vllm#52512 turned it off for the
    DeepSeek-V3.2/GLM-5.2 layer (`DeepseekV32Attention.supports_dense_mha_prefill = False`, read at the layer), and
    a backend without that path says so on its implementation (`impl.supports_dense_mha_prefill`). A short prefill
    of such a layer is scored: #48407's skip does not apply, by design."""
    for module in model.modules():
        impl = getattr(module, "impl", None)
        if not getattr(impl, "is_sparse", False):
            continue
        if getattr(type(module), "supports_dense_mha_prefill", True) is False:
            return f"{type(module).__name__}.supports_dense_mha_prefill = False"
        if getattr(impl, "supports_dense_mha_prefill", True) is False:
            return f"{type(impl).__name__}.supports_dense_mha_prefill = False"
    return ""
