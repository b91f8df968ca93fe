"""The #52512 guard's CPU-side parts: resolving what to watch (and refusing what it cannot), forcing the all -1
top-k condition at each engine step, recording sparse reads of all -1 rows, and judging repeated-token
degeneration against a reference. The engine side runs on a GPU; here plain objects stand in for vLLM's."""

from __future__ import annotations

import importlib

import pytest

from ci.stack import loader, plan


class Buffer:
    """A [tokens, topk] int buffer: rows of lists, sliced and filled like the tensor it stands for."""

    def __init__(self, tokens: int, topk: int) -> None:
        self.rows = [[-1] * topk for _ in range(tokens)]

    def __getitem__(self, index: slice) -> list[list[int]]:
        return self.rows[index]

    def fill_(self, value: int) -> None:
        self.rows = [[value] * len(row) for row in self.rows]

    def write(self, tokens: int) -> None:
        """What an indexer does: every token's top-k, each token attending at least to itself."""
        for t in range(tokens):
            self.rows[t] = [t] + [-1] * (len(self.rows[t]) - 1)


class Module:
    def __init__(self, *children: Module, **attrs: object) -> None:
        self.children = children
        self.__dict__.update(attrs)

    def modules(self):
        yield self
        for child in self.children:
            yield from child.modules()


class Metadata:
    def __init__(self, tokens: int) -> None:
        self.num_actual_tokens = tokens


class SparseImpl:
    def __init__(self, buffer: Buffer) -> None:
        self.topk_indices_buffer = buffer

    def forward_mqa(self, q, kv_cache, md, layer):
        return "attended"


class OwnAttentionImpl(SparseImpl):
    def forward_mqa(self, q, kv_cache, md, layer):  # a model's own attention: not the backend's read
        return "elsewhere"


class Backend:
    @staticmethod
    def get_impl_cls():
        return SparseImpl


def registry(name: str) -> type:
    if name != "FLASHMLA_SPARSE":
        raise KeyError(name)
    return Backend


NONE, FULL = "NONE", "FULL"  # vLLM's CUDAGraphMode members, as the guard is given them


def graph_none() -> str:
    return NONE


class Dispatcher:
    """vLLM's CUDA-graph dispatcher: FULL for a decode step it captured, unless only NONE is allowed."""

    def __init__(self) -> None:
        self.modes: list[str] = []

    def dispatch(self, num_tokens: int, uniform_decode: bool = False, valid_modes=None, invalid_modes=None):
        mode = FULL if uniform_decode and (valid_modes is None or FULL in valid_modes) else NONE
        self.modes.append(mode)
        return mode, num_tokens


class Runner:
    """One step of a two-layer sparse model: a full layer's indexer writes the top-k (unless the dense short
    prefill skipped it), then a shared layer reads it, as GLM-5.2's IndexShare layers do. A decode step replays
    a FULL graph, where no Python runs."""

    def __init__(self, *, impl: type = SparseImpl, skip_indexer: bool = False) -> None:
        self.buffer = Buffer(tokens=8, topk=4)
        self.skip_indexer = skip_indexer
        indexer = Module(topk_indices_buffer=self.buffer)
        shared = Module(impl=impl(self.buffer))
        self.model = Module(Module(indexer), Module(shared))
        self.impl = shared.impl
        self.cudagraph_dispatcher = Dispatcher()

    def execute_model(self, tokens: int, decode: bool = False) -> str:
        mode, _ = self.cudagraph_dispatcher.dispatch(tokens, uniform_decode=decode)
        if not self.skip_indexer:
            self.buffer.write(tokens)
        return "replayed" if mode == FULL else self.impl.forward_mqa(None, None, Metadata(tokens), None)


def test_minus_one_rows_are_the_rows_with_no_token(engine_pkg):
    from engine.topk_guard import minus_one_rows

    assert minus_one_rows([[1, 2], [-1, -1], [-1, 3], [], [-1]]) == [1, 4]
    assert minus_one_rows([]) == []


