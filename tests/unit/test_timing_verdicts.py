"""Timing verdicts over runs: the run (one engine process) is the unit, an A/A arm gives the noise floor, a run that
shared its GPU is never judged (the schedule that gives each run its GPU alone is test_rows_over_devices.py's)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from support.report_helpers import rows, write_rows

from ci.bench import synthetic
from ci.common.errors import UsageError
from ci.report import write as report
from ci.results import run_medians
from ci.stack import loader
from ci.stack.loader import DEFAULT_STACK
from ci.stack.plan import Row

REGRESSION = "regression within the allowed bound versus the baseline"
ROW = rows("46849", target="cuda-sm90")[0]  # allowed regression: warm_itl_ms, lower is better, 10%
FORK = "sha256:" + "a" * 64
WITHOUT = "sha256:" + "b" * 64


def _runs(folder: Path, medians: Sequence[float], *, build: str, without: str = "", shared: str = "") -> None:
    """One file per run of ROW (each its own engine process): warm ITL samples tight around each run's median."""
    props = [("fork_changes", "46849" if not without else ""), ("vllm_build", build), ("fork_source", "demo-fork x")]
    props += [("change_present", "false" if without else "true")]
    props += [("fork_without", without)] if without else []
    props += [("gpu_shared_with", shared)] if shared else []
    for n, mid in enumerate(medians):
        samples = [mid * f for f in (0.995, 0.998, 1.0, 1.002, 1.005)]

        def edit(r: Row, c: synthetic.FakeCase, samples: list[float] = samples) -> synthetic.FakeCase:
            m = synthetic.metric("warm_itl_ms", samples[2], "ms", "warm", samples)
            return replace(synthetic.with_metric(c, m), props=tuple(props), vllm_version="0.26.0")

        write_rows(folder, [ROW], edit, prefix=f"run{n}-")


def _regression(side_a: Path, *others: Path, labels: Sequence[str]) -> tuple[str, str]:
    rep = report.build(DEFAULT_STACK, [side_a], None, compare_paths=list(others), labels=labels)
    assert rep.comparison is not None
    (p,) = [p for p in rep.comparison.ported if p.change == "46849"]
    crit = next(k for k in p.verdict.criteria if k.name == REGRESSION)
    # one judgement: the report's own verdict for #46849 is the one as ported
    own = next(v for v in rep.verdicts if v.change.id == "46849")
    assert next(k for k in own.criteria if k.name == REGRESSION) == crit
    return crit.status, crit.evidence


def test_one_run_a_side_is_not_evidence_of_a_regression_however_tight_its_samples(tmp_path: Path) -> None:
    """The shape of #46849's "+28.6%, p=0.048": run 2 alone a side. Its samples are tight (p < 0.05 if they were
    independent runs), its runs differ by 18%: the criterion needs runs, it does not fail."""
    fork, without = tmp_path / "fork", tmp_path / "without"
    _runs(fork, [3.976], build=FORK)
    _runs(without, [3.091], build=WITHOUT, without="46849")
    status, text = _regression(fork, without, labels=["fork", "without"])
    assert status == "missing" and f"needs {run_medians.MIN_RUNS} runs a side" in text and "runs 1/1" in text
    assert "+28.6% worse" in text


def test_five_runs_a_side_whose_medians_overlap_pass(tmp_path: Path) -> None:
    fork, without = tmp_path / "fork", tmp_path / "without"
    _runs(fork, [2.880, 3.976, 4.161, 3.40, 3.05], build=FORK)
    _runs(without, [3.310, 3.091, 4.173, 3.55, 2.95], build=WITHOUT, without="46849")
    status, text = _regression(fork, without, labels=["fork", "without"])
    assert status == "pass" and "runs 5/5" in text and "over runs" in text


def test_five_runs_a_side_clearly_worse_fail(tmp_path: Path) -> None:
    fork, without = tmp_path / "fork", tmp_path / "without"
    _runs(fork, [3.60, 3.62, 3.65, 3.61, 3.63], build=FORK)
    _runs(without, [3.00, 3.02, 3.05, 3.01, 3.03], build=WITHOUT, without="46849")
    status, text = _regression(fork, without, labels=["fork", "without"])
    assert status == "fail" and "+19.9% worse" in text and "p=0.004 over runs" in text


