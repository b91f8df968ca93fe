"""Probes that see every worker process of an engine, not only the test's own.

With TP (or DCP) above 1, vLLM's multiprocess executor runs each rank's worker in another process; the
in-process probes would count 0 there. `llm.collective_rpc(fn)` runs `fn(worker)` in every worker (vLLM
0.26.0: vllm/v1/executor/multiproc_executor.py cloudpickles a callable into the workers' broadcast queue; with
the engine core in this process, VLLM_ENABLE_V1_MULTIPROCESSING=0, no msgpack step is involved, so
VLLM_ALLOW_INSECURE_SERIALIZATION is not needed). A single-process engine (UniProcExecutor, or each rank
under the external launcher) runs `fn` in this process: the same path counts there too.

The counts live on torch.cuda.CUDAGraph in each worker process, so the callables carry no state of their own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

_KEY = "_stackgate_counts"


def start_counting(worker: Any) -> dict[str, Any]:
    """In a worker: count CUDA-graph replays and captures from now on (wrapping once per process)."""
    import torch

    cls = torch.cuda.CUDAGraph
    if not hasattr(cls, _KEY):
        counts = {"replays": 0, "captures": 0}
        setattr(cls, _KEY, counts)
        for name, counter in (("replay", "replays"), ("capture_begin", "captures")):
            original = getattr(cls, name)

            def wrapper(graph: Any, *a: Any, _orig: Any = original, _counter: str = counter, **kw: Any) -> Any:
                getattr(type(graph), _KEY)[_counter] += 1
                return _orig(graph, *a, **kw)

            setattr(cls, name, wrapper)
    getattr(cls, _KEY).update(replays=0, captures=0)
    return {"pid": os.getpid(), "rank": getattr(worker, "rank", None)}


def read_counts(worker: Any) -> dict[str, Any]:
    """In a worker: the counts since start_counting."""
    import torch

    counts = dict(getattr(torch.cuda.CUDAGraph, _KEY, {"replays": None, "captures": None}))
    return {"pid": os.getpid(), "rank": getattr(worker, "rank", None), **counts}


@dataclass
class WorkerGraphs:
    """Per worker process: its rank, and the graphs it replayed and captured while the counter was on."""

    per_worker: list[dict[str, Any]] = field(default_factory=list)

    @property
    def workers(self) -> int:
        return len({(w.get("pid"), w.get("rank")) for w in self.per_worker})

    def total(self, what: str) -> int | None:
        """Summed over every worker; None where any worker could not count (never a silent 0)."""
        values = [w.get(what) for w in self.per_worker]
        if not values or any(v is None for v in values):
            return None
        return sum(int(v) for v in values)


@contextmanager
def graph_counts(llm: Any) -> Iterator[WorkerGraphs]:
    """Count CUDA-graph replays and captures in every worker of `llm` for the duration."""
    rec = WorkerGraphs()
    llm.collective_rpc(start_counting)
    yield rec  # an engine that failed inside is not asked again: it may no longer answer
    rec.per_worker = list(llm.collective_rpc(read_counts))
