"""#48407: prefills no longer than the indexer's top-k take dense MHA and skip top-k scoring.

Convergence check that the vLLM under test carries the change; for a prefill of the row's length, the
indexer's scoring calls are counted (zero expected at or under the top-k, some above it, and some on a layer whose
dense prefill vllm#52512 turned off: `supports_dense_mha_prefill = False`, GLM-5.2's and DeepSeek-V3.2's); the layer-0
attention output is compared with the scored path (sparse_mla_force_mqa) on the same prefill; and the
#52512 regression (engine.topk_guard), on the model's own layer schedule (GLM-5.2's shared-indexer layers
in its shrunk rows): the same prompts again with every top-k buffer forced to all -1 at each step, where no
sparse read may consume an all -1 row and the output may not degenerate into repeated tokens where the
unforced output did not. With STACKGATE_BREAK_TOPK=1 the buffer is broken on purpose before every sparse read
(the guard's positive control): the row must then fail on the #52512 expectation, naming the reads.
"""

from __future__ import annotations

import pytest
from engine import config, degeneration, in_process, probes, topk_guard
from engine.row_record import Evidence
from harness.graphs import GraphCounter
from harness.profile import last_warm

WARM_REPEATS = 10  # prefill samples of the warm process: their median is the run's prefill_ms
OUTPUT_TOKENS = 16


@pytest.mark.track("indexer-skip")
def test_indexer_skip(row, request):
    ev = Evidence.start(request, row)
    hf_config = config.model_config(row)
    topk = int(hf_config["index_topk"])
    short = int(row["context"]) <= topk

    prompts = config.prompts(row)
    try:  # a backend the guard cannot watch fails here, before any engine starts
        topk_guard.impl_class(row["backend"])
    except topk_guard.CannotWatch as exc:
        pytest.fail(f"#52512 guard: {exc}", pytrace=False)
    engine = in_process.start(config.llm_kwargs(row), share=True)
    ev.metric("engine_ready_s", engine.ready_s, "s", "cold")
    off = probes.dense_prefill_off(in_process.runner(engine).model)  # vllm#52512: no dense prefill on this layer
    dense = short and not off
    ev.prop("prefill", {"tokens": int(row["context"]), "index_topk": topk, "dense_expected": dense, "dense_off": off})
    with GraphCounter() as graphs, probes.indexer() as idx, probes.mla_layer0_output(probes.pure_prefill) as cap:
        cold_ms, out = in_process.timed_ms(engine, prompts, in_process.greedy(OUTPUT_TOKENS), profile="cold")
        scoring_first = idx.scoring_calls
        in_process.generate(engine, prompts, in_process.greedy(1))  # settles the 1-token shape: not a warm sample
        prefill_ms = [in_process.timed_ms(engine, prompts, in_process.greedy(1))[0] for _ in range(WARM_REPEATS)]
        full = in_process.greedy(OUTPUT_TOKENS)  # the last warm one is profiled beside the cold one (harness.profile)
        warm_ms = [in_process.timed_ms(engine, prompts, full, profile=last_warm(i, 3))[0] for i in range(3)]
    in_process.new_length_first_use(engine, prompts, full)
    guard, unwatched = None, ""
    try:  # the #52512 condition forced, after the timed requests: the forcing costs a fill per step
        broken = topk_guard.broken_on_purpose()
        with topk_guard.watch(row["backend"], in_process.runner(engine), break_reads=broken) as guard:
            forced = in_process.generate(engine, prompts, in_process.greedy(OUTPUT_TOKENS))
    except topk_guard.CannotWatch as exc:  # a model with attention of its own: the row fails, the rest is measured
        guard, unwatched = None, str(exc)
    in_process.stop(engine)
    ev.metric("cold_first_request_ms", cold_ms, "ms", "cold")
    ev.metric("prefill_ms", prefill_ms, "ms", "warm")
    ev.metric("warm_request_ms", warm_ms, "ms", "warm")
    ev.metric("indexer_scoring_calls_first_request", scoring_first, "count", "cold")
    ev.metric("graph_captures_after_ready", graphs.captures, "count", "warm")
    if guard is not None:
        repeated = degeneration.judge(in_process.token_ids(forced), in_process.token_ids(out))
        ev.metric("all_minus_one_topk_reads", len(guard.minus_one), "count", "none")
        ev.metric("degenerated_requests", len(repeated.degenerated), "count", "none")
        ev.prop("topk_guard", guard.to_json())
        ev.prop("degeneration", repeated.to_json())
    else:
        ev.prop("topk_guard", {"watched": False, "why": unwatched})

    reference = in_process.start(config.llm_kwargs(row, attention_config={"sparse_mla_force_mqa": True}), share=True)
    with probes.mla_layer0_output(probes.pure_prefill) as ref_cap:
        ref_out = in_process.generate(reference, prompts, in_process.greedy(OUTPUT_TOKENS))
    in_process.stop(reference)
    err = probes.rel_err(cap.rows, ref_cap.rows)
    if err == err:
        ev.metric("attn_output_rel_err", err, "relative L2", "none")
    ev.metric(
        "greedy_token_mismatches",
        in_process.mismatches(in_process.token_ids(out), in_process.token_ids(ref_out)),
        "tokens",
        "none",
    )

    if dense:
        # vLLM keeps the MTP drafter's layers out of the skip (is_mtp_layer, vllm/models/deepseek_v32/attention.py):
        # each scores the prefill it drafts from, once
        drafted = int(hf_config.get("num_nextn_predict_layers", 0)) if row["spec_method"] == "mtp" else 0
        ev.expect(
            scoring_first <= drafted,
            f"prefill of {row['context']} <= top-k {topk} still ran indexer scoring ({scoring_first} calls"
            + (f"; the MTP drafter's {drafted} layer(s) may score)" if drafted else ")"),
        )
    elif short:  # the layer takes the top-k path on every prefill (#52512): the skip must not happen
        ev.expect(
            scoring_first > 0,
            f"prefill of {row['context']} <= top-k {topk} ran no indexer scoring, though {off} (the layer's "
            "prefills take the top-k path: vllm#52512)",
        )
    else:
        ev.expect(scoring_first > 0, f"prefill of {row['context']} > top-k {topk} ran no indexer scoring")
    if guard is None:
        ev.expect(False, f"#52512 guard: {unwatched}")
    else:
        ev.expect(guard.forced_steps > 0, "#52512 guard: no engine step ran with the condition forced")
        ev.expect(
            guard.reads > 0,
            f"#52512 guard: saw no sparse read of the top-k buffer in {guard.forced_steps} "
            "forced steps: it proves nothing on this row",
        )
        said = f" (top-k buffer broken on purpose, {topk_guard.ENV_BREAK}=1)" if guard.broken else ""
        ev.expect(not guard.minus_one, f"#52512{said}: sparse attention read all -1 top-k rows {guard.minus_one[:3]}")
        ev.expect(
            not repeated.degenerated,
            f"#52512: degenerated into repeated tokens with the all -1 top-k "
            f"condition forced: {'; '.join(repeated.degenerated[:3])}",
        )
    if cap.rows is None:
        ev.expect(False, cap.unseen("pure prefill"))
    ev.tolerance(err, "attn_output_rel_err")
    ev.graph_replay(graphs.captures if graphs.available else None)
    ev.finish()
