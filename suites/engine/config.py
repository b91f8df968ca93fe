"""A row's engine configuration: where its weights are, the LLM(...) arguments, its prompts."""

from __future__ import annotations

import functools
import json
import os
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from harness.items import ENV_SHARE

from engine import dummy_weights

SUITES_ROOT = Path(__file__).resolve().parents[1]
ENV_MODEL_CACHE = "STACKGATE_MODEL_CACHE"
# A JSON object, architecture -> "module:class": vLLM's own model_class_overrides, to run a model on another of
# vLLM's implementations of it (vLLM 0.28.0 builds GLM-5.2 and DeepSeek-V3.2 from deepseek_v2.py unless told
# to take vllm/models/deepseek_v32/, the layer #51298 and #52512 change). Recorded on every row it touched.
ENV_MODEL_CLASSES = "STACKGATE_MODEL_CLASS_OVERRIDES"
MAX_TOKENS = 32
# holds every random-weight row's batch x context (vLLM logs the tokens it fits): on the H200, 8 GiB held 276k tokens
# of DeepSeek-V4, whose largest row needs 268k (batch 64 x 4,192), and 0.66M-3.4M of the others; 12 GiB keeps 1.5x.
# The default: a model may set its own (models.yaml kv_cache_gib, in the row's model_info; the tiny ones take 2)
DUMMY_KV_CACHE_BYTES = 12 << 30
change_absent = ""  # set by the row's presence check (one row per process): why the change is not here


def model_dir(row: Any) -> Path:
    """The model directory: a tiny config shipped in suites/models/, or weights in the model cache.

    Rows whose weights are not in the mounted cache are skipped with the reason: they cannot run here,
    which says nothing about the change.
    """
    info: Mapping[str, Any] = row.model_info
    if info.get("weights") == "dummy":
        rel = Path(str(info["config"]))
        path = SUITES_ROOT.parent / rel if rel.parts[0] == "suites" else SUITES_ROOT / rel
        if not (path / "config.json").is_file():
            pytest.fail(f"tiny model config missing: {path}/config.json (suites/models/ ships it)")
        return path
    cache = Path(os.environ.get(ENV_MODEL_CACHE) or Path.home() / ".cache" / "huggingface")
    hf = str(info.get("hf"))
    repo = f"models--{hf.replace('/', '--')}"
    # a plain folder per repo id, or the hub's layout: HF_HOME/hub/models--org--name/snapshots/<rev>/
    for candidate in (cache / hf, cache / repo, cache / "hub" / repo):
        if (candidate / "config.json").is_file():
            return candidate
        snapshots = sorted((candidate / "snapshots").glob("*/config.json")) if candidate.is_dir() else []
        if snapshots:
            return snapshots[-1].parent
    if change_absent:  # the change's absence is the finding; missing weights must not turn it into a skip
        pytest.fail(f"{change_absent}; its weights ({hf}) are not in the model cache {cache} either", pytrace=False)
    pytest.skip(f"weights for {hf} are not in the model cache {cache} (set ${ENV_MODEL_CACHE})")


def draft_dir(row: Any) -> str | None:
    drafter = row.model_info.get("drafter") or {}
    model = drafter.get("model")
    if not model:
        return None
    rel = Path(model)
    return str(SUITES_ROOT.parent / rel) if rel.parts[0] == "suites" else model


def engine_size(row: Any) -> tuple[int, int]:
    """The context and batch the row's engine is built for: what rows.json says (the largest among the plan's rows
    of its engine configuration, so that the bake and every run, shared or alone, whichever rows it holds, build one
    engine, and vLLM's compile cache serves them all); in a rows.json without it, the row's own, or in a shared child
    (harness.shared) the largest of the run's rows that differ from it only in workload."""
    size = row.get("engine_size")
    if isinstance(size, dict) and "context" in size and "batch" in size:
        return max(int(size["context"]), int(row["context"])), max(int(size["batch"]), int(row["batch"]))
    if os.environ.get(ENV_SHARE) != "1":
        return int(row["context"]), int(row["batch"])
    peers = [r for r in _run_rows() if r.engine == row.engine] or [row]
    return max(int(r["context"]) for r in peers), max(int(r["batch"]) for r in peers)


