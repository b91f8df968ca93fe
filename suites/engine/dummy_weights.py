"""Random weights, finished the way the model's own loading finishes them.

vLLM's dummy loader (`load_format="dummy"`, vllm/model_executor/model_loader/dummy_loader.py) fills every
parameter in place and never calls the model's `load_weights`, where some models derive tensors once their
weights are in. DeepSeek-V4 does: `finalize_mhc_broadcast_weights` (vllm/models/deepseek_v4/nvidia/model.py:1299)
sets the first layer's `hc_attn_fn_broadcast`, and without it the first forward fails `assert
self.hc_attn_fn_broadcast is not None` (:882; seen on the H200, evidence/h200-shrunk/FINDINGS.md). Such models load
through `LOAD_FORMAT`: the dummy loader, then the model's own `load_weights` with no tensors, which runs its
post-load steps and loads nothing.

vLLM's loader registry is per process, and a TP or DCP engine loads its model in worker processes. `register` is
therefore a vLLM general plugin (suites/stackgate_suites-0.dist-info/entry_points.txt, found on the import path
wherever the suites run), which vLLM loads in every process it starts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

LOAD_FORMAT = "stackgate-dummy"
# architectures whose load_weights derives tensors the forward pass needs (vLLM 0.26.0)
FINISHED_BY_LOAD_WEIGHTS = frozenset({"DeepseekV4ForCausalLM"})


def load_format(architectures: Iterable[str]) -> str:
    """The load format for random weights of a model with these `architectures`."""
    return LOAD_FORMAT if FINISHED_BY_LOAD_WEIGHTS.intersection(architectures) else "dummy"


def register() -> None:
    """Register `LOAD_FORMAT` with vLLM in this process (vLLM's general-plugin hook: it calls this once per process)."""
    from vllm.model_executor.model_loader import register_model_loader
    from vllm.model_executor.model_loader.dummy_loader import DummyModelLoader

    class FinishedDummyLoader(DummyModelLoader):
        def load_weights(self, model: Any, model_config: Any) -> None:
            super().load_weights(model, model_config)
            model.load_weights(iter(()))  # no tensors: only the model's post-load steps run

    register_model_loader(LOAD_FORMAT)(FinishedDummyLoader)
