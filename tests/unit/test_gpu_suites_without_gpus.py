"""The parts of the GPU suites' vLLM support that need no GPU: row -> engine arguments, presence checks against a
vLLM source tree, the acceptance checks a row applies. Their rows run here are test_gpu_rows_skipped_here.py's."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
import types

import pytest
from support.paths import SUITES

from ci.stack import loader as stack
from ci.stack import plan, rows_json


def _row(st, change: str, model: str, **want):
    from harness.rows import Row

    for r in plan.build(st).select(changes=[change]).rows:
        if r.model == model and all(getattr(r, k) == v for k, v in want.items()):
            d = rows_json.row_document(st, r)
            return Row(id=r.id, change=r.change, track=r.track, suite=r.suite, target=r.target, gpus=r.gpus, data=d)
    raise AssertionError(f"no row {change} {model} {want}")


def test_gated_deltanet_rows_prefill_with_triton(engine_pkg):
    """Qwen3.6's GDN layers: vLLM 0.26.0 would pick FlashInfer's CuTe DSL prefill kernel on SM90 (JIT-compiled, and
    absent without nvidia-cutlass-dsl); the rows ask for vLLM's Triton/FLA path, the other models pass nothing."""
    from engine import config

    st = stack.load()
    qwen = _row(st, "48804", "qwen3.6-shrunk", target="cuda-sm90", batch=1)
    assert config.llm_kwargs(qwen)["gdn_prefill_backend"] == "triton"
    eagle = _row(st, "48804", "tiny-llama-eagle", target="cuda-sm90", backend="FLASH_ATTN", batch=1)
    assert "gdn_prefill_backend" not in config.llm_kwargs(eagle)


def test_deepseek_v4_random_weights_are_finished_as_its_own_load_weights_finishes_them(engine_pkg, monkeypatch):
    """vLLM 0.26.0's dummy loader never calls a model's load_weights, where DeepSeek-V4 derives the tensor its first
    forward asserts (hc_attn_fn_broadcast). Its rows load through a loader that then runs the steps load_weights runs
    after loading (not load_weights itself: the MTP drafter's raises on no tensors), which the suites register as a
    vLLM general plugin (so in worker processes too)."""

    from engine import config, dummy_weights

    st = stack.load()
    one = _row(st, "48407", "deepseek-v4-flash-shrunk", target="cuda-sm90", tp=1)
    assert config.llm_kwargs(one)["load_format"] == dummy_weights.LOAD_FORMAT
    two = _row(st, "46514", "deepseek-v4-flash-shrunk", target="cuda-sm90", tp=2)
    assert config.llm_kwargs(two)["load_format"] == dummy_weights.LOAD_FORMAT  # its workers load the plugin too
    eagle = _row(st, "48804", "tiny-llama-eagle", target="cuda-sm90", backend="FLASH_ATTN", batch=1)
    assert config.llm_kwargs(eagle)["load_format"] == "dummy"
    # random weights: a fixed KV budget, the same on every device, which rows sharing one device rely on: the model's
    # own (models.yaml kv_cache_gib: 2 GiB for the tiny ones), else the default
    assert config.llm_kwargs(one)["kv_cache_memory_bytes"] == config.DUMMY_KV_CACHE_BYTES
    assert config.llm_kwargs(eagle)["kv_cache_memory_bytes"] == int(st.models["tiny-llama-eagle"].kv_cache_gib * 2**30)
    assert st.models["tiny-llama-eagle"].kv_cache_gib == 2

    registry: dict[str, type] = {}

    class DummyModelLoader:  # vLLM's: fills the parameters in place
        def __init__(self, load_config):
            self.load_config = load_config

        def load_weights(self, model, model_config):
            model.filled = True

    loader_pkg = types.ModuleType("vllm.model_executor.model_loader")
    loader_pkg.register_model_loader = lambda fmt: lambda cls: registry.setdefault(fmt, cls)
    dummy_mod = types.ModuleType("vllm.model_executor.model_loader.dummy_loader")
    dummy_mod.DummyModelLoader = DummyModelLoader
    for name, mod in (("vllm", types.ModuleType("vllm")), ("vllm.model_executor", types.ModuleType("x")),
                      ("vllm.model_executor.model_loader", loader_pkg),
                      ("vllm.model_executor.model_loader.dummy_loader", dummy_mod)):  # fmt: skip
        monkeypatch.setitem(sys.modules, name, mod)
    dummy_weights.register()

    class Inner:
        def __init__(self):
            self.calls = []

        def finalize_mega_moe_weights(self):
            self.calls.append("mega_moe")

        def finalize_mhc_broadcast_weights(self):
            self.calls.append("mhc_broadcast")

    class DeepseekV4ForCausalLM:  # the target: its load_weights finishes its inner model's weights
        filled = False

        def __init__(self):
            self.model = Inner()

        def load_weights(self, weights):
            raise AssertionError("not called: an MTP drafter's raises on no tensors")

    class DeepSeekV4MTP(Inner):  # the drafter: finishes itself, and raises on no tensors in load_weights
        filled = False

    class LlamaForCausalLM:  # not listed: left as the dummy loader leaves it
        filled = False

    load = registry[dummy_weights.LOAD_FORMAT](None).load_weights
    target, drafter, other = DeepseekV4ForCausalLM(), DeepSeekV4MTP(), LlamaForCausalLM()
    for model in (target, drafter, other):
        load(model, None)
        assert model.filled  # random weights first
    assert target.model.calls == ["mega_moe", "mhc_broadcast"]  # then the post-load steps, in load_weights' order
    assert drafter.calls == ["mega_moe"]

    class Moved:  # a listed class whose vLLM moved the step: an error naming it, not a silent half-finished model
        filled = False

    Moved.__name__ = "DeepSeekV4MTP"
    with pytest.raises(AttributeError, match="DeepSeekV4MTP has no finalize_mega_moe_weights"):
        load(Moved(), None)


