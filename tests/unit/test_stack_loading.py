"""The loader: the real stack loads; every kind of bad input names file, line and key, exit 2."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from support.paths import REPO

from ci.cli import main
from ci.common.errors import StackError
from ci.stack import loader as stack


def test_real_stack_loads_into_frozen_model():
    st = stack.load()
    assert {"cuda-sm121a", "rocm-gfx1151", "cuda-sm90", "cpu"} <= set(st.targets)
    assert set(st.changes) == {"48804", "49903", "46514", "46849", "48407", "selftest", "composition"}
    assert set(st.tracks) == {"kernel-warmup", "ar-graph", "fp8-ds-mla", "indexer-skip", "harness-selftest",
                              "composition"}  # fmt: skip
    model = st.models["step-3.7-flash"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.tp = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        st.models["x"] = model  # type: ignore[index]
    assert st.targets["cuda-sm121a"].platform == "linux/arm64"
    assert st.targets["cuda-sm121a"].arch_list == ("12.1a",)
    assert st.targets["rocm-gfx1151"].devices.paths == ("/dev/kfd", "/dev/dri")
    for target in st.targets.values():
        assert "@sha256:" in target.base_image, f"{target.id} base image is not pinned by digest"


def test_an_imported_change_must_name_its_upstream(stack_copy):
    path = stack_copy / "changes" / "48407.yaml"
    lines = path.read_text().splitlines(keepends=True)
    start = lines.index("upstream:\n")
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("  "))
    path.write_text("".join(lines[:start] + lines[end:]))
    err = _error(stack_copy)
    assert err.path == path and "an imported change names its upstream PR" in str(err)


def test_every_change_carries_all_acceptance_fields():
    for change in stack.load().changes.values():
        acc = change.acceptance
        assert acc.regression.tests and acc.regression.benchmark
        assert acc.tolerance.reference.backend
        assert acc.graph_replay.metric and acc.allowed_regression.metric
        assert acc.measurements.cold and acc.measurements.warm


def test_seed_table_is_kept_as_history():
    st = stack.load()
    assert len(st.history) == 32
    ima = [h for h in st.history if h.notes == "IMA"]
    assert {(h.backend, h.runs) for h in ima} == {("TRITON_ATTN", "fail"), ("FLASHINFER", "fail")}


def _error(root: Path) -> StackError:
    with pytest.raises(StackError) as info:
        stack.load(root)
    return info.value


def test_unknown_model_in_a_change_names_file_and_line(stack_copy, edit):
    path = stack_copy / "changes" / "48407.yaml"
    edit(path, "  - glm-5.2\n", "  - glm-9\n")
    err = _error(stack_copy)
    line = path.read_text().splitlines().index("  - glm-9") + 1
    assert err.path == path and err.line == line and err.key == "models[2]"
    assert "unknown model 'glm-9'" in str(err)


def test_unknown_track_backend_and_target_backend(stack_copy, edit):
    edit(stack_copy / "changes" / "46849.yaml", "track: ar-graph", "track: ar-graphs")
    assert "unknown track 'ar-graphs'" in str(_error(stack_copy))


def test_unknown_backend_in_target(stack_copy, edit):
    edit(stack_copy / "targets.yaml", "TRITON_MLA, ROCM_AITER_MLA,", "TRITON_MLA, ROCM_AITER_MLAX,")
    err = _error(stack_copy)
    assert err.path.name == "targets.yaml" and "unknown backend 'ROCM_AITER_MLAX'" in str(err)
    assert err.key == "targets[1].backends[4]"


def test_malformed_yaml_names_line(stack_copy, edit):
    path = stack_copy / "tracks.yaml"
    edit(path, "    suite: spec_decode\n    requires:\n      drafter: [eagle, eagle3, mtp]",
         "    suite: spec_decode\n    requires:\n      drafter: [eagle, eagle3, mtp")  # fmt: skip
    err = _error(stack_copy)
    assert err.path == path and err.line is not None and "malformed YAML" in str(err)


def test_duplicate_ids(stack_copy, edit):
    edit(stack_copy / "models.yaml", "  - id: hy3\n", "  - id: qwen3.6\n")
    err = _error(stack_copy)
    assert "duplicate model id 'qwen3.6'" in str(err) and err.key == "models[10].id"


def test_duplicate_yaml_key(stack_copy, edit):
    edit(stack_copy / "changes" / "48804.yaml", "track: kernel-warmup\n", "track: kernel-warmup\ntrack: ar-graph\n")
    assert "duplicate key" in str(_error(stack_copy))


@pytest.mark.parametrize("field", ["graph_replay", "tolerance", "allowed_regression", "measurements", "regression"])
def test_change_missing_an_acceptance_field(stack_copy, field):
    path = stack_copy / "changes" / "46514.yaml"
    lines = path.read_text().splitlines(keepends=True)
    start = lines.index(f"  {field}:\n")
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("    ")), len(lines))
    path.write_text("".join(lines[:start] + lines[end:]))
    err = _error(stack_copy)
    assert err.path == path and f"missing required key '{field}'" in str(err)
    assert err.line == lines.index("acceptance:\n") + 1


def test_cold_and_warm_must_both_be_named(stack_copy, edit):
    edit(stack_copy / "changes" / "46849.yaml", "    warm: [warm_itl_ms, draft_step_ms, launches_per_draft_step]\n",
         "    warm: []\n")  # fmt: skip
    assert "cold and warm measurements must both be named" in str(_error(stack_copy))


def test_model_claimed_for_a_track_its_traits_do_not_match(stack_copy, edit):
    # Step-3.7-Flash is native MTP with dense attention: never a sparse-MLA row.
    edit(stack_copy / "changes" / "48407.yaml", "  - glm-5.2\n", "  - glm-5.2\n  - step-3.7-flash\n")
    err = _error(stack_copy)
    assert "not eligible for track 'indexer-skip'" in str(err) and "attention dense" in str(err)
    assert err.key == "models[3]"


def test_dense_model_cannot_list_a_sparse_backend(stack_copy, edit):
    edit(stack_copy / "models.yaml",
         "    backends: [FLASH_ATTN, TRITON_ATTN, FLASHINFER, ROCM_ATTN]\n\n  - id: tiny-llama-eagle3",
         "    backends: [FLASH_ATTN, FLASHMLA_SPARSE]\n\n  - id: tiny-llama-eagle3")  # fmt: skip
    assert "does not serve dense attention" in str(_error(stack_copy))


def test_unknown_key_and_bad_enum(stack_copy, edit):
    edit(stack_copy / "tracks.yaml", "    suite: sparse_mla\n    requires:\n      attention: [sparse_mla]\n",
         "    suite: sparse-mla\n    requires:\n      attention: [sparse_mla]\n")  # fmt: skip
    err = _error(stack_copy)
    assert err.key == "tracks[3].suite" and "suite 'sparse-mla' is not a folder name of suites/" in str(err)


def test_cli_exits_2_and_prints_no_plan(stack_copy, edit, capsys):
    edit(stack_copy / "changes" / "48407.yaml", "  - glm-5.2\n", "  - glm-9\n")
    assert main(["--stack", str(stack_copy), "plan"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert f"{stack_copy / 'changes' / '48407.yaml'}:" in err and "unknown model 'glm-9'" in err


def test_merged_on_only_for_a_merged_change(stack_copy, edit):
    change = stack_copy / "changes" / "48804.yaml"
    edit(change, "  as_of: 2026-11-29\n", "  as_of: 2026-11-29\n  merged_on: 2026-07-01\n")
    err = _error(stack_copy)
    assert "merged_on given but state is 'closed'" in str(err) and err.key == "upstream.merged_on"


def test_first_release_names_a_release_of_a_merged_change(stack_copy, edit):
    assert stack.load(stack_copy).changes["46514"].upstream.first_release == "0.29.0"
    edit(
        stack_copy / "changes" / "48804.yaml", "  as_of: 2026-11-29\n", "  as_of: 2026-11-29\n  first_release: 0.30.0\n"
    )
    err = _error(stack_copy)
    assert "first_release '0.30.0' needs state 'merged'" in str(err) and err.key == "upstream.first_release"


def test_first_release_must_be_a_version(stack_copy, edit):
    edit(stack_copy / "changes" / "46514.yaml", "  first_release: 0.29.0", "  first_release: soon")
    err = _error(stack_copy)
    assert "a version like 0.29.0" in str(err) and err.key == "upstream.first_release"


def _line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


CARRIED = "      commits: [c8d5679daf49]\n"  # stack/fork.yaml: the demo fork's record of #46514


@pytest.mark.parametrize(
    ("file", "old", "new", "key", "says"),
    [
        ("fork.yaml", CARRIED, "      commits: [C8D5679DAF49]\n", "fork.carries.46514.commits[0]",
         "'C8D5679DAF49' is not a commit id"),
        ("fork.yaml", CARRIED, "      commits: [1234567]\n", "fork.carries.46514.commits[0]",
         "quote it: YAML read it as a number"),
        ("fork.yaml", CARRIED, "      commits: [c8d5679daf49, c8d5679daf49]\n", "fork.carries.46514.commits[1]",
         "commit c8d5679daf49 listed twice"),
        ("fork.yaml", CARRIED, "      commits: [abcdef1]\n", "fork.carries.46514.patch_ids.c8d5679daf49",
         "patch-id recorded for c8d5679daf49, which commits lacks"),
        ("fork.yaml", '"c8d5679daf49": "95d8', '"c8d5679daf49": "xx95d8', "fork.carries.46514.patch_ids.c8d5679daf49",
         "is not a patch-id"),
        ("fork.yaml", '    "46514":\n', '    "4651":\n', "fork.carries.4651", "unknown change '4651'"),
        ("changes/48804.yaml", "  as_of: 2026-11-29\n", "  as_of: 2026-11-29\n  merge_commit: 0123abcd\n",
         "upstream.merge_commit", "merge_commit given but state is 'closed'"),
        ("changes/48804.yaml", "  as_of: 2026-11-29\n", "  as_of: 2026-11-29\n  stacked_on: [48804]\n",
         "upstream.stacked_on[0]", "#48804 cannot be stacked on itself"),
        ("changes/48804.yaml", "  as_of: 2026-11-29\n",
         "  as_of: 2026-11-29\n  commits: [0123abcd, 0123abc]\n  stacked_on: [1, 1]\n", "upstream.stacked_on[1]",
         "PR 1 listed twice"),
    ],
    ids=["upper-case", "a-number", "twice", "patch-id-of-no-commit", "bad-patch-id", "unknown-change",
         "merge-commit-unmerged", "stacked-on-itself", "stacked-twice"],
)  # fmt: skip
def test_commit_ids_of_a_change_and_of_a_forks_records_are_checked(stack_copy, edit, file, old, new, key, says):
    path = stack_copy / file
    edit(path, old, new)
    err = _error(stack_copy)
    assert err.path == path and err.key == key and says in str(err)
    at = {"fork.carries.46514.patch_ids.c8d5679daf49": '"c8d5679daf49":', "fork.carries.4651": '"4651":'}
    if ".commits[" in key:
        at[key] = new.strip()
    assert err.line == _line_of(path, at.get(key) or key.split(".")[-1].split("[")[0] + ":")


def test_a_change_file_holds_no_fork_facts(stack_copy, edit):
    """Which commits carry a change is a fork's fact: a change file that records them is refused, saying where
    they go."""
    path = stack_copy / "changes" / "46514.yaml"
    edit(path, "models:\n", "fork:\n  kind: port\n  commits: [c8d5679daf49]\nmodels:\n")
    err = _error(stack_copy)
    assert err.path == path and err.key == "fork" and err.line == _line_of(path, "fork:")
    assert "describes the upstream change only" in str(err) and "ci fork --record" in err.hint


def test_a_merged_change_records_its_merge_commit_and_the_prs_commits(stack_copy, edit):
    path = stack_copy / "changes" / "48407.yaml"
    edit(path, "  merge_commit: ba702e978e3b ", "  merge_commit: 0123abcd\n  commits: [4567cdef] ")
    change = stack.load(stack_copy).changes["48407"]
    assert change.upstream is not None and change.upstream.merge_commit == "0123abcd"
    assert change.upstream.commits == ("4567cdef",)


def test_a_kv_budget_that_is_not_a_positive_size_names_its_line(stack_copy, edit):
    path = stack_copy / "models.yaml"
    where = "\n    config: suites/models/tiny-llama\n    drafter: {type: eagle, method: eagle,"
    edit(path, "    kv_cache_gib: 2" + where, "    kv_cache_gib: 0" + where)
    err = _error(stack_copy)
    assert err.path == path and "kv_cache_gib" in str(err) and "greater than 0" in str(err)
    assert err.line == next(i for i, x in enumerate(path.read_text().splitlines(), 1) if x.strip() == "kv_cache_gib: 0")


def test_a_models_kv_budget_travels_in_its_rows(tmp_path):
    from ci.stack import plan, rows_json

    st = stack.load(REPO / "stack")
    tiny = next(r for r in plan.build(st).rows if r.model == "tiny-llama-eagle")
    shrunk = next(r for r in plan.build(st).rows if r.model == "glm-5.2-shrunk")
    assert rows_json.row_document(st, tiny)["model_info"]["kv_cache_gib"] == 2
    assert rows_json.row_document(st, shrunk)["model_info"]["kv_cache_gib"] == 12  # the default