def test_an_aa_floor_wider_than_the_bound_is_inconclusive_and_printed(tmp_path: Path) -> None:
    """The same build run again as its own side (A/A) moves by more than the 2% bound: no verdict at that floor."""
    fork, without, aa = tmp_path / "fork", tmp_path / "without", tmp_path / "aa"
    _runs(fork, [3.00, 3.40, 3.10, 3.60, 3.20], build=FORK)
    _runs(aa, [3.50, 3.05, 3.70, 3.15, 3.30], build=FORK)
    _runs(without, [3.05, 3.35, 3.15, 3.55, 3.25], build=WITHOUT, without="46849")
    status, text = _regression(fork, without, aa, labels=["fork", "without", "aa"])
    bound = loader.load(DEFAULT_STACK).changes["46849"].acceptance.allowed_regression.max_pct
    floor = run_medians.floor_pct([3.00, 3.40, 3.10, 3.60, 3.20], [3.50, 3.05, 3.70, 3.15, 3.30])
    assert floor is not None and floor > bound and f"A/A floor ±{floor:.1f}%" in text
    assert (
        status == "missing" and f"not judgeable at this floor (±{floor:.1f}%, as wide as the {bound:g}% bound)" in text
    )
    assert "past the A/A noise floor" in text
    # what would make it judgeable, said as a projection from this floor at 5 runs a side
    needed = math.ceil(5 * (floor / bound) ** 2)
    assert (
        f"at 5 runs a side, narrowing as 1/sqrt(runs), would pass under the {bound:g}% bound at about {needed} runs"
        in text
    )
    assert f"10 runs a side could judge a bound of about {floor * math.sqrt(5 / 10):.0f}%" in text
    assert "a projection from this floor, not a measurement" in text


def test_the_floor_projection_is_said_only_where_the_floor_is_as_wide_as_the_bound() -> None:
    from ci.results.baseline import compare

    wide = compare([3.0] * 4, [3.0] * 4, "lower", 2.0, floor_pct=8.0, aa=True, floor_runs=4)
    assert "at about 64 runs a side" in wide.narrowing and "a bound of about 5%" in wide.narrowing
    assert compare([3.0] * 4, [3.0] * 4, "lower", 2.0, floor_pct=1.5, aa=True, floor_runs=4).narrowing == ""
    assert compare([3.0] * 4, [3.0] * 4, "lower", 2.0, floor_pct=8.0, aa=True).narrowing == ""  # runs unknown
    assert compare([3.0] * 4, [3.0] * 4, "lower", 2.0, floor_pct=math.inf, aa=True, floor_runs=4).narrowing == ""


def test_a_run_that_shared_its_gpu_is_never_judged(tmp_path: Path) -> None:
    fork, without = tmp_path / "fork", tmp_path / "without"
    _runs(fork, [3.0, 3.1, 3.0, 3.1], build=FORK, shared="46849.cuda-sm90.other.00000000")
    _runs(without, [3.0, 3.1, 3.0, 3.1], build=WITHOUT, without="46849")
    status, text = _regression(fork, without, labels=["fork", "without"])
    assert status == "missing" and "not judged from runs that shared their GPU" in text
    assert "46849.cuda-sm90.other.00000000" in text


def test_report_json_carries_each_runs_median_for_a_later_baseline(tmp_path: Path) -> None:
    from ci.results import baseline

    fork = tmp_path / "fork"
    _runs(fork, [3.0, 3.5, 4.0], build=FORK)
    rep = report.build(DEFAULT_STACK, [fork], None)
    report.write(rep, tmp_path / "out")
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    (row,) = [r for r in doc["rows"] if r["id"] == ROW.id]
    assert row["run_values"]["warm_itl_ms"] == [3.0, 3.5, 4.0]
    assert baseline.load(tmp_path / "out" / "report.json").runs(ROW.id, "warm_itl_ms") == (3.0, 3.5, 4.0)