def test_a_model_class_override_reaches_only_the_architectures_it_names(engine_pkg, monkeypatch):
    """$STACKGATE_MODEL_CLASS_OVERRIDES runs a model on another of vLLM's implementations of it (vLLM 0.28.0 builds
    GLM-5.2 from deepseek_v2.py unless told to take vllm/models/deepseek_v32/, where #51298 and #52512 act)."""
    from engine import config

    st = stack.load()
    glm = _row(st, "48407", "glm-5.2-shrunk", target="cuda-sm90", context=2048, batch=1)
    eagle = _row(st, "48804", "tiny-llama-eagle", target="cuda-sm90", backend="FLASH_ATTN", batch=1)
    assert "model_class_overrides" not in config.llm_kwargs(glm)
    target = "vllm.models.deepseek_v32.nvidia.model:DeepseekV32ForCausalLM"
    monkeypatch.setenv(config.ENV_MODEL_CLASSES, json.dumps({"GlmMoeDsaForCausalLM": target}))
    assert config.llm_kwargs(glm)["model_class_overrides"] == {"GlmMoeDsaForCausalLM": target}
    assert "model_class_overrides" not in config.llm_kwargs(eagle)
    monkeypatch.setenv(config.ENV_MODEL_CLASSES, '["not", "an object"]')
    with pytest.raises(ValueError, match=config.ENV_MODEL_CLASSES):
        config.llm_kwargs(glm)


