"""Shrunk models: a real model's architecture with random weights, its traits copied from the real model by the
loader, its rows planned beside the real model's; a contradiction or a loose end names file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.paths import SUITES

from ci.common.errors import StackError
from ci.stack import loader as stack
from ci.stack import plan

HY3_SHRUNK = "  - id: hy3-shrunk\n    shrunk_of: hy3\n    weights: dummy\n    config: suites/models/shrunk-hy3\n"


def _with(root: Path, edit, extra: str) -> Path:
    """The stack's hy3-shrunk entry with `extra` lines added to it."""
    path = root / "models.yaml"
    edit(path, HY3_SHRUNK, HY3_SHRUNK + extra)
    return path


def _error(root: Path) -> StackError:
    with pytest.raises(StackError) as info:
        stack.load(root)
    return info.value


def _line(path: Path, text: str) -> int:
    """The last line holding exactly `text`."""
    return max(i for i, line in enumerate(path.read_text().splitlines(), 1) if line.strip() == text)


def test_a_shrunk_model_carries_its_real_models_traits():
    st = stack.load()
    real, small = st.models["hy3"], st.models["hy3-shrunk"]
    assert small.shrunk_of == "hy3" and small.weights == "dummy" and small.hf is None and small.tp == 1
    assert (small.drafter, small.attention, small.quantization, small.backends) == (
        real.drafter, real.attention, real.quantization, real.backends)  # fmt: skip
    assert small.name == "Hy3 (native MTP), shrunk (random weights)" and small.seed_name is None


def test_a_models_runtime_env_reaches_its_shrunk_twins_rows(stack_copy, edit):
    """DeepSeek-V4's UE8M0-scaled FP8 linears need DeepGEMM where cuda-sm90 turns it off: its rows, and its shrunk
    twin's, carry the switch to their processes in rows.json; a bad variable name is refused with its line."""
    from ci.stack import rows_json

    st = stack.load()
    want = {"VLLM_USE_DEEP_GEMM": "1"}
    assert st.models["deepseek-v4-flash"].env == st.models["deepseek-v4-flash-shrunk"].env == want
    row = next(r for r in plan.build(st).rows if r.model == "deepseek-v4-flash-shrunk")
    assert rows_json.row_document(st, row)["model_info"]["env"] == want
    other = next(r for r in plan.build(st).rows if r.model == "glm-5.2-shrunk")
    assert rows_json.row_document(st, other)["model_info"]["env"] == {}
    path = stack_copy / "models.yaml"
    edit(path, '    env: {VLLM_USE_DEEP_GEMM: "1"}\n', '    env: {VLLM_USE_DEEP_GEMM: "1", 2BAD: "x"}\n')
    err = _error(stack_copy)
    assert err.path == path and "'2BAD' is not an environment variable name" in str(err) and err.key.endswith("2BAD")


def test_shrunk_rows_follow_the_real_models_rows(stack_copy):
    (stack_copy / "models.yaml").write_text((stack_copy / "models.yaml").read_text().replace("    tp: 8\n", ""))
    p = plan.build(stack.load(stack_copy))  # the real models fit one GPU here, so both have rows everywhere
    models = [r.model for r in p.rows if r.change == "48804" and r.target == "cuda-sm90"]
    first_small = models.index("hy3-shrunk")
    assert models[first_small - 1] == "hy3"  # beside the real model's rows, in the plan and the report
    assert {r.track for r in p.rows if r.model == "hy3-shrunk"} == {r.track for r in p.rows if r.model == "hy3"}


def test_a_restated_trait_that_differs_names_both_lines(stack_copy, edit):
    path = _with(stack_copy, edit, "    quantization: bf16\n")
    err = _error(stack_copy)
    assert err.path == path and err.line == _line(path, "config: suites/models/shrunk-hy3") + 1
    assert err.key.endswith(".quantization") and "contradicts hy3 (models.yaml:" in str(err)
    assert "'fp8' there, 'bf16' here" in str(err)


