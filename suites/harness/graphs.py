"""Counting CUDA-graph captures and replays, for the graph-replay assertions.

Wraps `torch.cuda.CUDAGraph.replay` and `capture_begin` while the counter is active. It counts in
this process only: a suite that counts vLLM's graphs runs the engine in-process
(VLLM_ENABLE_V1_MULTIPROCESSING=0). torch is imported only when the counter is entered, and only if
it is installed; without it the counter reports itself unavailable rather than counting 0.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any


class GraphCounter:
    def __init__(self) -> None:
        self.replays = 0
        self.captures = 0
        self.available = False
        self._cls: Any = None
        self._saved: dict[str, Any] = {}

    def __enter__(self) -> GraphCounter:
        if "torch" not in sys.modules and importlib.util.find_spec("torch") is None:
            return self
        import torch

        cls = getattr(getattr(torch, "cuda", None), "CUDAGraph", None)
        if cls is None:
            return self
        self._cls, self.available = cls, True
        for name, counter in (("replay", "replays"), ("capture_begin", "captures")):
            original = getattr(cls, name)
            self._saved[name] = original
            setattr(cls, name, self._counting(original, counter))
        return self

    def _counting(self, original: Any, counter: str) -> Any:
        def wrapper(graph: Any, *args: Any, **kwargs: Any) -> Any:
            setattr(self, counter, getattr(self, counter) + 1)
            return original(graph, *args, **kwargs)

        return wrapper

    def __exit__(self, *_exc: object) -> None:
        for name, original in self._saved.items():
            setattr(self._cls, name, original)
        self._saved.clear()
