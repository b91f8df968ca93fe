"""A change's facts in its file and one named home: its change file names its presence probe and its engine options,
suites/engine/tracked.py holds them by those names, the loader refuses a name the suites lack (file, line, what to
do), and the suites' code reads them by name, never by change id (docs/howto-add-change.md)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from support.paths import REPO, SUITES

from ci.common.errors import StackError
from ci.stack import loader, plan, rows_json, suite_names

sys.path.insert(0, str(SUITES))  # the suites, as the images import them
from engine import tracked


def _error(root: Path) -> StackError:
    with pytest.raises(StackError) as info:
        loader.load(root, cached=False)
    return info.value


def test_a_change_file_naming_a_probe_the_suites_lack_is_refused_at_its_line(stack_copy, edit) -> None:
    path = stack_copy / "changes" / "48407.yaml"
    edit(path, "probe: dense-prefill-skip", "probe: dense-prefill-skipped")
    err = _error(stack_copy)
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.startswith("probe:"))
    assert (err.path, err.line, err.key) == (path, line, "probe")
    assert f"{path}:{line}: [probe] unknown probe 'dense-prefill-skipped'" in str(err)
    assert "suites/engine/tracked.py" in err.hint and "dense-prefill-skip," in err.hint  # what to do: the names known


def test_a_change_file_naming_engine_options_the_suites_lack_is_refused_at_its_line(stack_copy, edit) -> None:
    path = stack_copy / "changes" / "49903.yaml"
    edit(path, "engine_options: runner-kernel-warmup-off", "engine_options: '49903'")
    err = _error(stack_copy)
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.startswith("engine_options:"))
    assert (err.path, err.line, err.key) == (path, line, "engine_options")
    assert "unknown engine options '49903'" in str(err) and "to OPTIONS in suites/engine/tracked.py" in err.hint


def test_an_imported_change_may_not_name_the_probe_that_looks_for_nothing(stack_copy, edit) -> None:
    """Its rows would read "present" on a vLLM without it: a report that silently passes."""
    edit(stack_copy / "changes" / "46849.yaml", "probe: fused-ar-graph", f"probe: {suite_names.NOTHING_IMPORTED}")
    err = _error(stack_copy)
    assert err.key == "probe" and "looks for nothing" in str(err)


def test_a_change_file_without_a_probe_is_refused(stack_copy, edit) -> None:
    edit(stack_copy / "changes" / "46514.yaml", "probe: fp8-ds-mla-decode-lse", "")
    assert "probe" in str(_error(stack_copy))


def test_every_committed_change_names_a_probe_and_options_the_suites_hold() -> None:
    st = loader.load(cached=False)
    assert {c.probe for c in st.changes.values()} <= set(tracked.PROBES)
    assert {c.engine_options for c in st.changes.values()} <= set(tracked.OPTIONS)
    assert all(callable(p) for p in tracked.PROBES.values())


def test_the_host_reads_the_names_the_suites_hold() -> None:
    """The host reads suites/engine/tracked.py's text, never imports it: the reading equals the imported keys."""
    names = suite_names.names()
    assert names.probes == set(tracked.PROBES) and names.options == set(tracked.OPTIONS)
    assert suite_names.NOTHING_IMPORTED in tracked.PROBES


def test_a_registry_the_host_cannot_read_is_an_error_naming_it(tmp_path: Path) -> None:
    built = tmp_path / "tracked.py"
    built.write_text("PROBES = dict(a=1)\nOPTIONS = {'default': 1}\n")
    with pytest.raises(StackError, match="PROBES"):
        suite_names.names(built)
    built.write_text("KEY = 'a'\nPROBES = {KEY: 1}\nOPTIONS = {'default': 1}\n")
    with pytest.raises(StackError, match="string literal"):
        suite_names.names(built)


