"""The composition rows (stack/changes/composition.yaml): the seed table's combinations of spec decode with TP,
DP, EP and DCP, each with the GPUs it takes, planned from include entries pinned to models and backends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci.cli import main
from ci.common.errors import StackError
from ci.stack import loader as stack
from ci.stack import plan

# The two-GPU combinations the issue names, on the tiny models: (model, backend, tp, dp, dcp, graph mode, kv)
TWO_GPU = {
    ("tiny-llama-eagle", "FLASH_ATTN", 2, 1, 1, "FULL_AND_PIECEWISE", "auto"),
    ("tiny-llama-eagle", "TRITON_ATTN", 2, 1, 1, "FULL_AND_PIECEWISE", "auto"),
    ("tiny-llama-eagle", "FLASHINFER", 2, 1, 1, "FULL_AND_PIECEWISE", "auto"),
    ("tiny-llama-eagle", "FLASH_ATTN", 1, 2, 1, "FULL_AND_PIECEWISE", "auto"),
    ("tiny-llama-eagle", "FLASH_ATTN", 1, 2, 1, "PIECEWISE", "auto"),
    ("tiny-llama-eagle", "FLASH_ATTN", 1, 2, 1, "NONE", "auto"),
    ("tiny-deepseek-v32-mtp", "FLASHMLA_SPARSE", 2, 1, 1, "FULL_AND_PIECEWISE", "auto"),
    ("tiny-deepseek-v32-mtp", "FLASHMLA_SPARSE", 2, 1, 2, "FULL_AND_PIECEWISE", "fp8_ds_mla"),
}


@pytest.fixture(scope="module")
def rows() -> tuple[plan.Row, ...]:
    return plan.build(stack.load()).select(changes=["composition"]).rows


def test_the_two_gpu_rows_are_the_issues_eight(rows):
    tiny = {(r.model, r.backend, r.tp, r.dp, r.dcp, r.cudagraph_mode, r.kv_cache_dtype)
            for r in rows if r.gpus == 2 and r.model.startswith("tiny-")}  # fmt: skip
    assert tiny == TWO_GPU
    assert all(r.target == "cuda-sm90" and r.suite == "composition" and r.batch == 1 for r in rows)


def test_gpu_count_is_tp_times_dp_whatever_dcp_and_ep(rows):
    by = {(r.model, r.tp, r.dp, r.dcp, r.ep, r.kv_cache_dtype, r.backend): r.gpus for r in rows}
    assert by[("tiny-deepseek-v32-mtp", 2, 1, 2, False, "fp8_ds_mla", "FLASHMLA_SPARSE")] == 2  # DCP splits TP
    assert by[("tiny-deepseek-v32-mtp", 8, 1, 8, False, "fp8_ds_mla", "FLASHMLA_SPARSE")] == 8
    assert by[("tiny-deepseek-v32-mtp", 1, 8, 1, True, "fp8_ds_mla", "FLASHMLA_SPARSE")] == 8  # EP over TP x DP
    # a real model whose weights need 8 GPUs runs DP 8 with EP: the experts spread over the 8 ranks
    assert by[("deepseek-r1-mtp", 1, 8, 1, True, "auto", "FLASH_ATTN_MLA")] == 8
    assert {r.gpus for r in rows} == {2, 8}


def test_pins_keep_entries_to_their_models(rows):
    # the L3-8B entries name llama-3-8b-eagle and its stand-in, never the DeepSeek models (and vice versa)
    assert {r.backend for r in rows if r.model == "tiny-llama-eagle"} == {"FLASH_ATTN", "TRITON_ATTN", "FLASHINFER"}
    assert {r.backend for r in rows if r.model == "tiny-deepseek-v32-mtp"} == {"FLASHMLA_SPARSE"}
    assert not [r for r in rows if r.model == "tiny-llama-eagle" and r.tp == 8]


def test_plan_shows_the_gpu_count(capsys):
    assert main(["plan", "--change", "composition", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert all(r["gpus"] == r["tp"] * r["dp"] for r in doc["rows"])
    assert main(["plan", "--change", "composition", "--format", "markdown"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    gpus = lines[0].split(" | ").index("GPUs")
    assert {line.split(" | ")[gpus] for line in lines[2:]} == {"2", "8"}


def test_the_seed_tables_status_stands_beside_a_real_models_row(rows):
    st = stack.load()
    seen = {(r.backend, r.tp, r.dp, r.cudagraph_mode): plan.history_for(st, r) for r in rows
            if r.model == "llama-3-8b-eagle"}  # fmt: skip
    assert seen[("TRITON_ATTN", 2, 1, "FULL_AND_PIECEWISE")].notes == "IMA"
    assert "should_attempt_dp_padding" in seen[("FLASH_ATTN", 1, 2, "PIECEWISE")].notes


def test_adding_the_composition_rows_renamed_no_row(rows):
    # row ids hash the values that differ from their defaults: these are the ids the H200 evidence carries
    ids = {r.id for r in plan.build(stack.load()).rows}
    assert {
        "48804.cuda-sm90.tiny-llama-eagle.54aa101d",
        "46849.cuda-sm90.tiny-llama-eagle.cf3fb5bf",
        "46514.cuda-sm90.tiny-deepseek-v32-mtp.6873e57f",
        "48407.cuda-sm90.tiny-deepseek-v32-mtp.14e52503",
    } <= ids


def _error(root: Path) -> StackError:
    with pytest.raises(StackError) as info:
        stack.load(root)
    return info.value


PINNED = "    - {models: [llama-3-8b-eagle, tiny-llama-eagle], backend: FLASH_ATTN, tp: 2, "
COMPOSITION = PINNED + "context: 1024, batch: 1, "


def test_an_entry_without_context_in_an_axis_less_matrix_is_refused(stack_copy, edit):
    path = stack_copy / "changes" / "composition.yaml"
    edit(path, COMPOSITION, PINNED + "batch: 1, ")
    err = _error(stack_copy)
    assert err.path == path and err.line is not None and "names no context or batch" in str(err)


def test_a_pin_naming_a_model_the_change_lacks_is_refused(stack_copy, edit):
    path = stack_copy / "changes" / "composition.yaml"
    edit(path, COMPOSITION, COMPOSITION.replace("tiny-llama-eagle]", "tiny-llama-eagle3]"))
    err = _error(stack_copy)
    assert err.path == path and "model 'tiny-llama-eagle3' is not one the change lists" in str(err)


def test_a_pinned_backend_the_model_lacks_gives_no_row(stack_copy, edit):
    edit(stack_copy / "changes" / "composition.yaml", COMPOSITION, COMPOSITION.replace("FLASH_ATTN", "FLASHMLA"))
    rows = plan.build(stack.load(stack_copy)).select(changes=["composition"]).rows
    assert not [r for r in rows if r.model == "tiny-llama-eagle" and r.tp == 2 and r.backend == "FLASHMLA"]
    assert len([r for r in rows if r.model == "tiny-llama-eagle" and r.tp == 2]) == 2
