"""Random weights, finished the way the model's own loading finishes them.

vLLM's dummy loader (`load_format="dummy"`, vllm/model_executor/model_loader/dummy_loader.py) fills every
parameter in place and never calls the model's `load_weights`, where some models derive tensors once their
weights are in. DeepSeek-V4 does: `finalize_mhc_broadcast_weights` (vllm/models/deepseek_v4/nvidia/model.py:1299)
sets the first layer's `hc_attn_fn_broadcast`, and without it the first forward fails `assert
self.hc_attn_fn_broadcast is not None` (:882; seen on the H200, evidence/h200-shrunk/FINDINGS.md). Such models load
through `LOAD_FORMAT`: the dummy loader, then the steps the model's own `load_weights` runs once its tensors are in
(`POST_LOAD`, by model class). Calling `load_weights` itself with no tensors is not enough: DeepSeek-V4's MTP drafter
checks that every MTP layer got a tensor and raises "MTP speculative decoding layer N weights missing from
checkpoint" (vllm/models/deepseek_v4/nvidia/mtp.py:459-473; seen on the H200).

vLLM's loader registry is per process, and a TP or DCP engine loads its model in worker processes. `register` is
therefore a vLLM general plugin (suites/stackgate_suites-0.dist-info/entry_points.txt, found on the import path
wherever the suites run), which vLLM loads in every process it starts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

LOAD_FORMAT = "stackgate-dummy"
# model class -> the methods its load_weights calls after loading (attribute paths from the model), vLLM 0.26.0;
# an architecture named here loads through LOAD_FORMAT
POST_LOAD: dict[str, tuple[str, ...]] = {
    # vllm/models/deepseek_v4/nvidia/model.py:1471-1472
    "DeepseekV4ForCausalLM": ("model.finalize_mega_moe_weights", "model.finalize_mhc_broadcast_weights"),
    # the MTP drafter (architecture DeepSeekV4MTPModel): vllm/models/deepseek_v4/nvidia/mtp.py:478
    "DeepSeekV4MTP": ("finalize_mega_moe_weights",),
}


def load_format(architectures: Iterable[str]) -> str:
    """The load format for random weights of a model with these `architectures`."""
    return LOAD_FORMAT if POST_LOAD.keys() & set(architectures) else "dummy"


def finish(model: Any) -> None:
    """Run the post-load steps of `model`'s class (`POST_LOAD`); a class not listed there (another
    drafter in the same engine, say) is left as vLLM's dummy loader leaves it. A listed step the model lacks is an
    error naming it: the pinned vLLM moved it, and `POST_LOAD` must follow."""
    for path in POST_LOAD.get(type(model).__name__, ()):
        target: Any = model
        for part in path.split("."):
            if not hasattr(target, part):
                raise AttributeError(
                    f"{__file__}: {type(model).__name__} has no {path} (POST_LOAD): the vLLM in use finishes its "
                    "weights elsewhere; update POST_LOAD from the model's load_weights"
                )
            target = getattr(target, part)
        target()


def register() -> None:
    """Register `LOAD_FORMAT` with vLLM in this process (vLLM's general-plugin hook: it calls this once per process)."""
    from vllm.model_executor.model_loader import register_model_loader
    from vllm.model_executor.model_loader.dummy_loader import DummyModelLoader

    class FinishedDummyLoader(DummyModelLoader):
        def load_weights(self, model: Any, model_config: Any) -> None:
            super().load_weights(model, model_config)
            finish(model)

    register_model_loader(LOAD_FORMAT)(FinishedDummyLoader)