def test_a_probe_removed_from_the_suites_fails_the_next_load_not_a_kept_one(tmp_path: Path, monkeypatch) -> None:
    """The stack kept between commands (ci.stack.cache) is keyed by the suites' registry too."""
    loader.load()  # kept
    fewer = tmp_path / "tracked.py"
    fewer.write_text(suite_names.TRACKED.read_text().replace('"fused-ar-graph": fused_ar_graph,\n', ""))
    monkeypatch.setattr(suite_names, "TRACKED", fewer)
    with pytest.raises(StackError, match="unknown probe 'fused-ar-graph'"):
        loader.load()


def test_the_suites_read_a_change_by_its_names_never_by_its_id() -> None:
    """No quoted change id in the suites' code: a change's facts are found by the names its file gives."""
    ids = [c for c in loader.load().changes if c.isdigit()]
    quoted = re.compile("[\"']({})[\"']".format("|".join(ids)))
    spelled = [
        f"{p.relative_to(REPO)}:{i}"
        for p in sorted((REPO / "suites").rglob("*.py"))
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if quoted.search(line)
    ]
    assert spelled == []


def test_a_row_naming_no_probe_or_one_the_image_lacks_says_which_and_what_to_do() -> None:
    """A rows.json written before change files named probes, or by a stack newer than the image's suites."""
    from engine import presence
    from harness.rows import Row

    def row(**data: str) -> Row:
        return Row(id="r", change="48407", track="t", suite="s", target="cpu", gpus=1, data=data)

    with pytest.raises(LookupError, match="names no probe for change #48407: it was written before"):
        presence.of(row())
    with pytest.raises(LookupError, match="probe 'dense-prefill-skipped' is not one of"):
        presence.of(row(probe="dense-prefill-skipped"))


NEW = """\
id: "50001"
title: A change added as docs/howto-add-change.md says
track: indexer-skip
probe: dense-prefill-skip
upstream:
  repo: vllm-project/vllm
  pr: 50001
  title: "[Attention] an example"
  state: open
  as_of: 2026-12-01
models: [deepseek-v3.2-mtp, tiny-deepseek-v32-mtp]
matrix:
  context: [512]
  batch: [1]
  speculative: [false]
acceptance:
  regression:
    tests: [suites/sparse_mla/test_indexer_skip.py]
    benchmark: short-prefill latency
  tolerance:
    metric: attn_output_rel_err
    max: 0.02
    unit: relative L2
    reference: {backend: row, variant: "indexer scoring forced"}
  graph_replay:
    metric: graph_captures_after_ready
    min: 0
    max: 0
    description: no re-capture
  effect:
    - {metric: prefill_ms, better: lower, min_gain_pct: 10}
  allowed_regression:
    metric: warm_request_ms
    better: lower
    max_pct: 10
  measurements:
    cold: [cold_first_request_ms]
    warm: [prefill_ms, warm_request_ms]
"""


def test_a_change_added_as_the_howto_says_is_loaded_planned_and_carries_its_names(stack_copy) -> None:
    """The journey of docs/howto-add-change.md with a probe the suites hold: one new file in stack/changes/, nothing
    else; its rows are planned, and each row's rows.json document names its probe and engine options."""
    howto = (REPO / "docs" / "howto-add-change.md").read_text()
    assert "stack/changes/<pr>.yaml" in howto and "suites/engine/tracked.py" in howto
    (stack_copy / "changes" / "50001.yaml").write_text(NEW)
    st = loader.load(stack_copy, cached=False)
    assert (st.changes["50001"].probe, st.changes["50001"].engine_options) == ("dense-prefill-skip", "default")
    rows = plan.build(st).select(changes=["50001"]).rows
    assert rows and {r.track for r in rows} == {"indexer-skip"}
    docs = rows_json.row_documents(st, rows)
    assert {(d["probe"], d["engine_options"]) for d in docs} == {("dense-prefill-skip", "default")}
    assert {d["probe"] for d in docs} <= set(tracked.PROBES)
