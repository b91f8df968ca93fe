"""Starting, driving and stopping an in-process vLLM engine, one at a time on the GPU."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from harness import profile as profiling
from harness.items import ENV_SHARE

from engine import first_calls, start_log, steady, tracked


@dataclass
class Engine:
    llm: Any
    ready_s: float  # LLM(...) constructed and ready to serve, wall clock
    shared: bool = False  # kept for the next rows of this process: `stop` leaves it running
    reused: bool = False  # built for an earlier row of this process
    # warm-ups its start said it skipped because they failed (engine.start_log); None: its output could not be read
    failed_warmups: tuple[str, ...] | None = None


# Engines a shared child keeps between its rows (harness.shared), by their arguments: a row test's engine and its
# reference, two in-process engines side by side (evidence/h200-engine-sharing: same tokens, 2-6.5 s to build another
# in a warm process against 17-24 s of imports in a fresh one). At most this many live at once, any engine counted.
SHARED_ENGINES = 2
_shared: dict[str, Engine] = {}


def start(kwargs: dict[str, Any], *, share: bool = False) -> Engine:
    """The engine for `kwargs`. `share`: in a shared child, the one an earlier row built with these arguments, or one
    kept for later rows; only an engine built from its arguments alone may be shared (not under a patch)."""
    sharing = share and os.environ.get(ENV_SHARE) == "1"
    key = json.dumps(kwargs, sort_keys=True, default=str)
    if sharing and key in _shared:
        return replace(_shared[key], reused=True)
    if _shared and (not sharing or len(_shared) >= SHARED_ENGINES):
        stop_shared()  # all of them: an engine is only ever torn down with no other alive (vLLM's process state)
    from vllm import LLM

    at, t0 = start_log.mark(), time.perf_counter()
    engine = Engine(llm=LLM(**kwargs), ready_s=time.perf_counter() - t0, shared=sharing)
    steady.pin()  # after the start, which compiles on every core: the timed requests run on the same CPUs each run
    said = start_log.since(at)
    engine.failed_warmups = None if said is None else tuple(start_log.failed_warmups(said))
    if sharing:
        _shared[key] = engine
    return engine


def stop(engine: Engine | None) -> None:
    """Tear an engine down fully so the next one can profile memory (two at once trip vLLM's assertion); a shared
    engine stays for the next row of this process."""
    if engine is not None and not engine.shared:
        _teardown(engine)


def stop_shared() -> None:
    """Every engine kept for later rows, before one that does not fit beside them (a shared child's end frees the
    rest: harness.child exits without a teardown that could hang)."""
    engines = list(_shared.values())
    _shared.clear()
    for engine in engines:
        _shutdown(engine)
    if engines:
        _free_process_state()


def _teardown(engine: Engine) -> None:
    _shutdown(engine)
    _free_process_state()


def _shutdown(engine: Engine) -> None:
    # a failed engine may be half built; the cleanup below still frees what exists. No automatic collection
    # until the engine's ZeroMQ contexts are closed: collecting one first would hang (close_zmq_contexts)
    collecting = gc.isenabled()
    gc.disable()
    try:
        with contextlib.suppress(Exception):
            engine.llm.llm_engine.engine_core.shutdown()
        engine.llm = None
        close_zmq_contexts()
        gc.collect()
    finally:
        if collecting:
            gc.enable()


def _free_process_state() -> None:
    """The process's distributed groups and cached GPU memory, once no engine of it is left."""
    from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

    cleanup_dist_env_and_memory()


def close_zmq_contexts() -> int:
    """Destroy every live ZeroMQ context with linger 0; returns how many. vLLM 0.26.0's message queues between an
    in-process engine and its worker processes (TP, DCP > 1: shm_broadcast.MessageQueue) never close their
    sockets, and a socket's default linger is forever: once the workers are gone, the garbage collector's
    Context.__del__ -> term() waits for peers that will never read, and the row hangs in `stop` (seen on two
    H200s: evidence/h200-composition/tp-zmq-hang). Nothing is left to deliver after shutdown."""
    zmq = sys.modules.get("zmq")  # not imported: no engine made a context
    if zmq is None:
        return 0
    live = [o for o in gc.get_objects() if isinstance(o, zmq.Context) and not o.closed]
    for ctx in live:
        with contextlib.suppress(Exception):
            ctx.destroy(linger=0)
    return len(live)


def worker(engine: Engine) -> Any:
    """The in-process GPU worker (VLLM_ENABLE_V1_MULTIPROCESSING=0, TP 1)."""
    return engine.llm.llm_engine.model_executor.driver_worker.worker


def runner(engine: Engine) -> Any:
    return worker(engine).model_runner


def cudagraph_mode(engine: Engine) -> str | None:
    """The CUDA graph mode vLLM settled on for the engine, which may be below the one asked for: it resolves the
    mode against what the attention backend supports (CompilationConfig.resolve_cudagraph_mode_and_sizes)."""
    mode = getattr(getattr(runner(engine), "compilation_config", None), "cudagraph_mode", None)
    return getattr(mode, "name", None)


def greedy(max_tokens: int, *, logprobs: int | None = None) -> Any:
    from vllm import SamplingParams

    return SamplingParams(max_tokens=max_tokens, temperature=0.0, detokenize=False, ignore_eos=True, logprobs=logprobs)


def generate(engine: Engine, prompts: Sequence[dict[str, Any]], params: Any) -> list[Any]:
    short = kv_shortfall(engine, prompts, params)
    if short:
        raise RuntimeError(short)
    return engine.llm.generate(list(prompts), params, use_tqdm=False)


def kv_shortfall(engine: Engine, prompts: Sequence[dict[str, Any]], params: Any) -> str:
    """Why the engine's KV cache cannot hold these requests at once, or "": requests that do not fit wait for each
    other, and the row would time another workload than the one it names. A random-weight row's KV budget is fixed
    (stack/models.yaml kv_cache_gib); where vLLM's count of blocks cannot be read, nothing is said."""
    cache = getattr(getattr(getattr(engine.llm, "llm_engine", None), "vllm_config", None), "cache_config", None)
    blocks, size = getattr(cache, "num_gpu_blocks", None), getattr(cache, "block_size", None)
    if not isinstance(blocks, int) or not isinstance(size, int) or size <= 0:
        return ""
    extra = int(getattr(params, "max_tokens", 0) or 0)
    need = sum(-(-(len(p.get("prompt_token_ids", ())) + extra) // size) for p in prompts)
    if need <= blocks:
        return ""
    return (
        f"the engine's KV cache holds {blocks:,} blocks of {size} tokens, and these {len(prompts)} requests need "
        f"{need:,} at once: they would wait for each other; raise the model's kv_cache_gib in stack/models.yaml"
    )


def token_ids(outputs: Sequence[Any]) -> list[list[int]]:
    return [list(o.outputs[0].token_ids) for o in outputs]


def cuda_sync() -> None:
    import torch

    torch.cuda.synchronize()


@contextlib.contextmanager
def request(profile: str | None = None) -> Iterator[None]:
    """The window of one timed request, however the test drives the engine: the frames torch.compile traces in it
    (the row's JIT record) and its profile where that is on (harness.profile.request), and the once-per-process
    work vLLM does in it, timed (engine.first_calls)."""
    with profiling.request(profile), first_calls.timed():
        yield


def timed_ms(
    engine: Engine, prompts: Sequence[dict[str, Any]], params: Any, *, profile: str | None = None
) -> tuple[float, list[Any]]:
    """One request's wall time; `profile` names it ("cold", "warm") for harness.profile where that is on. The
    frames torch.compile traces during it are kept for the row's JIT record (harness.profile.request), and the
    once-per-process work vLLM does in it is timed (engine.first_calls), the cold one's compiles and traces too."""
    cuda_sync()
    steady.settle()
    with first_calls.compiles_named(profile == "cold"), request(profile):
        t0 = time.perf_counter()
        out = generate(engine, prompts, params)
        cuda_sync()
        ms = (time.perf_counter() - t0) * 1000.0
    return ms, out


NEW_LENGTH = "a prompt length's first use (measured on a new one after the warm requests)"


def new_length_first_use(engine: Engine, prompts: Sequence[dict[str, Any]], params: Any) -> float:
    """The row's prompts cut to 3/4 of their length, a length this process has not run, timed twice after the warm
    requests: the first of the two pays what a new prefill length costs once the process's own first-request work
    is done (on the H200, the first GEMMs at the prefill's shapes and kernels the warm-up never reached:
    evidence/h200-bake, host F), the second does not. The difference is noted beside the first request's
    once-per-process work (harness.profile.describe_first_calls) and returned, in ms."""
    shorter = [
        {"prompt_token_ids": p["prompt_token_ids"][: max(1, len(p["prompt_token_ids"]) * 3 // 4)]} for p in prompts
    ]
    first, _ = timed_ms(engine, shorter, params)
    again, _ = timed_ms(engine, shorter, params)
    profiling.note_first_call(NEW_LENGTH, max(first - again, 0.0))
    return first - again


def spec_stats(engine: Engine) -> dict[str, float]:
    """Spec-decode counters from get_metrics(); mean acceptance length = 1 + accepted / drafts."""
    from vllm.v1.metrics.reader import Counter, Histogram

    stats: dict[str, float] = {}
    for m in engine.llm.get_metrics():
        if isinstance(m, Counter) and m.name.startswith("vllm:spec_decode"):
            stats[m.name] = stats.get(m.name, 0.0) + float(m.value)
        elif isinstance(m, Histogram) and m.name == "vllm:iteration_tokens_total":
            stats["engine_steps"] = stats.get("engine_steps", 0.0) + float(m.count)
    return stats


def acceptance_length(before: dict[str, float], after: dict[str, float]) -> float | None:
    drafts = after.get("vllm:spec_decode_num_drafts", 0.0) - before.get("vllm:spec_decode_num_drafts", 0.0)
    accepted = after.get("vllm:spec_decode_num_accepted_tokens", 0.0) - before.get(
        "vllm:spec_decode_num_accepted_tokens", 0.0
    )
    return 1.0 + accepted / drafts if drafts > 0 else None


def mismatches(a: Sequence[Sequence[int]], b: Sequence[Sequence[int]]) -> int:
    """Tokens that differ position by position (a length difference counts as mismatches too)."""
    total = 0
    for x, y in zip(a, b, strict=True):
        total += sum(1 for i, j in zip(x, y, strict=False) if i != j) + abs(len(x) - len(y))
    return total


def disable_warmup(options: str) -> list[str]:
    """Turn a change's kernel warm-up into no-ops for the reference run, as the engine options its change file names
    say (rows.json `engine_options`, engine.tracked.OPTIONS): the warm-up functions of its modules, the names
    kernel_warmup imported from them, its warm-up methods. Returns what was replaced, for the record; an options key
    this image's suites lack is a LookupError."""
    import importlib
    import inspect

    if options not in tracked.OPTIONS:
        raise LookupError(
            f"engine options {options!r} are not one of suites/engine/tracked.py's OPTIONS "
            f"({', '.join(sorted(tracked.OPTIONS))}); the image's suites are older than the stack that wrote rows.json"
        )
    wanted = tracked.OPTIONS[options]
    replaced = []
    _undo.clear()
    kernel_warmup = importlib.import_module("vllm.model_executor.warmup.kernel_warmup")
    noop = lambda *a, **k: None  # noqa: E731
    for modname in wanted.warmup_modules:
        try:
            mod = importlib.import_module(f"vllm.model_executor.warmup.{modname}")
        except ImportError:
            continue
        for name, fn in list(vars(mod).items()):
            if inspect.isfunction(fn) and fn.__module__ == mod.__name__ and "warm" in name:
                setattr(mod, name, noop)
                _undo.append((mod, name, fn))
                replaced.append(f"{modname}.{name}")
                for alias, value in list(vars(kernel_warmup).items()):
                    if value is fn:
                        setattr(kernel_warmup, alias, noop)
                        _undo.append((kernel_warmup, alias, fn))
    for modname, cls_name, method in wanted.warmup_methods:
        try:
            cls = getattr(importlib.import_module(modname), cls_name)
        except (ImportError, AttributeError):
            continue
        if method in vars(cls):
            _undo.append((cls, method, vars(cls)[method]))
            setattr(cls, method, noop)
            replaced.append(f"{cls_name}.{method}")
    return replaced


_undo: list[tuple[Any, str, Any]] = []  # what disable_warmup replaced: (module or class, name, original)


def restore_warmup() -> None:
    """Undo `disable_warmup`: the engines a process builds after its reference run warm up again."""
    while _undo:
        mod, name, fn = _undo.pop()
        setattr(mod, name, fn)
