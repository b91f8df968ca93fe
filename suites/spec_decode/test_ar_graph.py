"""#46849: the k-1 autoregressive draft decodes of one speculation step replay one CUDA graph, not k-1.

Runs in model runner v2 (where the autoregressive speculator lives), in-process, so the draft loop can
be watched: FULL graph replays per draft loop, CUDA-event time per draft step, kernel and graph launches
per draft step from the torch profiler, and greedy output identical to non-speculative decoding.
"""

from __future__ import annotations

import statistics

import pytest
from engine import config, in_process, probes
from engine.row_record import Evidence
from harness.profile import last_warm

WARM_REPEATS = 10  # timed warm requests: their draft steps are the draft-step samples (a median over ~100 steps)
SETTLE = 2  # untimed requests between the cold one and the timed: the first steps after a cold start are unsteady


def _measure(engine, prompts, params):
    """Cold request, warm requests, and the draft-loop record for the warm ones."""
    with probes.draft_loop(in_process.runner(engine)) as loop:
        cold_ms, out = in_process.timed_ms(engine, prompts, params, profile="cold")
        for _ in range(SETTLE):
            in_process.generate(engine, prompts, params)
        first_warm = loop.loops
        warm_ms = [
            in_process.timed_ms(engine, prompts, params, profile=last_warm(i, WARM_REPEATS))[0]
            for i in range(WARM_REPEATS)
        ]
        warm_steps = loop.draft_step_ms[first_warm:]
    return cold_ms, warm_ms, out, loop, warm_steps


def _launches(engine, prompts, params, k):
    import torch
    from torch.profiler import ProfilerActivity, profile

    with (
        probes.draft_loop(in_process.runner(engine)),
        profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof,
    ):
        in_process.generate(engine, prompts, params)
        torch.cuda.synchronize()
    kernels, graphs, windows = probes.launches_in_windows(prof)
    return (kernels + graphs) / (windows * max(k - 1, 1)) if windows else None, kernels, graphs, windows


@pytest.mark.track("ar-graph")
def test_ar_graph(row, request):
    ev = Evidence.start(request, row)

    kwargs = config.llm_kwargs(row)
    engine = in_process.start(kwargs, share=True)
    ev.metric("engine_ready_s", engine.ready_s, "s", "cold")
    ran_mode = in_process.cudagraph_mode(engine)
    if ran_mode:
        ev.prop("cudagraph_mode_ran", ran_mode)
    prompts = config.prompts(row)
    params = in_process.greedy(config.MAX_TOKENS)
    cold_ms, warm_ms, out, loop, warm_steps = _measure(engine, prompts, params)
    in_process.new_length_first_use(engine, prompts, params)
    k = loop.k
    ev.prop(
        "draft_loop",
        {"k": k, "loops": loop.loops, "replays": loop.replays, "proposes": loop.proposes, "fused": loop.fused},
    )
    ev.metric("cold_first_request_ms", cold_ms, "ms", "cold")
    ev.metric("warm_request_ms", warm_ms, "ms", "warm")
    ev.metric("warm_itl_ms", [ms / config.MAX_TOKENS for ms in warm_ms], "ms", "warm")
    if warm_steps:
        ev.metric("draft_step_ms", warm_steps, "ms", "warm")
    per_step = loop.replays_per_loop
    if per_step is not None:
        ev.metric("draft_graph_replays_per_step", per_step, "count", "warm")
    launches, kernels, graphs, windows = _launches(engine, prompts, in_process.greedy(8), k)
    if launches is not None:
        ev.metric("launches_per_draft_step", launches, "count", "warm")
        ev.prop("profiler_draft_windows", {"kernel_launches": kernels, "graph_launches": graphs, "windows": windows})
    tokens = in_process.token_ids(out)
    in_process.stop(engine)

    if ev.absent is None and row["backend"] != "FLASH_ATTN":
        ev.expect(
            False,
            f"fused vs unfused: only FLASH_ATTN's metadata builder can be switched to the unfused "
            f"path here, not {row['backend']}",
        )
    elif ev.absent is None:
        # the unfused path on the same build: draft-step launch overhead side by side
        from vllm.v1.attention.backends.flash_attn import FlashAttentionMetadataBuilder

        with probes.patched(FlashAttentionMetadataBuilder, "supports_draft_decode_metadata_update", lambda _: False):
            unfused = in_process.start(kwargs)
            _, _, _, _, unfused_steps = _measure(unfused, prompts, params)
            in_process.stop(unfused)
        if unfused_steps and warm_steps:
            ev.metric("draft_step_unfused_ms", unfused_steps, "ms", "warm")
            ev.metric(
                "draft_step_fused_over_unfused",
                statistics.median(warm_steps) / statistics.median(unfused_steps),
                "ratio",
                "warm",
            )

    reference = in_process.start(config.llm_kwargs(row, speculative_config=None), share=True)
    ref_tokens = in_process.token_ids(in_process.generate(reference, prompts, params))
    in_process.stop(reference)
    mism = in_process.mismatches(tokens, ref_tokens)
    ev.metric("greedy_token_mismatches", mism, "tokens", "none")
    ev.tolerance(mism, "greedy_token_mismatches")
    ev.graph_replay(per_step, ran_mode=ran_mode)
    ev.finish()