def test_compare_without_runs_the_arms_interleaved_each_alone_and_warms_each_build_first(tmp_path, monkeypatch, capsys):
    """The protocol's order: each build warmed once, untimed; then fork, fork without X, A/A, N times over; every
    arm run scheduled alone on its GPUs; the report compares the three sides by those labels."""
    import argparse

    from ci.arms import compare_without
    from ci.run import host
    from ci.stack import loader, plan

    st = loader.load(DEFAULT_STACK)
    fake = argparse.Namespace(compare_without="46849", runs=3, aa=True, no_warm_up=False, out=tmp_path, stack=None,
                              aa_runs=None, bundles=None, unbaked=False, cold=False, gpus="", gpu_memory=None,
                              timeout=60.0, caches=None, fork=None, ref=None, upstream_ref=None, base_ref=None,
                              base_version=None)  # fmt: skip

    class Held:
        state, held = "ported", True

    class Fork:
        name, ref = "demo-fork", "main"

        def state(self, change):
            return Held()

    monkeypatch.setattr("ci.fork.source.from_command", lambda st, args: Fork())
    monkeypatch.setattr(host, "present", lambda target: True)
    builds = {
        "fork": compare_without.Arm(label="fork", image="sha256:f"),
        "46849": compare_without.Arm(label="46849", image="sha256:w"),
    }
    monkeypatch.setattr(compare_without, "_builds", lambda *a: builds)
    ran: list[tuple[str, str | None, bool]] = []
    phases: dict[str, str] = {}

    def run(st, target, rows, out, arm, schedule, args, use_host, phase="run"):
        ran.append((str(out.relative_to(tmp_path)), arm.image, schedule.alone))
        phases[str(out.relative_to(tmp_path))] = phase
        return 0

    monkeypatch.setattr(compare_without, "_run", run)
    reported = {}
    monkeypatch.setattr("ci.report.write.build", lambda *a, **kw: reported.update(kw) or object())
    monkeypatch.setattr("ci.report.write.write", lambda *a: None)
    monkeypatch.setattr("ci.report.write.summary", lambda *a: "")
    timed = plan.Plan(tuple(r for r in plan.build(st).rows if r.id == ROW.id), ())
    assert compare_without.main(st, fake, st.targets["cuda-sm90"], timed, use_host=False) == 0
    assert [r[0] for r in ran] == [
        "warm-up/fork", "warm-up/without-46849",
        *(f"arms/{arm}/run-{i}" for i in (1, 2, 3) for arm in ("fork", "without-46849", "aa")),
    ]  # fmt: skip
    assert all(alone for *_, alone in ran) and [r[1] for r in ran[:5]] == ["sha256:f", "sha256:w"] * 2 + ["sha256:f"]
    # the warm-ups compile: their costs are a bake's, so the projection of the timed runs never counts them as runs
    assert {p for r, p in phases.items() if r.startswith("warm-up/")} == {"bake"}
    assert {p for r, p in phases.items() if r.startswith("arms/")} == {"run"}
    said = capsys.readouterr().out
    assert "== warm-up of fork (untimed" in said and "== warm-up of without-46849 (untimed" in said
    assert reported["labels"] == ["fork", "without-46849", "aa"] and reported["changes"] == ["46849"]
    # --aa-runs 2 of 4 rounds: the A/A arm in rounds 1 and 3 (a protocol cut short has them among its rounds); the
    # time is said from measurements only: none before the first run here, then each arm's runs so far
    ran.clear()
    fake.runs, fake.aa_runs, fake.no_warm_up, fake.out = 4, 2, True, tmp_path / "k"
    monkeypatch.setenv("STACKGATE_COSTS", str(tmp_path / "no-costs"))
    assert compare_without.main(st, fake, st.targets["cuda-sm90"], timed, use_host=False) == 0
    arms = ("fork", "without-46849", "aa")
    assert [r[0] for r in ran] == [f"k/arms/{a}/run-{i}" for i in (1, 2, 3, 4) for a in arms if a != "aa" or i % 2]
    said = capsys.readouterr().out
    assert "10 runs; no cost measured for these rows' configurations" in said
    assert "1 of 10 runs done (fork: 0 s); about 0 min 00 s left" in said and "10 of 10 runs done" in said
    fake.aa_runs = 1
    with pytest.raises(UsageError, match="--aa-runs takes 2 or more"):
        compare_without.main(st, fake, st.targets["cuda-sm90"], timed, use_host=False)


