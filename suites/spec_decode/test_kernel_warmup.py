"""The kernel-warm-up track: kernels warmed at engine start, so the first request compiles nothing. #48804 (the
spec-decode kernels, closed upstream) and #49903 (the runner-owned kernels on #47451's JIT warm-up infrastructure).

Per drafter row: a warm-up its engine's start skipped because it raised (engine.start_log) fails the row; engine-ready
time, the first request in this fresh process (cold) and steady-state requests after it (warm), compiles seen by the
JIT sentinel after the engine reported ready (all processes), CUDA-graph captures after ready, acceptance length;
and, where the port is present, greedy outputs identical to a run with the warm-up turned off.
"""

from __future__ import annotations

import statistics

import pytest
from engine import config, in_process
from engine.row_record import Evidence
from harness import jit_seen
from harness.graphs import GraphCounter
from harness.profile import last_warm

WARM_REPEATS = 5


@pytest.mark.track("kernel-warmup")
def test_kernel_warmup(row, request, jit_window):
    ev = Evidence.start(request, row)

    kwargs = config.llm_kwargs(row)
    engine = in_process.start(kwargs, share=True)
    ev.metric("engine_ready_s", engine.ready_s, "s", "cold")
    if engine.failed_warmups is None:
        ev.prop("warmup.failed", "not read: the engine's start output is not a file")
    elif engine.failed_warmups:  # a warm-up inside `except Exception` that raised: nothing it should warm was warmed
        ev.prop("warmup.failed", "; ".join(engine.failed_warmups))
        ev.expect(False, f"a warm-up failed and was skipped at engine start: {'; '.join(engine.failed_warmups)}")
    startup = jit_window.seen()
    if startup.available:
        ev.metric("compiles_before_ready", startup.compiles, "count", "cold")

    prompts = config.prompts(row)
    params = in_process.greedy(config.MAX_TOKENS)
    after_ready = jit_seen.Window()
    with GraphCounter() as graphs:
        before = in_process.spec_stats(engine)
        cold_ms, out = in_process.timed_ms(engine, prompts, params, profile="cold")
        in_process.generate(engine, prompts, params)  # settles: warm samples start after the first repeat
        warm_ms = [
            in_process.timed_ms(engine, prompts, params, profile=last_warm(i, WARM_REPEATS))[0]
            for i in range(WARM_REPEATS)
        ]
        after = in_process.spec_stats(engine)
    in_process.new_length_first_use(engine, prompts, params)  # inside the JIT window: a compile it causes counts
    seen = after_ready.seen()
    tokens = in_process.token_ids(out)

    ev.metric("cold_first_request_ms", cold_ms, "ms", "cold")
    ev.metric("warm_request_ms", warm_ms, "ms", "warm")
    ev.metric("cold_warm_ratio", cold_ms / statistics.median(warm_ms), "ratio")
    ev.metric("graph_captures_after_ready", graphs.captures, "count", "cold")
    if seen.available:
        ev.metric("compiles_after_ready", seen.compiles, "count", "cold")
        ev.prop("jit.after_ready_kernels", ",".join(seen.named()))
    accept = in_process.acceptance_length(before, after)
    if accept is not None:
        ev.metric("acceptance_length", accept, "tokens", "warm")
    if row.model_info.get("weights") == "dummy":
        ev.prop("acceptance_note", "random weights: acceptance length is recorded, not meaningful")

    if ev.absent is None:
        in_process.stop(engine)
        engine = None
        disabled = in_process.disable_warmup(row["engine_options"])
        ev.prop("reference_disabled", disabled)
        ev.expect(bool(disabled), "the reference run could not turn the warm-up off: no warm-up function was found")
        ref = in_process.start(kwargs)  # its own: built under the patch, never shared
        ref_tokens = in_process.token_ids(in_process.generate(ref, prompts, params))
        in_process.stop(ref)
        in_process.restore_warmup()  # a later row of a shared process builds its engines with the warm-up
        ev.metric("greedy_token_mismatches", in_process.mismatches(tokens, ref_tokens), "tokens", "none")
        ev.tolerance(in_process.mismatches(tokens, ref_tokens), "greedy_token_mismatches")
    else:
        ev.prop("reference", "not run: without the port there is no warm-up to turn off")

    if not seen.available:
        ev.expect(False, "cannot prove the first request compiled nothing: the JIT sentinel is not installed")
    else:
        ev.expect(not seen.compiles, f"{seen.compiles} Triton compile(s) after engine ready: {', '.join(seen.named())}")
    ev.graph_replay(graphs.captures if graphs.available else None)
    ev.finish()
