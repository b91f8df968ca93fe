"""The decode-dispatch probe counts a draft proposal as run without a CUDA graph when no graph replayed during it.
vLLM's breakable CUDA graph (DeepSeek-V4's default in vLLM 0.26.0) replays graph segments through
`torch.cuda.CUDAGraph.replay` methods bound when the segments were captured, at engine start: a class patch made
later never sees them. On the H200 every DeepSeek-V4 MTP draft so read as eager (236 of 236). Plain objects stand
in for torch's and vLLM's classes here."""

from __future__ import annotations

import sys
import types

import pytest
from support.paths import SUITES

sys.path.insert(0, str(SUITES))

from engine import probes


class CUDAGraph:
    def replay(self) -> None:
        pass


class BreakableCUDAGraphCapture:
    def __init__(self) -> None:
        self.segments = [CUDAGraph().replay, CUDAGraph().replay]  # bound at capture, before any probe

    def replay(self) -> None:
        for segment in self.segments:
            segment()


class CudagraphDispatcher:
    def dispatch(self, num_tokens: int, uniform_decode: bool = False):
        return "FULL" if uniform_decode else "NONE", None


class Drafter:
    def __init__(self, graph: object | None) -> None:
        self.graph = graph

    def propose(self) -> None:
        if self.graph is not None:
            self.graph.replay()


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    modules = {
        "torch": types.SimpleNamespace(cuda=types.SimpleNamespace(CUDAGraph=CUDAGraph)),
        "vllm": types.ModuleType("vllm"),
        "vllm.v1.cudagraph_dispatcher": types.SimpleNamespace(CudagraphDispatcher=CudagraphDispatcher),
        "vllm.compilation.breakable_cudagraph": types.SimpleNamespace(
            BreakableCUDAGraphCapture=BreakableCUDAGraphCapture
        ),
    }
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)


def _propose_once(drafter: Drafter) -> probes.Dispatches:
    runner = types.SimpleNamespace(drafter=drafter)
    with probes.dispatches(runner) as rec:
        drafter.propose()
    return rec


def test_a_draft_replaying_a_breakable_graph_is_not_eager(fakes) -> None:
    rec = _propose_once(Drafter(BreakableCUDAGraphCapture()))
    assert (rec.draft_proposes, rec.draft_eager) == (1, 0)
    assert BreakableCUDAGraphCapture.__dict__["replay"].__name__ == "replay"  # restored


def test_a_plain_graph_replay_counts_and_no_replay_is_eager(fakes) -> None:
    assert _propose_once(Drafter(CUDAGraph())).draft_eager == 0
    assert _propose_once(Drafter(None)).draft_eager == 1


def test_without_the_breakable_patch_its_segments_go_unseen(fakes, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm.compilation.breakable_cudagraph", None)  # a vLLM without it
    assert _propose_once(Drafter(BreakableCUDAGraphCapture())).draft_eager == 1
