"""The seed table's question for one combination: does spec decode run composed with this TP / DP / EP / DCP
layout, graph mode, KV-cache dtype and backend?

It runs when generation completes, the drafts are accepted in a sane measure (some drafts, an acceptance
length between 1 and k + 1) and greedy output equals non-speculative decoding on the same layout. A crash or
a hang is the row's outcome: the harness records it with its cause (the log's illegal memory access or failed
assertion) or the timeout. CUDA-graph replays and captures are counted in every worker process (engine.workers);
DP rows run one process per rank (engine.dp).
"""

from __future__ import annotations

import statistics

import pytest
from engine import config, dp, in_process, workers
from engine.row_record import Evidence

WARM_REPEATS = 3


def _one_engine(row):
    """TP / DCP / EP within one engine: the workers are this engine's processes."""
    engine = in_process.start(config.llm_kwargs(row))
    prompts, params = config.prompts(row), in_process.greedy(config.MAX_TOKENS)
    with workers.graph_counts(engine.llm) as graphs:
        before = in_process.spec_stats(engine)
        cold_ms, out = in_process.timed_ms(engine, prompts, params, profile="cold")
        warm_ms = [in_process.timed_ms(engine, prompts, params)[0] for _ in range(WARM_REPEATS)]
        after = in_process.spec_stats(engine)
    in_process.new_length_first_use(engine, prompts, params)
    ready_s, tokens = engine.ready_s, in_process.token_ids(out)
    in_process.stop(engine)
    reference = in_process.start(config.llm_kwargs(row, speculative_config=None))
    ref_tokens = in_process.token_ids(in_process.generate(reference, prompts, params))
    in_process.stop(reference)
    return ready_s, cold_ms, warm_ms, before, after, graphs, tokens, ref_tokens


def _ranks(row):
    """DP: one process per rank; the row's numbers are the ranks' (the slowest rank's times, summed counters)."""
    spec, ref = dp.launch(row, reference=False), dp.launch(row, reference=True)
    before, after = {}, {}
    for r in spec:
        for total, part in ((before, r["spec_before"]), (after, r["spec_after"])):
            for k, v in part.items():
                total[k] = total.get(k, 0.0) + v
    warm = [max(r["warm_ms"][i] for r in spec) for i in range(len(spec[0]["warm_ms"]))]
    graphs = workers.WorkerGraphs([w for r in spec for w in r["graphs"]])
    tokens = [t for r in spec for t in r["tokens"]]
    ref_tokens = [t for r in ref for t in r["tokens"]]
    return (
        max(r["ready_s"] for r in spec),
        max(r["cold_ms"] for r in spec),
        warm,
        before,
        after,
        graphs,
        tokens,
        ref_tokens,
    )


@pytest.mark.track("composition")
def test_composition(row, request):
    ev = Evidence.start(request, row, every_worker=True)
    ready_s, cold_ms, warm_ms, before, after, graphs, tokens, ref_tokens = (
        _ranks(row) if int(row["dp"]) > 1 else _one_engine(row)
    )
    ev.metric("engine_ready_s", ready_s, "s", "cold")
    ev.metric("cold_first_request_ms", cold_ms, "ms", "cold")
    ev.metric("warm_request_ms", warm_ms, "ms", "warm")
    ev.prop("graphs_per_worker", graphs.per_worker)
    replays, captures = graphs.total("replays"), graphs.total("captures")
    ev.metric("workers_counted", graphs.workers, "count")
    if replays is not None:
        ev.metric("graph_replays", replays, "count", "warm")
    if captures is not None:
        ev.metric("graph_captures_after_ready", captures, "count", "warm")
    want = int(row["tp"]) * int(row["dp"])
    ev.expect(graphs.workers == want, f"graphs counted in {graphs.workers} worker process(es), not the row's {want}")
    if row["cudagraph_mode"] == "NONE":
        ev.expect(not replays, f"cudagraph_mode NONE, yet {replays} CUDA graph replay(s)")
    else:
        ev.expect(bool(replays), f"cudagraph_mode {row['cudagraph_mode']}, yet no worker replayed a CUDA graph")

    drafts = after.get("vllm:spec_decode_num_drafts", 0.0) - before.get("vllm:spec_decode_num_drafts", 0.0)
    accept = in_process.acceptance_length(before, after)
    k = int(row["num_speculative_tokens"])
    if accept is not None:
        ev.metric("acceptance_length", accept, "tokens", "warm")
    ev.expect(drafts > 0, "no drafts were proposed: speculative decoding did not run")
    ev.expect(accept is None or 1.0 <= accept <= 1.0 + k, f"acceptance length {accept} outside [1, {1 + k}]")
    if row.model_info.get("weights") == "dummy":
        ev.prop("acceptance_note", "random weights: acceptance length is recorded, not meaningful")
    mism = in_process.mismatches(tokens, ref_tokens)
    ev.metric("greedy_token_mismatches", mism, "tokens", "none")
    ev.prop("warm_request_ms_median", statistics.median(warm_ms))
    ev.tolerance(mism, "greedy_token_mismatches")
    ev.graph_replay(captures)
    ev.finish()
