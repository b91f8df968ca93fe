"""Timing criteria a bound can judge: every imported change names what it acts on (`acceptance.effect`), judged against
the fork without it only where the A/A floor is narrower than the bound; no gating change keeps a bound that a
committed campaign's floor is as wide as."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from types import MappingProxyType

import pytest
from support.paths import SUITES

from ci import evidence
from ci.results import baseline, run_medians
from ci.results.baseline import Floor
from ci.results.criteria.effect import Gain
from ci.stack import loader
from ci.stack.change import Effect
from ci.stack.loader import DEFAULT_STACK
from ci.stack.plan import Row

STACK = loader.load(DEFAULT_STACK)
IMPORTED = [c for c in STACK.changes.values() if c.kind == "import"]


@pytest.mark.parametrize("change", IMPORTED, ids=lambda c: c.id)
def test_every_imported_change_names_what_it_acts_on_and_its_tests_record_it(change) -> None:
    assert change.acceptance.effect, f"stack/changes/{change.id}.yaml: no acceptance.effect"
    recorded = set()
    for test in change.acceptance.regression.tests:  # the metrics its own tests record: ev.metric("name", ...)
        recorded |= set(re.findall(r'ev\.metric\(\s*"([a-z_]+)"', (SUITES.parent / test).read_text()))
    fields = {f.name for f in dataclasses.fields(Row)}
    for e in change.acceptance.effect:
        tests = change.acceptance.regression.tests
        assert e.metric in recorded, f"{change.id}: {e.metric} is recorded by none of {tests}"
        assert set(e.only) <= fields, f"{change.id}: effect.only names {set(e.only) - fields}, not row fields"
        assert set(map(str, e.only.get("model", ()))) <= set(change.models), f"{change.id}: effect.only models"
    assert change.acceptance.allowed_regression.metric in recorded


def test_no_gating_bound_is_narrower_than_a_committed_floor() -> None:
    floors = evidence.recorded_floors()
    assert floors, "no committed campaign records an A/A floor (evidence/*/report/report.json)"
    assert evidence.too_narrow(STACK, floors) == []


def test_a_gating_change_whose_bound_a_committed_floor_covers_is_named() -> None:
    """#46849 made gating as it stands: the H100 campaign's floor on the draft step (±24%) covers its 10% bound."""
    gating = dataclasses.replace(STACK.changes["46849"], gating=True)
    stack = dataclasses.replace(STACK, changes=MappingProxyType({**STACK.changes, "46849": gating}))
    said = evidence.too_narrow(stack, evidence.recorded_floors())
    assert any("stack/changes/46849.yaml: gating, and its effect bound on draft_step_ms (10%)" in s for s in said), said
    assert all("widen the bound, measure a narrower floor, or set gating: false" in s for s in said)
    assert not any("launches_per_draft_step" in s for s in said)  # a count's floor is 0%: any bound judges it


DRAFT = Effect(metric="draft_step_ms", better="lower", min_gain_pct=10)


def _gain(before, after, floor_pct=None, effect=DRAFT) -> Gain:
    return Gain(before=tuple(before), after=tuple(after), unit="ms", effect=effect, floor=Floor(floor_pct, 5))


def test_a_gain_whose_whole_range_clears_the_bound_passes() -> None:
    g = _gain([0.39, 0.40, 0.38, 0.41, 0.39], [0.29, 0.30, 0.28, 0.29, 0.30], floor_pct=4.0)
    assert g.status() == "pass" and g.verdict == "at least 10% better"
    assert "gain +25.6%" in g.text and "A/A floor ±4.0% at 5 runs a side" in g.text


def test_a_gain_whose_whole_range_falls_short_fails() -> None:
    g = _gain([0.300, 0.301, 0.302, 0.303, 0.304], [0.290, 0.291, 0.292, 0.293, 0.294], floor_pct=1.0)
    assert g.status() == "fail" and "less than the 10%" in g.verdict


def test_a_bound_no_wider_than_the_floor_is_never_pass_or_fail() -> None:
    """#46849 on the H100 (evidence/h100-timing-46849): a 26% gain, but the floor is ±24% and the bound 10%."""
    g = _gain([0.39, 0.40, 0.38, 0.41, 0.39], [0.29, 0.30, 0.28, 0.29, 0.30], floor_pct=24.0)
    assert g.status() == "missing" and g.verdict.startswith("not judgeable at this floor (±24.0%)")


def test_higher_is_better_and_too_few_runs() -> None:
    rate = Effect(metric="decode_tok_s", better="higher", min_gain_pct=5)
    g = _gain([100, 101, 99, 100], [120, 121, 119, 122], effect=rate)
    assert g.pct == pytest.approx(20.5, abs=0.1) and g.status() == "pass"
    few = _gain([100] * (run_medians.MIN_RUNS - 1), [120] * (run_medians.MIN_RUNS - 1), effect=rate)
    assert few.status() == "missing" and few.verdict == f"needs {run_medians.MIN_RUNS} runs a side"
    assert baseline.ALPHA == 0.05


def test_the_committed_46849_evidence_judges_the_draft_step_with_its_interval_and_floor_on_the_h100() -> None:
    md = (Path(evidence.EVIDENCE) / "h100-timing-46849" / "report" / "report.md").read_text()
    assert "draft\\_step\\_ms: 46849.cuda-sm90.tiny-llama-eagle.cf3fb5bf: 0.388368 -&gt; 0.286432 ms (gain +26.2%" in md
    assert (
        "A/A floor ±24.0% at 5 runs of the fork against 3 of the A/A arm): not judgeable at this floor (±24.0%)" in md
    )
    assert "launches\\_per\\_draft\\_step: 46849.cuda-sm90.tiny-llama-eagle.cf3fb5bf: 2.5 -&gt; 1 count" in md
    assert "H200" not in md.split("## Status matrix")[0], "the card that ran is an H100: no H200 above the matrix"
    assert "on an H100 host" in md


def test_the_committed_46849_report_says_what_fails_and_how_many_runs_of_how_many_rows() -> None:
    """The causes column and the verdicts' count say they are of failing tests, beside a criterion that fails on a
    passing row (said per target, with its row count); five runs of one row are five runs, not five rows; the floor
    names the runs of each side it was measured on."""
    md = (Path(evidence.EVIDENCE) / "h100-timing-46849" / "report" / "report.md").read_text()
    summary = md.split("## Verdicts")[0]
    assert "| Causes of failing tests (rows) |" in summary
    assert "H100 fails: cold/warm: 1.57x &gt; 1.2x on 1 row" in summary
    assert "| Change | Track | Verdict | Why | Rows failing their test |" in md
    assert "suites/spec\\_decode/test\\_ar\\_graph.py: 5 pass (5 runs of 1 row)" in md
    assert "a floor of ±24.5% at 5 runs of the fork against 3 of the A/A arm" in md
    assert "at 3 runs a side" not in md


def test_the_runs_hint_promises_no_bound() -> None:
    from ci.common.errors import UsageError
    from ci.run.schedule import rounds

    with pytest.raises(UsageError) as err:
        rounds.aa_rounds(0, None)
    assert "2% bound" not in (err.value.hint or "") and "A/A floor" in (err.value.hint or "")