def test_a_restated_trait_that_agrees_is_accepted(stack_copy, edit):
    _with(stack_copy, edit, "    quantization: fp8\n    drafter: {type: mtp}\n")
    assert stack.load(stack_copy).models["hy3-shrunk"].quantization == "fp8"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("    drafter: {type: eagle}\n", "contradicts hy3"),
        ("    drafter: {model: suites/models/tiny-llama-eagle-draft}\n", "drafts with its own layers"),
        ("    attention: {layout: mla}\n", "contradicts hy3"),
        ("    hf: tencent/Hy3\n", "unknown key 'hf'"),
        ("    weights: hub\n", "duplicate key"),
        ("    env: {VLLM_USE_DEEP_GEMM: '1'}\n", "unknown key 'env'"),  # the real model's env is inherited
    ],
)
def test_what_a_shrunk_model_may_not_say(stack_copy, edit, extra, message):
    _with(stack_copy, edit, extra)
    err = _error(stack_copy)
    assert message in str(err) and err.path.name == "models.yaml" and err.line is not None


def test_the_real_model_must_exist_be_real_and_be_shrunk_once(stack_copy, edit):
    path = stack_copy / "models.yaml"
    edit(path, "    shrunk_of: hy3\n", "    shrunk_of: hy4\n")
    err = _error(stack_copy)
    assert "unknown model 'hy4'" in str(err) and err.line == _line(path, "shrunk_of: hy4")
    edit(path, "    shrunk_of: hy4\n", "    shrunk_of: qwen3.6\n")
    assert "'qwen3.6' is already shrunk by 'qwen3.6-shrunk'" in str(_error(stack_copy))
    edit(path, "    shrunk_of: qwen3.6\n    weights: dummy\n    config: suites/models/shrunk-hy3",
         "    shrunk_of: glm-5.2-shrunk\n    weights: dummy\n    config: suites/models/shrunk-hy3")  # fmt: skip
    assert "'glm-5.2-shrunk' is itself shrunk" in str(_error(stack_copy))


def test_a_real_model_with_separate_draft_weights_needs_a_local_draft(stack_copy, edit):
    path = stack_copy / "models.yaml"
    edit(path, "    drafter: {model: suites/models/shrunk-mistral-small-4-eagle-draft}\n", "")
    err = _error(stack_copy)
    assert "a shrunk model needs its own draft config" in str(err) and err.key.startswith("models[")
    model = stack.load().models["mistral-small-4-shrunk"]
    assert model.drafter is not None and model.drafter.model == "suites/models/shrunk-mistral-small-4-eagle-draft"
    assert model.drafter.method == "eagle" and not model.attention.proven  # waits for the same proof


def test_a_change_lists_the_real_model_not_the_shrunk_one(stack_copy, edit):
    change = stack_copy / "changes" / "48804.yaml"
    edit(change, "  - hy3\n", "  - hy3-shrunk\n")
    err = _error(stack_copy)
    assert err.path == change and err.key.startswith("models[") and "shrinks 'hy3'" in str(err)


# The tracking issue (shared/seeds/001), "Current-model applicability and capability split":
#   "DeepSeek-V4-Flash and GLM-5.2 are sparse/compressed-MLA candidates. Qwen3.6, GLM-5.2, Nemotron 3 Ultra,
#    Hy3, and Step-3.7-Flash are native-MTP architecture candidates."
# and "Additional capability rows":
#   "Add Step-3.7-Flash to native-MTP warmup/graph experiments, but keep it separate from sparse-MLA tracks.
#    Add Mistral Small 4 only to MLA tracks after proving the implementation accepts its low-rank attention
#    representation."
SPARSE_MLA_CANDIDATES = ("DeepSeek-V4-Flash", "GLM-5.2")
NATIVE_MTP_CANDIDATES = ("Qwen3.6", "GLM-5.2", "Nemotron 3 Ultra", "Hy3", "Step-3.7-Flash")
MLA_AFTER_PROOF = ("Mistral Small 4",)
# the issue's four capabilities, as the stack's tracks
SPARSE_MLA_TRACKS = {"fp8-ds-mla", "indexer-skip"}  # 3. fp8_ds_mla sparse mixed-batch + MTP; 4. indexer bypass
NATIVE_MTP_TRACKS = {"kernel-warmup", "ar-graph"}  # 1. speculative-kernel warm-up; 2. fused AR graph replay
MLA_TRACKS = {"fp8-ds-mla"}  # the MLA tracks a dense-MLA layout can enter (indexer-skip needs the indexer)
NAMED = {  # the issue's names -> the stack's real models
    "DeepSeek-V4-Flash": "deepseek-v4-flash",
    "GLM-5.2": "glm-5.2",
    "Qwen3.6": "qwen3.6",
    "Nemotron 3 Ultra": "nemotron-3-ultra",
    "Hy3": "hy3",
    "Step-3.7-Flash": "step-3.7-flash",
    "Mistral Small 4": "mistral-small-4",
}


