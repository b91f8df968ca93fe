"""Is the imported change in the vLLM under test? Each check names the code it looked for.

A row whose change is absent fails with "change absent in vLLM <version>" rather than passing or
skipping: stock vLLM lacks some of the fork's ports, and that must show in the report.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import inspect
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Presence:
    change: str
    present: bool
    evidence: str  # what was looked for, and where

    def message(self) -> str:
        return f"change #{self.change} absent in {build_name()}: {self.evidence}"


def build_name() -> str:
    """The vLLM under test as a reader names it: a fork build by its fork, ref, what it was built without or the port
    tried on it, and its commit ("fork demo-fork main without #46849 (ffa236ab7621)"), a stock release by its
    version."""
    root = vllm_root()
    try:
        from harness import vllm_build

        doc = vllm_build.read_manifest(root) if root is not None else None
    except (ImportError, OSError, ValueError):
        doc = None
    if not doc:
        return f"vLLM {vllm_version()}"
    fork = doc.get("fork") or {}
    without = f" without #{doc['without']}" if doc.get("without") else ""
    port = doc.get("port") if isinstance(doc.get("port"), dict) else {}
    with_port = f" with the port of #{port['change']}" if port.get("change") else ""
    return f"fork {fork.get('name')} {fork.get('ref')}{without}{with_port} ({str(fork.get('built', ''))[:12]})"


def vllm_root() -> Path | None:
    """The installed vllm package directory, found without importing vllm."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def vllm_version() -> str:
    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        root = vllm_root()
        return f"(unversioned, at {root})" if root else "(not installed)"


def vllm_commit() -> str | None:
    """The git commit the vLLM build was made from, where its build recorded one (vcs-versioning writes
    `vllm/_version.py` with `commit_id`, e.g. "gffd46bfab" for 0.26.0; a fork's wheel names the fork's)."""
    root = vllm_root()
    if root is None or not (root / "_version.py").is_file():
        return None
    import re

    found = re.search(r"""commit_id\s*=\s*['"]([^'"]+)['"]""", (root / "_version.py").read_text())
    return found.group(1) if found else None


def _source(rel: str) -> str:
    root = vllm_root()
    path = root / rel if root else None
    return path.read_text() if path and path.is_file() else ""


def warmup_48804() -> Presence:
    """#48804 adds model_executor/warmup/eagle_spec_decode_warmup.py and calls it from kernel_warmup."""
    module = "model_executor/warmup/eagle_spec_decode_warmup.py"
    present = bool(_source(module)) and "eagle_spec_decode_warmup" in _source("model_executor/warmup/kernel_warmup.py")
    return Presence("48804", present, f"vllm/{module}, wired into vllm/model_executor/warmup/kernel_warmup.py")


def warmup_49903() -> Presence:
    """#49903 warms the runner-owned Triton kernels before the first request: the KV-block zeroer gains a warm-up
    (KVBlockZeroer.warmup in vllm/v1/worker/utils.py) that kernel_warmup calls, beside the slot-mapping kernel for the
    runner's real block tables; on #47451's JIT warm-up infrastructure (vllm/model_executor/warmup/jit_warmup.py).
    The call moved after the merge (kernel_warmup in 0.27-0.33, the GPU worker's warm-up from 0.34): either counts."""
    callers = ("model_executor/warmup/kernel_warmup.py", "v1/worker/gpu/warmup.py")
    called = next((c for c in callers if "zeroer.warmup(" in _source(c)), None)
    present = (
        "def warmup(self, num_kv_blocks" in _source("v1/worker/utils.py")
        and called is not None
        and bool(_source("model_executor/warmup/jit_warmup.py"))
    )
    return Presence(
        "49903",
        present,
        f"KVBlockZeroer.warmup in vllm/v1/worker/utils.py, called from vllm/{called or callers[0]}, "
        "and vllm/model_executor/warmup/jit_warmup.py (#47451)",
    )


KERNEL_WARMUP = {"48804": warmup_48804, "49903": warmup_49903}  # the kernel-warm-up track's changes, by id


def fused_ar_graph_46849() -> Presence:
    """#46849 captures all k-1 draft decodes in one graph (_fused_multi_step_decode) and updates
    attention metadata in place between steps (update_draft_decode_metadata). The speculator's module moved
    after the merge (spec_decode/autoregressive/ in 0.28-0.31, spec_decode/target_dependent_ar/ from 0.32):
    any speculator of model runner v2 that defines it counts."""
    root = vllm_root()
    specs = sorted(root.glob("v1/worker/gpu/spec_decode/*/speculator.py")) if root else []
    fused = [p for p in specs if "def _fused_multi_step_decode" in p.read_text()]
    present = bool(fused) and "update_draft_decode_metadata" in _source("v1/attention/backend.py")
    where = f"vllm/{fused[0].relative_to(root)}" if fused and root else "vllm/v1/worker/gpu/spec_decode/*/speculator.py"
    return Presence(
        "46849",
        present,
        f"_fused_multi_step_decode in {where} and update_draft_decode_metadata in vllm/v1/attention/backend.py",
    )


def fp8_ds_mla_dcp_46514() -> Presence:
    """#46514 makes FlashMLASparseImpl return the LSE for decode (DCP) on the fp8_ds_mla mixed-batch path."""
    from vllm.v1.attention.backends.mla import flashmla_sparse as fms

    lse = inspect.getattr_static(fms.FlashMLASparseImpl, "can_return_lse_for_decode", False) is True
    dcp_code = hasattr(fms, "_neutralize_rows_without_local_kv") or hasattr(fms, "triton_filter_and_convert_dcp_index")
    return Presence(
        "46514",
        lse and dcp_code,
        "FlashMLASparseImpl.can_return_lse_for_decode = True and the DCP index filtering in "
        "vllm/v1/attention/backends/mla/flashmla_sparse.py",
    )


def indexer_skip_48407() -> Presence:
    """#48407 adds MLACommonPrefillMetadata.use_dense_mha, which lets the indexer skip top-k scoring."""
    from vllm.model_executor.layers.attention.mla_attention import MLACommonPrefillMetadata

    present = "use_dense_mha" in {f.name for f in dataclasses.fields(MLACommonPrefillMetadata)}
    return Presence(
        "48407",
        present,
        "MLACommonPrefillMetadata.use_dense_mha in vllm/model_executor/layers/attention/mla_attention.py",
    )


def composition() -> Presence:
    """The composition rows import no change: they ask whether features of the installed vLLM compose."""
    return Presence("composition", True, f"no imported change: features of vLLM {vllm_version()} as installed")