@functools.cache
def _run_rows() -> tuple[Any, ...]:
    from harness.rows import ENV_ROWS, load

    return load(os.environ[ENV_ROWS]).rows if os.environ.get(ENV_ROWS) else ()


def model_classes(architectures: list[str]) -> dict[str, str]:
    """The $STACKGATE_MODEL_CLASS_OVERRIDES entries for these architectures ({} where unset); a value that is not a
    JSON object of strings is a ValueError naming the variable."""
    raw = os.environ.get(ENV_MODEL_CLASSES, "")
    if not raw:
        return {}
    doc = json.loads(raw)
    if not isinstance(doc, dict) or not all(isinstance(v, str) for v in doc.values()):
        raise ValueError(f"${ENV_MODEL_CLASSES} must be a JSON object of architecture -> 'module:class', not {raw!r}")
    return {arch: doc[arch] for arch in architectures if arch in doc}


def kv_cache_bytes(row: Any) -> int:
    """A random-weight row's fixed KV budget: its model's (stack/models.yaml kv_cache_gib), else the default."""
    gib = row.model_info.get("kv_cache_gib")
    return int(float(gib) * 2**30) if gib else DUMMY_KV_CACHE_BYTES


def llm_kwargs(row: Any, **overrides: Any) -> dict[str, Any]:
    """LLM(...) arguments for the row's axes (backend, graph mode, KV dtype, parallelism, drafter)."""
    dummy = row.model_info.get("weights") == "dummy"
    path = model_dir(row)
    context, batch = engine_size(row)
    kw: dict[str, Any] = {
        "model": str(path),
        "skip_tokenizer_init": True,
        "max_model_len": context + MAX_TOKENS + 64,
        "max_num_seqs": max(batch, 8),
        # random weights: only vLLM's start check reads it, the KV budget being fixed (below)
        "gpu_memory_utilization": 0.1 if dummy else 0.85,
        "tensor_parallel_size": int(row["tp"]),
        "kv_cache_dtype": row["kv_cache_dtype"],
        "attention_config": {"backend": row["backend"]},
        # graphs for the batch sizes this row runs, not vLLM's default ladder: engine start stays short
        "compilation_config": {
            "cudagraph_mode": row["cudagraph_mode"],
            "max_cudagraph_capture_size": max(batch, 8) * (1 + int(row["num_speculative_tokens"])),
        },
        "disable_log_stats": False,
        "seed": 0,
        # every timed request does the same work: with vLLM's prefix cache on (its default), a repeat of the
        # first request's prompts prefills one token, so warm samples (and a short prefill's timing) would
        # measure cache hits against a first request that really prefilled (seen in H200 profiles: the warm
        # request of #48407's row ran no prefill attention and no top-k selection)
        "enable_prefix_caching": False,
    }
    hf_config = json.loads((path / "config.json").read_text())
    if dummy:
        kw["load_format"] = dummy_weights.load_format(hf_config.get("architectures", []))
        # a fixed KV budget instead of a share of the device: every random-weight row's batch x context fits in a
        # few GiB, the engine is the same on an H200, a 24 GiB card and a GB10's unified memory, several rows can
        # share one device, and vLLM skips its memory profiling (whose check fails when another process on the
        # device frees memory meanwhile, vllm/v1/worker/gpu_worker.py)
        kw["kv_cache_memory_bytes"] = kv_cache_bytes(row)
    classes = model_classes(hf_config.get("architectures", []))
    if classes:
        kw["model_class_overrides"] = classes
    if "vision_config" in hf_config:
        kw["language_model_only"] = True  # a vision-language checkpoint: the tracks exercise its language model
    if "linear_key_head_dim" in hf_config.get("text_config", hf_config):
        # Gated DeltaNet prefill: on SM90 vLLM 0.26.0 picks FlashInfer's CuTe DSL kernel by default
        # (_resolve_gdn_prefill_backend, vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py:119), which
        # compiles at first use (vLLM warns "Set --gdn-prefill-backend triton to skip JIT") and, without the
        # nvidia-cutlass-dsl package, fails the engine's FlashInfer autotune run ("SM90 GDN prefill DSL kernel is
        # unavailable", flashinfer/gdn_prefill.py:456). Triton/FLA, the path vLLM takes on every other target here,
        # through vLLM's own switch (EngineArgs.gdn_prefill_backend, written to additional_config).
        kw["gdn_prefill_backend"] = "triton"
    if int(row["tp"]) * int(row["dp"]) > 1:
        # vLLM 0.26.0 fuses TP all-reduce with RMSNorm through FlashInfer's comm kernels by default: a JIT module
        # that JIT refused (FLASHINFER_DISABLE_JIT) does not load, and whose default backend (mnnvl) allocates
        # NVSwitch multicast memory, which stays off on a shared host. The rows run without that fusion.
        kw["compilation_config"]["pass_config"] = {"fuse_allreduce_rms": False}
    if int(row["dp"]) > 1:
        # Offline DP in vLLM 0.26.0: LLM(data_parallel_size>1) is refused unless each DP rank is its own process
        # started torchrun-style (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT; engine.dp starts them), with the
        # external launcher; the env route (VLLM_DP_SIZE) refuses dense models (vllm/config/parallel.py).
        kw["data_parallel_size"] = int(row["dp"])
        kw["distributed_executor_backend"] = "external_launcher"
    if row["ep"]:
        kw["enable_expert_parallel"] = True
    if int(row["dcp"]) > 1:
        kw["decode_context_parallel_size"] = int(row["dcp"])
    if row["dbo"]:
        kw["enable_dbo"] = True
    if row["spec_method"]:
        spec: dict[str, Any] = {
            "method": row["spec_method"],
            "num_speculative_tokens": int(row["num_speculative_tokens"]),
        }
        draft = draft_dir(row)
        if draft:
            spec["model"] = draft
        kw["speculative_config"] = spec
    for key, value in overrides.items():
        if value is None:
            kw.pop(key, None)
        elif isinstance(value, dict) and isinstance(kw.get(key), dict):
            kw[key] = {**kw[key], **value}
        else:
            kw[key] = value
    return kw