def _allowed(name: str, *, proven: bool = False) -> set[str]:
    tracks: set[str] = set()
    if name in SPARSE_MLA_CANDIDATES:
        tracks |= SPARSE_MLA_TRACKS
    if name in NATIVE_MTP_CANDIDATES:
        tracks |= NATIVE_MTP_TRACKS
    if name in MLA_AFTER_PROOF and proven:
        tracks |= MLA_TRACKS
    return tracks


def _shrunk_tracks(st) -> dict[str, set[str]]:
    twins = {m.shrunk_of: m.id for m in st.models.values() if m.shrunk_of}
    rows = plan.build(st).rows
    return {name: {r.track for r in rows if r.model == twins[real]} for name, real in NAMED.items()}


def test_every_named_model_has_a_shrunk_twin_planned_in_exactly_the_issues_tracks():
    st = stack.load()
    assert {m.shrunk_of for m in st.models.values() if m.shrunk_of} == set(NAMED.values())
    assert _shrunk_tracks(st) == {name: _allowed(name) for name in NAMED}


def test_mistral_small_4_shrunk_joins_only_the_mla_tracks_once_proven(stack_copy, edit):
    edit(stack_copy / "models.yaml", "      proven: false\n", "      proven: true\n")
    assert _shrunk_tracks(stack.load(stack_copy))["Mistral Small 4"] == _allowed("Mistral Small 4", proven=True)


def test_shrunk_rows_sit_beside_the_real_models_rows():
    st = stack.load()
    rows = plan.build(st).rows
    for i, row in enumerate(rows):
        real = st.models[row.model].shrunk_of
        if real is None or (i and rows[i - 1].model == row.model):
            continue  # not the first row of a shrunk model's block
        assert real in st.changes[row.change].models
        if any(r.model == real and r.change == row.change and r.target == row.target for r in rows):
            assert i and rows[i - 1].model == real, f"{row.id} does not follow {real}'s rows"


SUITES_MODELS = SUITES / "models"


def _fields(config: dict) -> set[str]:
    """A config's fields as SOURCE.md names them: top level, and one level into text_config."""
    out = {k for k in config if k != "text_config"}
    out |= {f"text_config.{k}" for k in config.get("text_config", {})}
    return out


def _documented(source: str) -> dict[str, list[str]]:
    rows = [line.split("|")[1:-1] for line in source.splitlines() if line.startswith("| `")]
    return {cells[0].strip().strip("`"): [c.strip() for c in cells[1:]] for cells in rows}


def test_each_shrunk_config_documents_every_field_with_its_source():
    import json

    st = stack.load()
    folders = {Path(m.config).name for m in st.models.values() if m.shrunk_of and m.config}
    folders |= {Path(m.drafter.model).name for m in st.models.values() if m.shrunk_of and m.drafter and m.drafter.model}
    assert len(folders) == 8
    for folder in sorted(folders):
        config = json.loads((SUITES_MODELS / folder / "config.json").read_text())
        documented = _documented((SUITES_MODELS / folder / "SOURCE.md").read_text())
        assert set(documented) == _fields(config), folder
        for field, (real, source, shrunk) in documented.items():
            assert real and source and shrunk, f"{folder}: {field} lacks its real value, source or shrunk value"


def test_deepseek_v4_rows_get_only_the_kv_dtype_vllm_takes_for_it():
    """vLLM 0.26.0 asserts an fp8 kv-cache for DeepSeek-V4's fp8_ds_mla layout (deepseek_v4/attention.py:83):
    its rows, and its shrunk twin's, are planned with fp8_ds_mla, also where the change's matrix says auto."""
    st = stack.load()
    assert st.models["deepseek-v4-flash"].kv_cache_dtypes == st.models["deepseek-v4-flash-shrunk"].kv_cache_dtypes
    rows = [r for r in plan.build(st).rows if r.model.startswith("deepseek-v4-flash")]
    assert {r.change for r in rows} == {"46514", "48407"}
    assert {r.kv_cache_dtype for r in rows} == {"fp8_ds_mla"}
    others = [r for r in plan.build(st).rows if r.change == "48407" and not r.model.startswith("deepseek-v4")]
    # the other models keep vLLM's default, and add the fp8_ds_mla layout where the matrix includes it (batch 1)
    assert {r.kv_cache_dtype for r in others if r.batch > 1} == {"auto"}
    for model in {r.model for r in others}:
        assert {r.kv_cache_dtype for r in others if r.model == model and r.batch == 1} == {"auto", "fp8_ds_mla"}


