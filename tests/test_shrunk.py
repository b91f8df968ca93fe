"""Shrunk models: a real model's architecture with random weights, its traits copied from the real model by the
loader, its rows planned beside the real model's; a contradiction or a loose end names file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from ci.errors import StackError
from ci.stack import loader as stack
from ci.stack import plan

HY3_SHRUNK = """
  - id: hy3-small
    shrunk_of: hy3
    weights: dummy
    config: suites/models/tiny-llama
"""


def _append(root: Path, text: str) -> Path:
    path = root / "models.yaml"
    path.write_text(path.read_text() + text)
    return path


def _error(root: Path) -> StackError:
    with pytest.raises(StackError) as info:
        stack.load(root)
    return info.value


def _line(path: Path, text: str) -> int:
    """The last line holding exactly `text` (the appended entry's)."""
    return max(i for i, line in enumerate(path.read_text().splitlines(), 1) if line.strip() == text)


def test_a_shrunk_model_carries_its_real_models_traits(stack_copy):
    _append(stack_copy, HY3_SHRUNK)
    st = stack.load(stack_copy)
    real, small = st.models["hy3"], st.models["hy3-small"]
    assert small.shrunk_of == "hy3" and small.weights == "dummy" and small.hf is None and small.tp == 1
    assert (small.drafter, small.attention, small.quantization, small.backends) == (
        real.drafter, real.attention, real.quantization, real.backends)  # fmt: skip
    assert small.name == "Hy3 (native MTP), shrunk (random weights)" and small.seed_name is None


def test_shrunk_rows_follow_the_real_models_rows(stack_copy):
    _append(stack_copy, HY3_SHRUNK)
    p = plan.build(stack.load(stack_copy))
    rows = [r for r in p.rows if r.change == "48804" and r.target == "cuda-sm90"]
    models = [r.model for r in rows]
    assert "hy3" in models and "hy3-small" in models
    first_small = models.index("hy3-small")
    assert models[first_small - 1] == "hy3"  # beside the real model's rows, in the plan and the report
    assert {r.track for r in p.rows if r.model == "hy3-small"} == {r.track for r in p.rows if r.model == "hy3"}


def test_a_restated_trait_that_differs_names_both_lines(stack_copy):
    path = _append(stack_copy, HY3_SHRUNK + "    quantization: bf16\n")
    err = _error(stack_copy)
    assert err.path == path and err.line == _line(path, "quantization: bf16")
    assert err.key.endswith(".quantization") and "contradicts hy3 (models.yaml:" in str(err)
    assert "'fp8' there, 'bf16' here" in str(err)


def test_a_restated_trait_that_agrees_is_accepted(stack_copy):
    _append(stack_copy, HY3_SHRUNK + "    quantization: fp8\n    drafter: {type: mtp}\n")
    assert stack.load(stack_copy).models["hy3-small"].quantization == "fp8"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("    drafter: {type: eagle}\n", "contradicts hy3"),
        ("    drafter: {model: suites/models/tiny-llama-eagle-draft}\n", "drafts with its own layers"),
        ("    attention: {layout: mla}\n", "contradicts hy3"),
        ("    hf: tencent/Hy3\n", "unknown key 'hf'"),
    ],
)
def test_what_a_shrunk_model_may_not_say(stack_copy, extra, message):
    _append(stack_copy, HY3_SHRUNK + extra)
    err = _error(stack_copy)
    assert message in str(err) and err.path.name == "models.yaml" and err.line is not None


def test_the_real_model_must_exist_be_real_and_be_shrunk_once(stack_copy, edit):
    path = _append(stack_copy, HY3_SHRUNK.replace("shrunk_of: hy3", "shrunk_of: hy4"))
    err = _error(stack_copy)
    assert "unknown model 'hy4'" in str(err) and err.line == _line(path, "shrunk_of: hy4")
    edit(path, "shrunk_of: hy4", "shrunk_of: hy3")
    _append(stack_copy, HY3_SHRUNK.replace("hy3-small", "hy3-smaller"))
    assert "'hy3' is already shrunk by 'hy3-small'" in str(_error(stack_copy))
    edit(path, "  - id: hy3-smaller\n    shrunk_of: hy3", "  - id: hy3-smaller\n    shrunk_of: hy3-small")
    assert "'hy3-small' is itself shrunk" in str(_error(stack_copy))


def test_a_real_model_with_separate_draft_weights_needs_a_local_draft(stack_copy):
    shrunk = HY3_SHRUNK.replace("hy3-small", "mistral-small").replace("shrunk_of: hy3", "shrunk_of: mistral-small-4")
    _append(stack_copy, shrunk)
    assert "a shrunk model needs its own draft config" in str(_error(stack_copy))
    _append(stack_copy, "    drafter: {model: suites/models/tiny-llama-eagle-draft}\n")
    model = stack.load(stack_copy).models["mistral-small"]
    assert model.drafter is not None and model.drafter.model == "suites/models/tiny-llama-eagle-draft"
    assert model.drafter.method == "eagle" and not model.attention.proven  # waits for the same proof


def test_a_change_lists_the_real_model_not_the_shrunk_one(stack_copy, edit):
    _append(stack_copy, HY3_SHRUNK)
    change = stack_copy / "changes" / "48804.yaml"
    edit(change, "  - hy3\n", "  - hy3-small\n")
    err = _error(stack_copy)
    assert err.path == change and err.key.startswith("models[") and "shrinks 'hy3'" in str(err)
