"""The plan: eligibility rules from the seed, stable ids, the matrix, filters and output shapes."""

from __future__ import annotations

import json

import pytest

from ci.cli import main
from ci.stack import loader as stack
from ci.stack import plan
from ci.stack.change import Combo, Matrix

SPARSE_TRACKS = {"fp8-ds-mla", "indexer-skip"}
MLA_TRACKS = {"fp8-ds-mla", "indexer-skip"}


@pytest.fixture(scope="module")
def full():
    st = stack.load()
    return st, plan.build(st)


def test_edge_targets_have_rows_in_both_suites(full):
    _, p = full
    for target in ("cuda-sm121a", "rocm-gfx1151"):
        assert {r.suite for r in p.rows if r.target == target} == {"spec_decode", "sparse_mla"}


def test_every_row_names_its_suite_and_track(full):
    st, p = full
    for r in p.rows:
        assert r.suite == st.tracks[r.track].suite
        assert r.track == st.changes[r.change].track


def test_step_flash_joins_spec_tracks_but_never_sparse(full):
    _, p = full
    step = [r for r in p.rows if r.model == "step-3.7-flash"]
    assert {r.track for r in step} == {"kernel-warmup", "ar-graph"}
    assert not [r for r in step if r.track in SPARSE_TRACKS]


def test_mistral_small_4_waits_for_proof_then_joins_mla_tracks_only(full, stack_copy, edit):
    _, p = full
    assert not [r for r in p.rows if r.model == "mistral-small-4"]
    reasons = {e.reason for e in p.excluded if e.model == "mistral-small-4"}
    assert any("not proven" in why for why in reasons)

    edit(stack_copy / "models.yaml", "      proven: false\n", "      proven: true\n")
    rows = [r for r in plan.build(stack.load(stack_copy)).rows if r.model == "mistral-small-4"]
    assert rows, "a proven Mistral Small 4 must join the MLA rows it is listed for"
    assert {r.track for r in rows} <= MLA_TRACKS


def test_a_model_is_only_in_tracks_its_traits_match(full):
    st, p = full
    for r in p.rows:
        model, req = st.models[r.model], st.tracks[r.track].requires
        if req.drafter is not None:
            assert model.drafter and model.drafter.type in req.drafter
        if req.attention is not None:
            assert model.attention.layout in req.attention
        assert r.backend in model.backends and r.backend in st.targets[r.target].backends
        assert r.kv_cache_dtype in st.backends[r.backend].kv_cache_dtypes


def test_rows_fit_their_target(full):
    st, p = full
    for r in p.rows:
        assert r.gpus <= max(st.targets[r.target].gpus, 1)
        # the weights' GPUs: TP's, or with EP the experts spread over every TP x DP rank
        assert (r.gpus if r.ep else r.tp) >= st.models[r.model].tp and r.tp % r.dcp == 0
        assert (r.spec_method is None) == (r.num_speculative_tokens == 0)


def test_dcp_rows_only_where_enough_gpus(full):
    _, p = full
    dcp = [r for r in p.rows if r.dcp > 1]
    assert dcp and {r.target for r in dcp} == {"cuda-sm90"}


def test_ids_are_unique_and_identical_across_runs(full):
    _, p = full
    ids = [r.id for r in p.rows]
    assert len(ids) == len(set(ids))
    assert ids == [r.id for r in plan.build(stack.load()).rows]


def test_adding_a_model_keeps_every_earlier_id(full, stack_copy, edit):
    _, before = full
    models = stack_copy / "models.yaml"
    models.write_text(
        models.read_text()
        + """
  - id: tiny-llama-eagle-b
    name: another tiny Llama + EAGLE
    weights: dummy
    config: suites/models/tiny-llama
    drafter: {type: eagle, method: eagle}
    attention: {layout: dense}
    quantization: bf16
    backends: [FLASH_ATTN, TRITON_ATTN]
"""
    )
    change = stack_copy / "changes" / "48804.yaml"
    edit(change, "  - tiny-llama-eagle\n", "  - tiny-llama-eagle-b\n  - tiny-llama-eagle\n")
    after = plan.build(stack.load(stack_copy))
    assert {r.id for r in before.rows} < {r.id for r in after.rows}
    assert {r.model for r in after.rows if r.id not in {b.id for b in before.rows}} == {"tiny-llama-eagle-b"}


def test_adding_a_change_keeps_every_earlier_id(full, stack_copy):
    _, before = full
    text = (stack_copy / "changes" / "48407.yaml").read_text().replace('id: "48407"', 'id: "99999"')
    (stack_copy / "changes" / "99999.yaml").write_text(text)
    after = plan.build(stack.load(stack_copy))
    assert {r.id for r in before.rows} < {r.id for r in after.rows}


def test_matrix_product_include_exclude():
    m = Matrix(context=(1, 2), batch=(8,), exclude=(Combo(context=2),), include=(Combo(dcp=2, tp=2),))
    combos = list(plan._combos(m))
    assert [(c["context"], c["dcp"], c["tp"]) for c in combos] == [(1, 1, None), (1, 2, 2)]


def test_seed_history_matches_the_same_configuration(full):
    st, p = full
    row = next(r for r in p.rows if r.model == "llama-3-8b-eagle" and r.target == "cuda-sm90"
               and r.backend == "TRITON_ATTN" and r.tp == 1)  # fmt: skip
    assert plan.history_for(st, row) is None  # seed saw TRITON_ATTN + EAGLE only at TP 2
    row = next(r for r in p.rows if r.model == "llama-3-8b-eagle" and r.target == "cuda-sm90"
               and r.backend == "FLASH_ATTN")  # fmt: skip
    seen = plan.history_for(st, row)
    assert seen is not None and seen.runs == "ok" and seen.score == 0.65


def test_plan_json_shape_and_filters(capsys):
    assert main(["plan", "--format", "json", "--target", "rocm-gfx1151", "--suite", "sparse_mla"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["rows"]
    for row in doc["rows"]:
        assert {"id", "change", "track", "target", "model", "suite", "backend", "tp", "dp", "ep", "cudagraph_mode",
                "dcp", "dbo", "kv_cache_dtype", "spec_method", "context", "batch"} <= set(row)  # fmt: skip
        assert row["target"] == "rocm-gfx1151" and row["suite"] == "sparse_mla"


def test_plan_markdown_is_one_table(capsys):
    assert main(["plan", "--format", "markdown", "--change", "48407", "--target", "cuda-sm90"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert lines[0].startswith("| Row | Model | Hardware | GPUs | Spec Decode")
    assert len({line.count(" | ") for line in lines[2:]}) == 1


def test_unknown_filter_value_exits_2(capsys):
    assert main(["plan", "--target", "b200"]) == 2
    assert "unknown target 'b200'" in capsys.readouterr().err


def test_stack_is_accepted_after_the_verb(stack_copy, edit, capsys):
    edit(stack_copy / "changes" / "48407.yaml", "  - glm-5.2\n", "  - glm-9\n")
    assert main(["plan", "--stack", str(stack_copy)]) == 2
    assert "unknown model 'glm-9'" in capsys.readouterr().err
