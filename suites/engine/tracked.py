"""A tracked change's facts inside the image, by the names its change file gives them (stack/changes/<id>.yaml):
`probe`, how its presence is found in the vLLM under test, and `engine_options`, what its rows need of the engine
beyond their axes. rows.json carries both names on each row; `engine.presence` and `engine.in_process` read them here,
never by change id.

The host validates a change file's names against this module's text, read and never imported (`ci.stack.suite_names`:
the suites never import `ci/`, and the host never runs the suites' code), so PROBES and OPTIONS stay dict displays
with literal string keys; `tests/unit/test_change_facts.py` holds the two readings equal. Standard library only at
import: a probe imports vllm itself, when it runs.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# A probe reads the installed vllm package (its directory, or None where none is installed) and says whether the
# change is there and what it looked for, and where.
Probe = Callable[[Path | None], tuple[bool, str]]


def source(root: Path | None, rel: str) -> str:
    """The text of vllm/<rel>, or "" where the file is not there."""
    path = root / rel if root else None
    return path.read_text() if path and path.is_file() else ""


def eagle_spec_decode_warmup(root: Path | None) -> tuple[bool, str]:
    """Adds model_executor/warmup/eagle_spec_decode_warmup.py and calls it from kernel_warmup (#48804)."""
    module = "model_executor/warmup/eagle_spec_decode_warmup.py"
    present = bool(source(root, module)) and "eagle_spec_decode_warmup" in source(
        root, "model_executor/warmup/kernel_warmup.py"
    )
    return present, f"vllm/{module}, wired into vllm/model_executor/warmup/kernel_warmup.py"


def kv_zeroer_warmup(root: Path | None) -> tuple[bool, str]:
    """Warms the runner-owned Triton kernels before the first request (#49903): the KV-block zeroer gains a warm-up
    (KVBlockZeroer.warmup in vllm/v1/worker/utils.py) that kernel_warmup calls, beside the slot-mapping kernel for the
    runner's real block tables; on #47451's JIT warm-up infrastructure (vllm/model_executor/warmup/jit_warmup.py).
    The call moved after the merge (kernel_warmup in 0.27-0.33, the GPU worker's warm-up from 0.34): either counts."""
    callers = ("model_executor/warmup/kernel_warmup.py", "v1/worker/gpu/warmup.py")
    called = next((c for c in callers if "zeroer.warmup(" in source(root, c)), None)
    present = (
        "def warmup(self, num_kv_blocks" in source(root, "v1/worker/utils.py")
        and called is not None
        and bool(source(root, "model_executor/warmup/jit_warmup.py"))
    )
    return (
        present,
        f"KVBlockZeroer.warmup in vllm/v1/worker/utils.py, called from vllm/{called or callers[0]}, "
        "and vllm/model_executor/warmup/jit_warmup.py (#47451)",
    )


def fused_ar_graph(root: Path | None) -> tuple[bool, str]:
    """All k-1 draft decodes captured in one graph (_fused_multi_step_decode), attention metadata updated in place
    between steps (update_draft_decode_metadata) (#46849). The speculator's module moved after the merge
    (spec_decode/autoregressive/ in 0.28-0.31, spec_decode/target_dependent_ar/ from 0.32): any speculator of model
    runner v2 that defines it counts."""
    specs = sorted(root.glob("v1/worker/gpu/spec_decode/*/speculator.py")) if root else []
    fused = [p for p in specs if "def _fused_multi_step_decode" in p.read_text()]
    present = bool(fused) and "update_draft_decode_metadata" in source(root, "v1/attention/backend.py")
    where = f"vllm/{fused[0].relative_to(root)}" if fused and root else "vllm/v1/worker/gpu/spec_decode/*/speculator.py"
    return present, (
        f"_fused_multi_step_decode in {where} and update_draft_decode_metadata in vllm/v1/attention/backend.py"
    )


def fp8_ds_mla_decode_lse(root: Path | None) -> tuple[bool, str]:
    """FlashMLASparseImpl returns the LSE for decode (DCP) on the fp8_ds_mla mixed-batch path (#46514)."""
    from vllm.v1.attention.backends.mla import flashmla_sparse as fms

    lse = inspect.getattr_static(fms.FlashMLASparseImpl, "can_return_lse_for_decode", False) is True
    dcp_code = hasattr(fms, "_neutralize_rows_without_local_kv") or hasattr(fms, "triton_filter_and_convert_dcp_index")
    return (
        lse and dcp_code,
        "FlashMLASparseImpl.can_return_lse_for_decode = True and the DCP index filtering in "
        "vllm/v1/attention/backends/mla/flashmla_sparse.py",
    )


def dense_prefill_skip(root: Path | None) -> tuple[bool, str]:
    """MLACommonPrefillMetadata.use_dense_mha, which lets the indexer skip top-k scoring (#48407)."""
    from vllm.model_executor.layers.attention.mla_attention import MLACommonPrefillMetadata

    present = "use_dense_mha" in {f.name for f in dataclasses.fields(MLACommonPrefillMetadata)}
    return present, "MLACommonPrefillMetadata.use_dense_mha in vllm/model_executor/layers/attention/mla_attention.py"


def nothing_imported(root: Path | None) -> tuple[bool, str]:
    """A change file that imports nothing (the composition rows: whether features of the installed vLLM compose; the
    harness's self-test): nothing to look for. The host refuses it for an imported change."""
    return True, "no imported change: features of the vLLM under test, as installed (the row records its version)"


# A change file's `probe` -> its probe.
PROBES: dict[str, Probe] = {
    "eagle-spec-decode-warmup": eagle_spec_decode_warmup,
    "kv-zeroer-warmup": kv_zeroer_warmup,
    "fused-ar-graph": fused_ar_graph,
    "fp8-ds-mla-decode-lse": fp8_ds_mla_decode_lse,
    "dense-prefill-skip": dense_prefill_skip,
    "nothing-imported": nothing_imported,
}


@dataclass(frozen=True)
class EngineOptions:
    """What a change's rows need of the engine beyond their axes: the warm-up its reference run turns into no-ops
    (`engine.in_process.disable_warmup`), for a tolerance set against the same build without it."""

    # vllm.model_executor.warmup.<module>: each one's warm-up functions, and the names kernel_warmup imported of them
    warmup_modules: tuple[str, ...] = ()
    warmup_methods: tuple[tuple[str, str, str], ...] = ()  # (module, class, method)


# A change file's `engine_options` -> its options ("default", where the file names none: nothing beyond the axes).
OPTIONS: dict[str, EngineOptions] = {
    "default": EngineOptions(),
    # the spec-decode warm-ups (#48804)
    "eagle-spec-decode-warmup-off": EngineOptions(
        warmup_modules=("eagle_spec_decode_warmup", "dflash_spec_decode_warmup"),
    ),
    # the runner-owned kernels (slot mapping, KV-block zeroer) and what #47451's enable_jit_warmup gates (#49903)
    "runner-kernel-warmup-off": EngineOptions(
        warmup_modules=("v1_block_table_warmup", "fa4_cutedsl_warmup", "sparse_mla_triton_warmup", "jit_warmup"),
        warmup_methods=(("vllm.v1.worker.utils", "KVBlockZeroer", "warmup"),),
    ),
}