def test_cold_runs_start_each_from_an_empty_caches_root_of_their_own_with_jit_allowed(tmp_path, monkeypatch):
    """#53's cold start as users meet it: no warm-up run, every arm run its own new caches root (never one an earlier
    run filled), JIT allowed, no AOT bake; refused on the image route."""
    import argparse
    import os

    import pytest

    from ci.arms import compare_without
    from ci.common.errors import UsageError
    from ci.run import host
    from ci.stack import loader, plan

    st = loader.load(DEFAULT_STACK)
    fake = argparse.Namespace(compare_without="46849", runs=3, aa=False, no_warm_up=False, out=tmp_path, stack=None,
                              aa_runs=None, bundles=None, unbaked=False, cold=True, gpus="", gpu_memory=None,
                              timeout=60.0, caches=None, fork=None, ref=None, upstream_ref=None, base_ref=None,
                              base_version=None)  # fmt: skip

    class Held:
        state, held = "ported", True

    class Fork:
        name, ref = "demo-fork", "main"

        def state(self, change):
            return Held()

    monkeypatch.setattr("ci.fork.source.from_command", lambda st, args: Fork())
    monkeypatch.setattr(host, "present", lambda target: True)
    builds = {"fork": compare_without.Arm(label="fork", path="/a", caches=tmp_path / "kept-a"),
              "46849": compare_without.Arm(label="46849", path="/b", caches=tmp_path / "kept-b")}  # fmt: skip
    monkeypatch.setattr(compare_without, "_builds", lambda *a: builds)
    seen = []

    def scheduled(st, specs, host, image, phase="run"):
        spec = specs[0]
        seen.append((spec.out.relative_to(tmp_path), os.environ["STACKGATE_RUNTIME_CACHES"],
                     os.environ.get("STACKGATE_REFUSE_JIT"), spec.unbaked, spec.keep_caches))  # fmt: skip
        return 0

    monkeypatch.setattr("ci.run.execute.run_scheduled", scheduled)
    monkeypatch.setattr("ci.report.write.build", lambda *a, **kw: object())
    monkeypatch.setattr("ci.report.write.write", lambda *a: None)
    monkeypatch.setattr("ci.report.write.summary", lambda *a: "")
    monkeypatch.setenv("STACKGATE_REFUSE_JIT", "1")
    timed = plan.Plan(tuple(r for r in plan.build(st).rows if r.id == ROW.id), ())
    assert compare_without.main(st, fake, st.targets["cuda-sm90"], timed, use_host=True) == 0
    assert [str(s[0]).split("/cuda-sm90")[0] for s in seen] == [
        f"arms/{arm}/run-{i}" for i in (1, 2, 3) for arm in ("fork", "without-46849")
    ]  # no warm-up: every run is a first one
    roots = [s[1] for s in seen]
    assert len(set(roots)) == 6 and all(str(tmp_path / "caches") in r for r in roots)
    assert all(refuse == "0" and unbaked and not keep for _, _, refuse, unbaked, keep in seen)
    assert os.environ["STACKGATE_REFUSE_JIT"] == "1"  # as it was, after the protocol
    with pytest.raises(UsageError, match="--cold starts each run from an empty JIT caches root"):
        compare_without.main(st, fake, st.targets["cuda-sm90"], timed, use_host=False)


def test_one_run_and_one_row_are_said_in_the_singular(tmp_path, capsys, monkeypatch) -> None:
    """The protocol's clock and projection, and ci plan's totals, where the count is one: '1 run', '1 row'."""
    from ci import cli
    from ci.run.schedule import rounds

    clock = rounds.Clock({"fork": 1})
    assert clock.ran("fork", 70.0).startswith("1 of 1 run done (fork: 70 s)")
    monkeypatch.setenv("STACKGATE_COSTS", str(tmp_path / "no-costs"))
    assert rounds.before([ROW], 1, tmp_path, cold=False).startswith("1 run; no cost measured")
    assert cli.main(["plan", "--rows", ROW.id]) == 0
    said = capsys.readouterr().out
    assert "\n1 row (" in said and "1 rows" not in said