def prompts(row: Any, *, length: int | None = None, count: int | None = None, salt: str = "") -> list[dict[str, Any]]:
    """Deterministic token-id prompts (no tokenizer): `count` (default: the row's batch) of `length` tokens."""
    rng = random.Random(f"{row.id}/{salt}")
    n = int(length if length is not None else row["context"])
    return [
        {"prompt_token_ids": [rng.randrange(16, 8000) for _ in range(n)]} for _ in range(count or int(row["batch"]))
    ]


def set_engine_env(*, runner: str | None, inprocess: bool = True) -> dict[str, str]:
    """Environment the engine must see before vllm is imported. Returns what was set, for the record.

    In-process (VLLM_ENABLE_V1_MULTIPROCESSING=0) lets the probes wrap the worker's objects; `runner`
    picks the model runner ("v1" or "v2") where the change under test lives.
    """
    env = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0" if inprocess else "1", "VLLM_NO_USAGE_STATS": "1"}
    if runner is not None:
        env["VLLM_USE_V2_MODEL_RUNNER"] = "1" if runner == "v2" else "0"
    os.environ.update(env)
    return env


def model_config(row: Any) -> dict[str, Any]:
    """The row's model config.json (index_topk and friends), read from the model directory."""
    return json.loads((model_dir(row) / "config.json").read_text())


# The model runner each track's change lives in: #48804's kernels are the V1 runner's, #46849's
# autoregressive speculator is model runner v2's, the sparse-MLA paths are exercised through V1.
# The composition rows take vLLM's own default runner (not listed): they ask whether the features compose as shipped.
RUNNER_FOR_TRACK = {"kernel-warmup": "v1", "ar-graph": "v2", "fp8-ds-mla": "v1", "indexer-skip": "v1"}


# Drafters that only one model runner implements in the vLLM under test, whatever the track: DSpark is
# model runner v2's alone in vLLM 0.26.0 (vllm/config/vllm.py forces V2 for it; V1 cannot draft with it).
RUNNER_FOR_DRAFTER = {"dspark": "v2"}


def runner_for(row: Any) -> str | None:
    drafter = (row.model_info.get("drafter") or {}).get("type")
    return RUNNER_FOR_DRAFTER.get(drafter) or RUNNER_FOR_TRACK.get(row.track)