def test_a_backend_the_guard_cannot_watch_is_refused_loudly(engine_pkg):
    from engine.topk_guard import CannotWatch, impl_class, watch

    assert impl_class("FLASHMLA_SPARSE", registry) is SparseImpl
    with pytest.raises(CannotWatch, match="cannot watch backend ROCM_AITER_MLA_SPARSE: its implementation does not"):
        impl_class("ROCM_AITER_MLA_SPARSE", registry)

    class NoRead:
        @staticmethod
        def get_impl_cls():
            return object

    with pytest.raises(CannotWatch, match="object has no forward_mqa"):
        impl_class("X", lambda name: NoRead)
    own = Runner(impl=OwnAttentionImpl)
    with (
        pytest.raises(CannotWatch, match=r"run OwnAttentionImpl, not SparseImpl\.forward_mqa"),
        watch("FLASHMLA_SPARSE", own, registry=registry, graph_none=graph_none),
    ):
        pass
    own_layers = Runner()  # DeepSeek-V4 in vLLM 0.26.0: its attention layers hold the buffer and read it themselves

    class DeepseekV4FlashMLAAttention(Module):
        pass

    own_layers.model = Module(DeepseekV4FlashMLAAttention(topk_indices_buffer=own_layers.buffer))
    with (
        pytest.raises(CannotWatch, match=r"run no sparse-attention implementation, not SparseImpl\.forward_mqa; its "
                                         r"topk_indices_buffer is held by DeepseekV4FlashMLAAttention: attention of"),
        watch("FLASHMLA_SPARSE", own_layers, registry=registry, graph_none=graph_none),
    ):  # fmt: skip
        pass
    dense = Runner()
    dense.model = Module(Module(impl=SparseImpl(dense.buffer)))  # the layers run it, but no buffer is held
    dense.model.children[0].impl.topk_indices_buffer = None
    with (
        pytest.raises(CannotWatch, match="holds no topk_indices_buffer"),
        watch("FLASHMLA_SPARSE", dense, registry=registry, graph_none=graph_none),
    ):
        pass


def test_without_vllm_no_backend_resolves(engine_pkg):
    from engine.topk_guard import CannotWatch, impl_class

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here")
    with pytest.raises(CannotWatch, match="FLASHMLA_SPARSE"):
        impl_class("FLASHMLA_SPARSE")


def test_a_correct_step_reads_no_all_minus_one_row(engine_pkg):
    from engine.topk_guard import watch

    runner = Runner()
    with watch("FLASHMLA_SPARSE", runner, registry=registry, graph_none=graph_none) as guard:
        assert runner.execute_model(5) == "attended"
        runner.execute_model(3)
    assert (guard.forced_steps, guard.reads, guard.layers, guard.minus_one) == (2, 2, 1, [])
    assert guard.to_json()["impl"] == "SparseImpl"


def test_the_forced_condition_exposes_a_read_of_rows_nobody_wrote(engine_pkg):
    from engine.topk_guard import watch

    runner = Runner()
    runner.execute_model(6)  # an earlier, longer request leaves plausible indices behind
    runner.skip_indexer = True  # the dense short prefill: the full layer's indexer does not run
    assert runner.execute_model(4) == "attended"  # unforced, the stale rows hide the bad read
    with watch("FLASHMLA_SPARSE", runner, registry=registry, graph_none=graph_none) as guard:
        runner.execute_model(4)
    assert guard.minus_one == [{"read": 1, "tokens": 4, "rows": 4, "first_rows": [0, 1, 2]}]
    assert guard.forced_steps == 1


def test_the_guard_leaves_nothing_patched(engine_pkg):
    from engine.topk_guard import watch

    runner = Runner()
    original = SparseImpl.forward_mqa
    with watch("FLASHMLA_SPARSE", runner, registry=registry, graph_none=graph_none):
        assert SparseImpl.forward_mqa is not original and "execute_model" in vars(runner)
    assert SparseImpl.forward_mqa is original and "execute_model" not in vars(runner)