def test_row_becomes_engine_arguments(engine_pkg):
    from engine import config

    st = stack.load()
    row = _row(st, "46514", "tiny-deepseek-v32-mtp", target="cuda-sm90", spec_method="mtp", batch=16, dcp=1)
    kw = config.llm_kwargs(row)
    assert kw["model"].endswith("suites/models/tiny-deepseek-v32") and kw["load_format"] == "dummy"
    assert kw["kv_cache_dtype"] == "fp8_ds_mla" and kw["attention_config"] == {"backend": "FLASHMLA_SPARSE"}
    assert kw["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 1}
    assert kw["compilation_config"]["cudagraph_mode"] == "FULL_AND_PIECEWISE"
    assert "decode_context_parallel_size" not in kw
    eagle = _row(st, "48804", "tiny-llama-eagle", target="cuda-sm90", backend="FLASH_ATTN", batch=1)
    spec = config.llm_kwargs(eagle)["speculative_config"]
    assert spec["method"] == "eagle" and spec["model"].endswith("suites/models/tiny-llama-eagle-draft")
    ref = config.llm_kwargs(row, attention_config={"sparse_mla_force_mqa": True}, speculative_config=None)
    assert ref["attention_config"] == {"backend": "FLASHMLA_SPARSE", "sparse_mla_force_mqa": True}
    assert "speculative_config" not in ref
    for model in ("tiny-llama", "tiny-llama-eagle-draft", "tiny-llama-eagle3-draft", "tiny-deepseek-v3",
                  "tiny-deepseek-v32", "tiny-qwen3", "tiny-qwen3-dflash-draft", "tiny-qwen3-dspark-draft"):  # fmt: skip
        assert (SUITES / "models" / model / "config.json").is_file()


def test_shrunk_and_drafter_rows_become_engine_arguments(engine_pkg):
    from engine import config

    st = stack.load()
    glm = _row(st, "48407", "glm-5.2-shrunk", target="cuda-sm90", context=512, batch=1)
    kw = config.llm_kwargs(glm)
    assert kw["model"].endswith("suites/models/shrunk-glm-5.2") and kw["load_format"] == "dummy"
    assert "language_model_only" not in kw and glm.model_info["shrunk_of"] == "glm-5.2"
    assert config.model_config(glm)["architectures"] == ["GlmMoeDsaForCausalLM"]
    qwen = _row(st, "48804", "qwen3.6-shrunk", target="cuda-sm90", backend="FLASH_ATTN", batch=1)
    kw = config.llm_kwargs(qwen)  # a vision-language architecture: its language model only
    assert kw["language_model_only"] is True
    assert kw["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 3}
    dspark = _row(st, "48804", "tiny-qwen3-dspark", target="cuda-sm90", batch=1)
    spec = config.llm_kwargs(dspark)["speculative_config"]
    assert spec["method"] == "dspark" and spec["model"].endswith("suites/models/tiny-qwen3-dspark-draft")
    assert config.runner_for(dspark) == "v2"  # DSpark is model runner v2's alone, whatever the track's runner
    dflash = _row(st, "48804", "tiny-qwen3-dflash", target="cuda-sm90", batch=1)
    assert config.runner_for(dflash) == "v1" and config.llm_kwargs(dflash)["speculative_config"]["method"] == "dflash"


def test_hub_rows_without_weights_are_skipped_with_the_reason(engine_pkg, tmp_path, monkeypatch):
    from engine import config

    monkeypatch.setenv(config.ENV_MODEL_CACHE, str(tmp_path))
    row = _row(stack.load(), "48804", "llama-3-8b-eagle", target="cuda-sm90", backend="FLASH_ATTN", batch=1)
    with pytest.raises(pytest.skip.Exception, match="meta-llama/Meta-Llama-3-8B-Instruct are not in the model cache"):
        config.model_dir(row)
    snap = tmp_path / "models--meta-llama--Meta-Llama-3-8B-Instruct" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    assert config.model_dir(row) == snap


def test_a_standard_hub_cache_is_found(engine_pkg, tmp_path, monkeypatch):
    """$STACKGATE_MODEL_CACHE is HF_HOME (what ci run mounts): weights live under its hub/ folder."""
    from engine import config

    monkeypatch.setenv(config.ENV_MODEL_CACHE, str(tmp_path))
    row = _row(stack.load(), "48804", "llama-3-8b-eagle", target="cuda-sm90", backend="FLASH_ATTN", batch=1)
    snap = tmp_path / "hub" / "models--meta-llama--Meta-Llama-3-8B-Instruct" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    assert config.model_dir(row) == snap


def test_an_absent_change_fails_even_where_the_weights_are_absent(engine_pkg, tmp_path, monkeypatch):
    from engine import config

    monkeypatch.setenv(config.ENV_MODEL_CACHE, str(tmp_path))
    monkeypatch.setattr(config, "change_absent", "change #48804 absent in vLLM 0.26.0")
    row = _row(stack.load(), "48804", "llama-3-8b-eagle", target="cuda-sm90", backend="FLASH_ATTN", batch=1)
    with pytest.raises(pytest.fail.Exception, match=r"change #48804 absent in vLLM 0\.26\.0; its weights"):
        config.model_dir(row)


def test_a_row_the_probes_cannot_watch_fails_saying_so(engine_pkg):
    """TP 2 runs its workers in other processes, where no in-process probe sees graph replays."""
    from engine.row_record import Evidence

    row = _row(stack.load(), "46849", "tiny-llama-eagle", target="cuda-sm90", backend="FLASH_ATTN", batch=8)
    wide = dataclasses.replace(row, data={**row.data, "tp": 2}, gpus=2)
    request = types.SimpleNamespace(node=types.SimpleNamespace(user_properties=[]))
    with pytest.raises(pytest.fail.Exception, match="in-process probes cannot watch worker processes"):
        Evidence.start(request, wide)


def test_presence_reads_the_vllm_source_tree(engine_pkg, tmp_path, monkeypatch):
    """Each row's presence by the probe its change file names (rows.json `probe`)."""
    from engine import presence

    st = stack.load()
    eagle = _row(st, "48804", "tiny-llama-eagle", target="cuda-sm90", backend="FLASH_ATTN", batch=1)
    fused = _row(st, "46849", "tiny-llama-eagle", target="cuda-sm90", backend="FLASH_ATTN", batch=8)
    vllm = tmp_path / "vllm"
    (vllm / "model_executor" / "warmup").mkdir(parents=True)
    (vllm / "__init__.py").write_text("")
    (vllm / "model_executor" / "warmup" / "kernel_warmup.py").write_text("# warms block tables\n")
    monkeypatch.setattr(presence, "vllm_root", lambda: vllm)
    assert not presence.of(eagle).present  # stock: no eagle_spec_decode_warmup module
    (vllm / "model_executor" / "warmup" / "eagle_spec_decode_warmup.py").write_text("def warmup(): ...\n")
    assert not presence.of(eagle).present  # present but never called from kernel_warmup
    (vllm / "model_executor" / "warmup" / "kernel_warmup.py").write_text("from .eagle_spec_decode_warmup import x\n")
    found = presence.of(eagle)
    assert found.present and "eagle_spec_decode_warmup.py" in found.evidence
    assert not presence.of(fused).present
    # #46849 as merged (0.28.0 to 0.31.0), then with the speculator moved (0.32.0 on): present either way
    (vllm / "v1" / "attention").mkdir(parents=True)
    (vllm / "v1" / "attention" / "backend.py").write_text("def update_draft_decode_metadata(self, m): ...\n")
    for folder in ("autoregressive", "target_dependent_ar"):
        spec = vllm / "v1" / "worker" / "gpu" / "spec_decode" / folder / "speculator.py"
        spec.parent.mkdir(parents=True)
        spec.write_text("class S:\n    def _multi_step_decode(self): ...\n")
        assert not presence.of(fused).present  # the unfused loop alone
        spec.write_text("class S:\n    def _fused_multi_step_decode(self): ...\n")
        found = presence.of(fused)
        assert found.present and f"spec_decode/{folder}/speculator.py" in found.evidence
        spec.unlink()


def test_the_upstream_warm_up_series_is_found_wherever_its_zeroer_warm_up_is_called(engine_pkg, tmp_path, monkeypatch):
    """#49903 on #47451: KVBlockZeroer.warmup, called from kernel_warmup (0.27-0.33) or the GPU worker's warm-up
    (0.34 on), and #47451's jit_warmup.py beneath it; absent in 0.26.0, and absent without the infrastructure."""
    from engine import presence

    row = _row(stack.load(), "49903", "tiny-llama-eagle", target="cuda-sm90", backend="FLASH_ATTN", batch=1)

    vllm = tmp_path / "vllm"
    for rel, text in {
        "model_executor/warmup/kernel_warmup.py": "def kernel_warmup(worker): ...\n",
        "v1/worker/utils.py": "class KVBlockZeroer:\n    def zero_block_ids(self, ids): ...\n",
        "v1/worker/gpu/warmup.py": "def warmup(runner): ...\n",
    }.items():
        (vllm / rel).parent.mkdir(parents=True, exist_ok=True)
        (vllm / rel).write_text(text)
    monkeypatch.setattr(presence, "vllm_root", lambda: vllm)
    assert not presence.of(row).present  # 0.26.0
    (vllm / "v1/worker/utils.py").write_text("class KVBlockZeroer:\n    def warmup(self, num_kv_blocks: int): ...\n")
    (vllm / "model_executor/warmup/kernel_warmup.py").write_text("zeroer.warmup(runner.kv_cache_config.num_blocks)\n")
    assert not presence.of(row).present  # without #47451's infrastructure
    (vllm / "model_executor/warmup/jit_warmup.py").write_text("def jit_warmup(): ...\n")
    found = presence.of(row)
    assert found.present and "called from vllm/model_executor/warmup/kernel_warmup.py" in found.evidence
    (vllm / "model_executor/warmup/kernel_warmup.py").write_text("def kernel_warmup(worker): ...\n")
    (vllm / "v1/worker/gpu/warmup.py").write_text("runner.kv_block_zeroer.warmup(n)\n")
    found = presence.of(row)
    assert found.present and "called from vllm/v1/worker/gpu/warmup.py" in found.evidence


VLLM_WARMUP = {
    "vllm/__init__.py": "",
    "vllm/model_executor/__init__.py": "",
    "vllm/model_executor/warmup/__init__.py": "",
    "vllm/model_executor/warmup/v1_block_table_warmup.py": "CALLS = []\n\n\ndef warm_v1_block_table_kernels(runner):\n"
    "    CALLS.append('block table')\n",
    "vllm/model_executor/warmup/kernel_warmup.py": "from vllm.model_executor.warmup.v1_block_table_warmup import "
    "warm_v1_block_table_kernels\nfrom vllm.v1.worker.utils import KVBlockZeroer\n\n\ndef kernel_warmup(runner):\n"
    "    warm_v1_block_table_kernels(runner)\n    KVBlockZeroer().warmup(4)\n",
    "vllm/v1/__init__.py": "",
    "vllm/v1/worker/__init__.py": "",
    "vllm/v1/worker/utils.py": "from vllm.model_executor.warmup.v1_block_table_warmup import CALLS\n\n\n"
    "class KVBlockZeroer:\n    def warmup(self, num_kv_blocks):\n        CALLS.append('zeroer')\n",
}


def test_the_reference_run_turns_the_series_warm_up_off_and_back_on(engine_pkg, tmp_path, monkeypatch):
    """The tolerance of #49903 compares against the same build with its warm-up off: the slot-mapping kernel's and the
    KV-block zeroer's warm-ups become no-ops for the reference engine, and come back for the process's later rows."""
    import importlib

    for rel, text in VLLM_WARMUP.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        monkeypatch.delitem(sys.modules, name)
    from engine import in_process

    kernel_warmup = importlib.import_module("vllm.model_executor.warmup.kernel_warmup")
    calls = importlib.import_module("vllm.model_executor.warmup.v1_block_table_warmup").CALLS
    st = stack.load()
    series = _row(st, "49903", "tiny-llama-eagle", target="cuda-sm90", backend="FLASH_ATTN", batch=1)
    replaced = in_process.disable_warmup(series["engine_options"])
    assert replaced == ["v1_block_table_warmup.warm_v1_block_table_kernels", "KVBlockZeroer.warmup"]
    kernel_warmup.kernel_warmup(None)
    assert calls == []  # the reference engine warms nothing
    in_process.restore_warmup()
    kernel_warmup.kernel_warmup(None)
    assert calls == ["block table", "zeroer"]
    eagle = _row(st, "48804", "tiny-llama-eagle", target="cuda-sm90", backend="FLASH_ATTN", batch=1)
    assert in_process.disable_warmup(eagle["engine_options"]) == []  # another change's warm-up modules: none here
    with pytest.raises(LookupError, match=r"not one of suites/engine/tracked\.py's OPTIONS"):
        in_process.disable_warmup("49903")  # options are named, never keyed by a change id


class _Node:
    def __init__(self) -> None:
        self.user_properties: list = []


class _Request:
    def __init__(self) -> None:
        self.node = _Node()


def test_evidence_applies_the_rows_tolerance_and_graph_replay(engine_pkg):
    from engine.row_record import Evidence

    row = _row(stack.load(), "46849", "tiny-llama-eagle", target="cuda-sm90", backend="FLASH_ATTN", batch=8)
    ev = Evidence(_Request(), row)
    ev.graph_replay(2.0)  # k-1 replays per draft loop: the unfused path
    ev.tolerance(0, "greedy_token_mismatches")
    ev.tolerance(float("nan"), "greedy_token_mismatches")  # NaN never passes
    assert ev.failures == [
        "graph-replay assertion failed: draft_graph_replays_per_step = 2, expected == 1",
        "greedy_token_mismatches not measured against row non-speculative greedy decoding",
    ]
    with pytest.raises(pytest.fail.Exception, match="graph-replay assertion failed"):
        ev.finish()
    # where vLLM ran the row in a lower graph mode than it asked (FlashInfer on SM90 drops full graphs for spec
    # decode), the failure says so; where it ran the row's own mode, it says nothing more
    downgraded = Evidence(_Request(), row)
    downgraded.graph_replay(0.0, ran_mode="PIECEWISE")
    downgraded.graph_replay(0.0, ran_mode=row["cudagraph_mode"])
    assert downgraded.failures == [
        "graph-replay assertion failed: draft_graph_replays_per_step = 0, expected == 1 "
        f"(vLLM ran cudagraph_mode PIECEWISE, not the row's {row['cudagraph_mode']})",
        "graph-replay assertion failed: draft_graph_replays_per_step = 0, expected == 1",
    ]
    ok = Evidence(_Request(), row)
    ok.graph_replay(1.0, ran_mode="PIECEWISE")  # a pass stays a pass
    ok.tolerance(0, "greedy_token_mismatches")
    ok.metric("draft_step_ms", [0.3, 0.4], "ms", "warm")
    ok.finish()
    assert ok.node.user_properties[0][0] == "stackgate.metric.draft_step_ms"


def test_the_graph_mode_vllm_settled_on_is_read_from_the_runners_config(engine_pkg):
    """vLLM stores the mode it resolved on the runner's compilation config; a runner without one gives None."""
    from engine import in_process

    def engine_with(runner):
        worker = types.SimpleNamespace(model_runner=runner)
        executor = types.SimpleNamespace(driver_worker=types.SimpleNamespace(worker=worker))
        llm_engine = types.SimpleNamespace(model_executor=executor)
        return types.SimpleNamespace(llm=types.SimpleNamespace(llm_engine=llm_engine))

    mode = types.SimpleNamespace(name="PIECEWISE")
    runner = types.SimpleNamespace(compilation_config=types.SimpleNamespace(cudagraph_mode=mode))
    assert in_process.cudagraph_mode(engine_with(runner)) == "PIECEWISE"
    assert in_process.cudagraph_mode(engine_with(types.SimpleNamespace())) is None


def test_once_per_process_work_in_a_request_is_timed_and_named(engine_pkg, monkeypatch):
    from engine import first_calls
    from harness import profile

    monkeypatch.setattr(profile, "_first_calls", [])
    mod = types.ModuleType("fake_vllm_logits")
    mod.scan = lambda: time.sleep(0.02) or ["plugin"]
    monkeypatch.setitem(sys.modules, "fake_vllm_logits", mod)
    site = first_calls.Site("fake_vllm_logits", "scan", "logits-processor plugin scan")
    gone = first_calls.Site("no_such_vllm_module", "x", "a site this vLLM lacks")
    original = mod.scan
    with first_calls.timed((site, gone)):
        assert sys.modules["fake_vllm_logits"].scan() == ["plugin"]  # looked up by name where it is called
    assert mod.scan is original
    mod.scan()  # outside a timed request: not counted
    text = profile.describe_first_calls()
    assert text.startswith("logits-processor plugin scan (") and text.endswith(" ms)")
    assert 15 <= float(text.split("(")[1].split(" ms")[0]) < 1000


def test_the_vllm_build_names_its_commit_where_it_recorded_one(engine_pkg, tmp_path, monkeypatch):
    from engine import presence

    vllm = tmp_path / "vllm"
    vllm.mkdir()
    monkeypatch.setattr(presence, "vllm_root", lambda: vllm)
    assert presence.vllm_commit() is None  # a source tree without a build's _version.py
    (vllm / "_version.py").write_text("__version__ = version = '0.26.0'\n__commit_id__ = commit_id = 'gffd46bfab'\n")
    assert presence.vllm_commit() == "gffd46bfab"
    (vllm / "_version.py").write_text("__commit_id__ = commit_id = None\n")
    assert presence.vllm_commit() is None


def test_a_new_prompt_length_after_the_warm_requests_is_timed_twice_and_named(engine_pkg, monkeypatch):
    """What a prompt length's first use costs, apart from the process's first request: the row's prompts cut to 3/4,
    run twice after the warm ones; the difference is named beside the first request's once-per-process work."""
    from engine import in_process
    from harness import profile as profiling

    monkeypatch.setattr(in_process, "cuda_sync", lambda: None)
    monkeypatch.setattr(profiling, "_first_calls", [])
    seen: list[list[int]] = []

    class LLM:
        def generate(self, prompts, params, use_tqdm):
            seen.append([len(p["prompt_token_ids"]) for p in prompts])
            time.sleep(0.05 if len(seen) == 1 else 0.0)  # the first request at the new length pays
            return []

    prompts = [{"prompt_token_ids": list(range(512))}, {"prompt_token_ids": list(range(100))}]
    extra = in_process.new_length_first_use(in_process.Engine(llm=LLM(), ready_s=0.0), prompts, None)
    assert seen == [[384, 75], [384, 75]]
    assert extra >= 40.0
    assert profiling.describe_first_calls().startswith(f"{in_process.NEW_LENGTH} (")


def test_the_suites_are_a_vllm_general_plugin_wherever_they_are_on_the_path():
    """vLLM loads `vllm.general_plugins` entry points in every process it starts (engine core, TP workers); the
    suites' folder carries the entry point, so any process with the suites on its path registers the loader."""
    import subprocess

    probe = (
        "from importlib.metadata import entry_points; "
        "print([e.value for e in entry_points(group='vllm.general_plugins') if e.name == 'stackgate_dummy_weights'])"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": str(SUITES), "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert done.stdout.strip() == "['engine.dummy_weights:register']"


def test_a_row_records_its_vllm_tree_and_fork_build(engine_pkg, tmp_path, monkeypatch):
    """What Evidence.start records of the vLLM it imports: the tree's content id always; for a fork build (its
    manifest beside the package) the imported changes it holds; and a tree edited after its build fails the row."""
    import json as _json

    from engine.row_record import Evidence
    from harness import vllm_build

    vllm = tmp_path / "site" / "vllm"
    vllm.mkdir(parents=True)
    (vllm / "__init__.py").write_text("")
    request = types.SimpleNamespace(node=types.SimpleNamespace(user_properties=[]))
    ev = Evidence(request, row=None)
    ev.build(vllm)
    props = dict(request.node.user_properties)
    assert props == {"stackgate.vllm_build": vllm_build.tree_id(vllm)} and not ev.failures
    manifest = {"schema": 1, "vllm_build": vllm_build.tree_id(vllm), "changes": ["46514", "48407"],
                "without": "46849", "fork": {"name": "demo", "ref": "main", "built": "ab" * 20, "commit": "cd" * 20},
                "base": {"version": "0.26.0", "commit": "ef" * 20}}  # fmt: skip
    (vllm.parent / vllm_build.MANIFEST).write_text(_json.dumps(manifest))
    request.node.user_properties.clear()
    ev.build(vllm)
    props = dict(request.node.user_properties)
    assert props["stackgate.fork_changes"] == "46514,48407" and props["stackgate.fork_without"] == "46849"
    assert props["stackgate.fork"] == "demo main " + "ab" * 6 and not ev.failures
    # the fork and base it came from, the same for the build and its ablations: what --compare pairs them by
    assert props["stackgate.fork_source"] == f"demo@{'cd' * 20} over 0.26.0@{'ef' * 20}"
    (vllm / "__init__.py").write_text("edited = True\n")
    ev.build(vllm)
    assert "is not the build" in ev.failures[0]


def test_an_absent_change_names_the_ablated_fork_build_not_the_release(engine_pkg, tmp_path, monkeypatch):
    """A row on the fork without #46849 says the change is absent in that build, by its fork and commit."""
    import json

    from engine import presence

    vllm = tmp_path / "vllm"
    vllm.mkdir()
    monkeypatch.setattr(presence, "vllm_root", lambda: vllm)
    monkeypatch.setattr(presence, "vllm_version", lambda: "0.26.0")
    found = presence.Presence(change="46849", present=False, evidence="no fused draft step")
    assert found.message() == "change #46849 absent in vLLM 0.26.0: no fused draft step"
    built = {"schema": 1, "fork": {"name": "demo-fork", "ref": "main", "built": "ffa236ab7621" + "0" * 28},
             "without": "46849"}  # fmt: skip
    (tmp_path / "stackgate-vllm-build.json").write_text(json.dumps(built))
    assert found.message() == (
        "change #46849 absent in fork demo-fork main without #46849 (ffa236ab7621): no fused draft step"
    )
