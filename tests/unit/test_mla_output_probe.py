"""The first-layer MLA output probe (numerics against a reference backend) watches both places vLLM computes
that output: `MLAAttention.forward_impl` (vLLM <= 0.28, and DeepSeek-V3.2's dense path after), and from 0.29
DeepSeek-V3.2's own layer, whose sparse path calls its backend from `_sparse_indexer_and_attn` without
forward_impl. On the H200 with vLLM 0.29.0 the probe saw nothing on the sparse path, so #46514's and #48407's
rows could not compare against their reference. Plain objects stand in for vLLM's modules here."""

from __future__ import annotations

import sys
import types

import pytest
from support.paths import SUITES

sys.path.insert(0, str(SUITES))

from engine import probes


class Out:
    """An output buffer of rows, sliced and copied like the tensor it stands for."""

    def __init__(self, rows: list[float]) -> None:
        self.rows = rows

    def __getitem__(self, index: slice) -> Out:
        return Out(self.rows[index])

    def float(self) -> Out:
        return self

    def cpu(self) -> Out:
        return self


class Metadata:
    def __init__(self, decodes: int, prefills: int, decode_tokens: int, tokens: int) -> None:
        self.num_decodes, self.num_prefills = decodes, prefills
        self.num_decode_tokens, self.num_actual_tokens = decode_tokens, tokens


@pytest.fixture
def vllm(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """vLLM 0.29's layout: MLAAttention, DeepseekV32Attention(MLAAttention), the forward context."""

    class MLAAttention:
        def __init__(self, layer_name: str) -> None:
            self.layer_name = layer_name

        def forward_impl(self, q, k_c, k_pe, kv_cache, md, output):
            output.rows[:] = [1.0] * len(output.rows)

    class DeepseekV32Attention(MLAAttention):
        def _sparse_indexer_and_attn(self, positions, q_c, q_nope, q_pe, index_q, index_k, weights, kv_c, k_pe,
                                     ql_nope, mqa_q, output):  # fmt: skip
            output.rows[:] = [2.0] * len(output.rows)  # the backend's forward_mqa, called directly

    context = types.SimpleNamespace(attn_metadata={})
    modules = {
        "vllm": types.ModuleType("vllm"),
        "vllm.model_executor.layers.attention.mla_attention": types.SimpleNamespace(MLAAttention=MLAAttention),
        "vllm.models.deepseek_v32.attention": types.SimpleNamespace(DeepseekV32Attention=DeepseekV32Attention),
        "vllm.forward_context": types.SimpleNamespace(get_forward_context=lambda: context),
    }
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    return types.SimpleNamespace(mla=MLAAttention, v32=DeepseekV32Attention, context=context)


def _sparse_step(layer, context, md: Metadata, out: Out) -> None:
    context.attn_metadata = {layer.layer_name: md}
    layer._sparse_indexer_and_attn(*[None] * 11, out)


def test_the_sparse_path_of_deepseek_v32_is_watched(vllm) -> None:
    layer0, layer1 = vllm.v32("model.layers.0.self_attn.attn"), vllm.v32("model.layers.1.self_attn.attn")
    mixed = Metadata(decodes=2, prefills=1, decode_tokens=2, tokens=5)
    with probes.mla_layer0_output(probes.mixed_prefill_rows) as cap:
        _sparse_step(layer1, vllm.context, mixed, Out([0.0] * 5))  # another layer: not taken
        _sparse_step(layer0, vllm.context, Metadata(2, 0, 2, 2), Out([0.0] * 2))  # no prefill: not taken
        _sparse_step(layer0, vllm.context, mixed, Out([0.0] * 5))
    assert cap.rows.rows == [2.0, 2.0, 2.0]  # the prefill rows, after the decodes
    assert cap.steps == [{"decodes": 2, "prefills": 1, "decode_tokens": 2, "tokens": 5}]
    assert vllm.v32.__dict__["_sparse_indexer_and_attn"].__name__ == "_sparse_indexer_and_attn"  # restored


def test_forward_impl_is_still_watched_and_one_step_is_taken_once(vllm) -> None:
    layer0 = vllm.v32("model.layers.0.self_attn.attn")
    md = Metadata(decodes=0, prefills=1, decode_tokens=0, tokens=3)
    with probes.mla_layer0_output(probes.pure_prefill) as cap:
        layer0.forward_impl(None, None, None, None, md, Out([0.0] * 3))  # the dense path (or vLLM <= 0.28)
        _sparse_step(layer0, vllm.context, md, Out([0.0] * 3))  # a later step: the first one was taken
    assert cap.rows.rows == [1.0, 1.0, 1.0] and len(cap.steps) == 1


def test_a_vllm_without_deepseek_v32s_own_layer_patches_forward_impl_only(vllm, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm.models.deepseek_v32.attention", None)  # vLLM <= 0.28: no such module
    layer0 = vllm.mla("model.layers.0.self_attn.attn")
    with probes.mla_layer0_output(probes.pure_prefill) as cap:
        layer0.forward_impl(None, None, None, None, Metadata(0, 1, 0, 2), Out([0.0] * 2))
    assert cap.rows.rows == [1.0, 1.0]


def test_a_step_never_captured_says_whether_the_models_attention_came_by(vllm) -> None:
    with probes.mla_layer0_output(probes.mixed_prefill_rows) as cap:
        pass  # DeepSeek-V4 in vLLM 0.26.0: its layers attend on a path of their own, never through forward_impl
    assert cap.rows is None and cap.calls == 0
    assert "never ran MLAAttention.forward_impl" in cap.unseen("mixed prefill+decode")
    layer0 = vllm.mla("model.layers.0.self_attn.attn")
    with probes.mla_layer0_output(probes.mixed_prefill_rows) as cap:
        layer0.forward_impl(None, None, None, None, Metadata(0, 1, 0, 2), Out([0.0] * 2))  # a prefill, not mixed
    assert cap.rows is None and cap.calls == 1
    assert cap.unseen("mixed prefill+decode") == (
        "no mixed prefill+decode step was observed: the workload did not exercise that path"
    )


def test_a_layer_whose_dense_prefill_52512_turned_off_is_named() -> None:
    """vllm#52512 sets `supports_dense_mha_prefill = False` on DeepSeek-V3.2's (and GLM-5.2's) layer: its short
    prefills are scored, and the #48407 row expects scoring there. A layer without the attribute (before #52512), or
    a dense layer, says nothing; a sparse backend without the dense path says so on its implementation."""

    class SparseImpl:
        is_sparse = True

    class DenseImpl:
        is_sparse = False
        supports_dense_mha_prefill = False

    class MLAAttention:
        def __init__(self, impl: object) -> None:
            self.impl = impl

    class DeepseekV32Attention(MLAAttention):
        supports_dense_mha_prefill = False

    class NoDensePath(SparseImpl):
        supports_dense_mha_prefill = False

    class Model:
        def __init__(self, *layers: object) -> None:
            self.layers = layers

        def modules(self):
            return iter((self, *self.layers))

    assert probes.dense_prefill_off(Model(MLAAttention(SparseImpl()), MLAAttention(DenseImpl()))) == ""
    fixed = Model(MLAAttention(DenseImpl()), DeepseekV32Attention(SparseImpl()))
    assert probes.dense_prefill_off(fixed) == "DeepseekV32Attention.supports_dense_mha_prefill = False"
    assert (
        probes.dense_prefill_off(Model(MLAAttention(NoDensePath()))) == "NoDensePath.supports_dense_mha_prefill = False"
    )