def test_a_repeating_tail_is_found_and_measured(engine_pkg):
    from engine.degeneration import repeating_tail

    assert repeating_tail([7, 8, 9, 4, 4, 4, 4]).cycle == (4,) and repeating_tail([7, 8, 9, 4, 4, 4, 4]).repeats == 4
    cycle = repeating_tail([5, 1, 2, 1, 2, 1, 2])
    assert (cycle.cycle, cycle.repeats, cycle.length) == ((1, 2), 3, 6)
    assert repeating_tail([3, 3, 3, 3]).cycle == (3,)  # the shortest cycle on a tie
    assert repeating_tail([1, 2, 3]).repeats == 1 and not repeating_tail([1, 2, 3]).degenerate()
    assert repeating_tail([]).length == 0


def test_degeneration_counts_only_where_the_reference_did_not_repeat(engine_pkg):
    from engine.degeneration import MIN_REPEATS, judge

    varied = list(range(16))
    stuck = list(range(4)) + [9] * MIN_REPEATS
    verdict = judge([stuck, varied, stuck], [varied, varied, stuck])
    assert verdict.inconclusive == 1 and len(verdict.degenerated) == 1
    assert verdict.degenerated[0].startswith(f"request 0: its last {MIN_REPEATS} tokens repeat [9] x{MIN_REPEATS}")
    assert verdict.to_json() == {"degenerated": list(verdict.degenerated), "inconclusive": 1}
    with pytest.raises(ValueError, match="2 outputs against 1 references"):
        judge([varied, varied], [varied])


def test_every_sparse_backend_a_target_offers_is_one_the_guard_reads(engine_pkg):
    from engine.topk_guard import READ_BY

    st = loader.load()
    sparse = {b.id for b in st.backends.values() if "sparse_mla" in b.layouts}
    assert sparse == set(READ_BY)
    # GLM-5.2 is fp8: its guard rows are on each sparse backend of every target that runs fp8 (GB10, H200)
    fp8 = {b for t in st.targets.values() if "fp8" in t.quantizations for b in t.backends if b in sparse}
    rows = plan.build(st).rows
    guarded = {r.backend for r in rows if r.model == "glm-5.2-shrunk" and r.track == "indexer-skip"}
    assert guarded == fp8 == {"FLASHMLA_SPARSE", "FLASHINFER_MLA_SPARSE"}


def test_a_buffer_broken_on_purpose_is_caught_at_every_read(engine_pkg, monkeypatch):
    from engine.topk_guard import ENV_BREAK, broken_on_purpose, watch

    runner = Runner()  # a correct model: its indexer writes every step
    monkeypatch.setenv(ENV_BREAK, "1")
    with watch(
        "FLASHMLA_SPARSE", runner, registry=registry, graph_none=graph_none, break_reads=broken_on_purpose()
    ) as guard:
        runner.execute_model(5)
        runner.execute_model(2)
    assert [(r["tokens"], r["rows"]) for r in guard.minus_one] == [(5, 5), (2, 2)]
    assert guard.to_json()["broken_on_purpose"] is True
    monkeypatch.setenv(ENV_BREAK, "0")
    with watch(
        "FLASHMLA_SPARSE", runner, registry=registry, graph_none=graph_none, break_reads=broken_on_purpose()
    ) as guard:
        runner.execute_model(5)
    assert guard.minus_one == [] and guard.to_json()["broken_on_purpose"] is False


def test_the_forced_steps_run_without_graphs_so_decode_reads_are_seen(engine_pkg):
    from engine.topk_guard import CannotWatch, watch

    runner = Runner()
    assert runner.execute_model(1, decode=True) == "replayed"  # a FULL replay: its read would go unseen
    with watch("FLASHMLA_SPARSE", runner, registry=registry, graph_none=graph_none, break_reads=True) as guard:
        assert runner.execute_model(1, decode=True) == "attended"
    assert guard.reads == 1 and guard.minus_one and runner.cudagraph_dispatcher.modes == [FULL, NONE]
    assert runner.execute_model(1, decode=True) == "replayed"  # the dispatcher is itself again
    bare = Runner()
    del bare.cudagraph_dispatcher  # a runner whose graphs the guard cannot turn off
    with (
        pytest.raises(CannotWatch, match="cannot run the forced steps without CUDA graphs: Runner has no"),
        watch("FLASHMLA_SPARSE", bare, registry=registry, graph_none=graph_none),
    ):
        pass