def test_a_kv_dtype_the_model_refuses_is_not_planned(stack_copy, edit):
    before = [r for r in plan.build(stack.load(stack_copy)).rows if r.model.startswith("deepseek-v4-flash")]
    edit(
        stack_copy / "changes" / "48407.yaml",
        "  batch: [1, 4]\n",
        "  batch: [1, 4]\n  kv_cache_dtype: [auto, fp8_ds_mla, fp8]\n",
    )
    p = plan.build(stack.load(stack_copy))
    v4 = [r for r in p.rows if r.model.startswith("deepseek-v4-flash")]
    assert [r.id for r in v4] == [r.id for r in before]  # auto became its own dtype, no row twice, and fp8 is refused


def test_a_model_kv_dtype_none_of_its_backends_takes_names_the_line(stack_copy, edit):
    path = stack_copy / "models.yaml"
    edit(path, "    kv_cache_dtypes: [fp8_ds_mla]\n", "    kv_cache_dtypes: [fp8_e5m2]\n")
    err = _error(stack_copy)
    assert err.path == path and err.line == _line(path, "kv_cache_dtypes: [fp8_e5m2]")
    assert "takes kv_cache_dtype fp8_e5m2" in str(err)


# The per-layer fields vLLM 0.26.0 indexes with a layer's index, per model_type, and whether the MTP layers index
# them too (they are built as layers num_hidden_layers.. and read the same list with that index).
STEP3P5_LISTS = ("layer_types", "rope_theta", "use_rope_layers", "partial_rotary_factors", "swiglu_limits",
                 "swiglu_limits_shared")  # fmt: skip
PER_LAYER: dict[str, tuple[tuple[str, ...], bool]] = {
    # step3p5.py:162/165/438 (layer_types), :177 (rope_theta as a list), :245 (use_rope_layers), :472
    # (partial_rotary_factors), :353 and :118 (swiglu_limits, swiglu_limits_shared); step3p5_mtp.py:84: the MTP
    # layers are Step3p5DecoderLayer at indices num_hidden_layers..
    "step3p5": (STEP3P5_LISTS, True),
    # deepseek_v4/attention.py:188 (compress_ratios[layer_id]); nvidia/mtp.py:174: MTP layers from num_hidden_layers
    "deepseek_v4": (("compress_ratios",), True),
    # qwen3_5.py:246 (layer_types); qwen3_5_mtp.py:109 passes its MTP layers' type itself
    "qwen3_5_moe_text": (("layer_types",), False),
    # nemotron_h.py:577 (hybrid_override_pattern[layer_idx]); nemotron_h_mtp.py:231 reads its own pattern
    "nemotron_h": (("hybrid_override_pattern",), False),
    "glm_moe_dsa": ((), False),
    "hy_v3": ((), False),
    "deepseek_v3": ((), False),
}


def test_per_layer_fields_cover_every_layer_vllm_builds():
    import json

    st = stack.load()
    folders = {Path(m.config).name for m in st.models.values() if m.shrunk_of and m.config}
    for folder in sorted(folders):
        top = json.loads((SUITES_MODELS / folder / "config.json").read_text())
        config = top.get("text_config", top)
        kind = config.get("model_type") or f"{top['model_type']}_text"
        assert kind in PER_LAYER, f"{folder}: which per-layer fields does vLLM index for {kind}?"
        fields, mtp_too = PER_LAYER[kind]
        mtp = config.get("num_nextn_predict_layers") or config.get("mtp_num_hidden_layers") or 0
        layers = config["num_hidden_layers"] + (mtp if mtp_too else 0)
        for field in fields:
            value = config.get(field)
            if isinstance(value, (list, str)):
                assert len(value) >= layers, f"{folder}: {field} has {len(value)} entries; vLLM reads {layers}"
        if kind == "nemotron_h" and mtp:
            assert config["mtp_hybrid_override_pattern"], f"{folder}: the MTP layers' own pattern"
