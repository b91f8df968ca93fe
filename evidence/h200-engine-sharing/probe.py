"""What one process can share between rows, on vLLM 0.26.0 (the question behind shared engines, #33).

`probe.py import`: a fresh interpreter's `import torch` and `from vllm import LLM`, timed.
`probe.py engines`: in one process, as the suites run (in-process engine, random weights, fixed KV budget):
the tiny Llama + EAGLE engine of a kernel-warmup row (A); a second engine without the drafter (B, the row
test's reference) built while A is alive; A used again after B; both stopped; A built again in the same
process. Each step timed, each failure recorded instead of ending the probe. One JSON line on stdout.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
import time
import traceback
from pathlib import Path

SUITES = Path(__file__).resolve().parents[2] / "suites"
MODEL, DRAFT = SUITES / "models" / "tiny-llama", SUITES / "models" / "tiny-llama-eagle-draft"


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000.0, 1)


def imports() -> dict:
    t0 = time.perf_counter()
    import torch  # noqa: F401

    torch_ms = _ms(t0)
    from vllm import LLM  # noqa: F401

    return {"import_torch_ms": torch_ms, "import_torch_and_vllm_ms": _ms(t0)}


def engines() -> dict:
    os.environ.update(VLLM_ENABLE_V1_MULTIPROCESSING="0", VLLM_USE_V2_MODEL_RUNNER="0", VLLM_NO_USAGE_STATS="1")
    out: dict = {"imports": imports()}
    import torch
    from vllm import LLM, SamplingParams

    base = {
        "model": str(MODEL),
        "skip_tokenizer_init": True,
        "max_model_len": 512 + 64 + 64,
        "max_num_seqs": 8,
        "gpu_memory_utilization": 0.1,
        "kv_cache_memory_bytes": 2 << 30,
        "load_format": "dummy",
        "attention_config": {"backend": "FLASH_ATTN"},
        "compilation_config": {"cudagraph_mode": "FULL_AND_PIECEWISE", "max_cudagraph_capture_size": 32},
        "disable_log_stats": False,
        "seed": 0,
        "enable_prefix_caching": False,
    }
    main = {**base, "speculative_config": {"method": "eagle", "model": str(DRAFT), "num_speculative_tokens": 3}}
    prompts = [{"prompt_token_ids": [(7 * i + j) % 1000 + 1 for j in range(512)]} for i in range(4)]
    params = SamplingParams(max_tokens=64, temperature=0.0, detokenize=False, ignore_eos=True)

    def build(name: str, kwargs: dict):
        t0 = time.perf_counter()
        try:
            llm = LLM(**kwargs)
        except Exception as exc:  # recorded: the probe goes on with what it can
            out[f"{name}_error"] = f"{type(exc).__name__}: {exc}"[:400]
            out[f"{name}_trace"] = traceback.format_exc()[-1500:]
            return None
        out[f"{name}_ready_ms"] = _ms(t0)
        return llm

    def serve(name: str, llm, times: int = 4) -> list[list[int]] | None:
        try:
            samples, toks = [], None
            for _ in range(times):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                res = llm.generate(prompts, params, use_tqdm=False)
                torch.cuda.synchronize()
                samples.append(_ms(t0))
                toks = [list(r.outputs[0].token_ids) for r in res]
            out[f"{name}_request_ms"] = samples  # the first is the engine's first request
            return toks
        except Exception as exc:
            out[f"{name}_error"] = f"{type(exc).__name__}: {exc}"[:400]
            out[f"{name}_trace"] = traceback.format_exc()[-1500:]
            return None

    def stop(llm) -> None:
        with contextlib.suppress(Exception):
            llm.llm_engine.engine_core.shutdown()

    a = build("A", main)
    a_tokens = serve("A", a) if a else None
    b = build("B_while_A_alive", base) if a else None
    if b:
        serve("B_while_A_alive", b)
        out["A_after_B_same_tokens"] = serve("A_after_B", a, times=2) == a_tokens
    out["gpu_gib_with_both"] = round(torch.cuda.memory_allocated() / 2**30, 2)
    t0 = time.perf_counter()
    for llm in (b, a):
        if llm is not None:
            stop(llm)
    a = b = None
    gc.collect()
    with contextlib.suppress(Exception):
        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

        cleanup_dist_env_and_memory()
    out["stop_both_ms"] = _ms(t0)
    a2 = build("A_again_same_process", main)
    if a2:
        again = serve("A_again_same_process", a2, times=2)
        out["A_again_same_tokens"] = again == a_tokens
    return out


if __name__ == "__main__":
    t_start = time.perf_counter()
    result = imports() if sys.argv[1:] == ["import"] else engines()
    result["process_ms"] = _ms(t_start)
    print("PROBE " + json.dumps(result), flush=True)
    os._exit(0)  # vLLM's atexit hooks are not under test
