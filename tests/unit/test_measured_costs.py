"""Measured costs (ci.run.schedule.costs): what a job's JUnit and wall time say per engine configuration, the store a
schedule reads for its order and its ETA, a costs file from elsewhere checked as data, and `ci plan --estimate`'s
projection."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from support.paths import REPO

from ci import cli
from ci.common.errors import UsageError
from ci.run.schedule import costs, estimate
from ci.run.schedule.packing import Device, jobs
from ci.stack import loader, plan

STACK = loader.load(REPO / "stack")
PLAN = plan.build(STACK)
SM90 = [r for r in PLAN.rows if r.target == "cuda-sm90" and STACK.models[r.model].weights == "dummy" and r.gpus == 1]


def _junit(path: Path, cases: list[tuple[str, float]], stopped: str = "") -> Path:
    body = "".join(
        f'<testcase name="t[{row}]" time="{t}"><properties><property name="stackgate.row" value="{row}"/>'
        "</properties></testcase>"
        for row, t in cases
    )
    if stopped:  # as the harness records the row a SIGTERM or the deadline cut: 0 s, which is no measurement
        said = "interrupted by SIGTERM: the run was stopped during this row"
        body += (
            f'<testcase name="t[{stopped}]" time="0"><properties><property name="stackgate.row" '
            f'value="{stopped}"/></properties><error message="{said}"/></testcase>'
        )
    path.write_text(f'<testsuites><testsuite name="s">{body}</testsuite></testsuites>')
    return path


def _two_configs() -> tuple[list[plan.Row], list[plan.Row]]:
    by: dict[str, list[plan.Row]] = {}
    for r in SM90:
        by.setdefault(costs.config(r), []).append(r)
    group = next(rows for rows in by.values() if len(rows) >= 3)
    other = next(rows for key, rows in by.items() if key != costs.config(group[0]) and len(rows) >= 2)
    return group, other


def test_a_shared_job_measures_each_configurations_first_row_apart_from_its_further_rows(tmp_path: Path) -> None:
    a, b = _two_configs()
    cases = [(a[0].id, 40.0), (a[1].id, 3.0), (a[2].id, 5.0), (b[0].id, 30.0), (b[1].id, 2.0)]
    junit = _junit(tmp_path / "j.xml", cases, stopped=a[3].id if len(a) > 3 else b[2].id)
    found = costs.measure_job("bake", [*a, *b], junit, 100.0, "H200", when=1.0)
    by = {m.config: m for m in found}
    first, second = by[costs.config(a[0])], by[costs.config(b[0])]
    assert (first.first_s, first.further_s, first.further) == (40.0, (3.0, 5.0), 4.0)
    assert (second.first_s, second.further_s) == (30.0, (2.0,))
    assert first.process_s == second.process_s == 20.0 and first.configs_in_process == 2  # 100 s less 80 s of rows
    assert costs.config(a[0]).startswith(f"{a[0].model}/{a[0].change}/{a[0].suite}/") and "target" not in first.config


def test_the_store_keeps_the_newest_measurement_of_each_configuration(tmp_path: Path) -> None:
    a, _ = _two_configs()
    junit = _junit(tmp_path / "j.xml", [(a[0].id, 40.0)])
    costs.record(tmp_path / "r", costs.measure_job("run", a[:1], junit, 50.0, "H200", when=1.0))
    costs.record(
        tmp_path / "r", costs.measure_job("run", a[:1], _junit(junit, [(a[0].id, 10.0)]), 12.0, "H200", when=2.0)
    )
    (kept,) = costs.load([tmp_path / "r"])
    assert kept.first_s == 10.0 and costs.load([costs.store()]) == [kept]


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        ({"phase": "warm"}, ".phase: 'warm': not one of bake, run"),
        ({"first_s": "__import__('os')"}, ".first_s: \"__import__('os')\": not a number of seconds"),
        ({"first_s": 1e7}, ".first_s: 10000000.0: not a number of seconds"),
        ({"further_s": "1,2"}, ".further_s: '1,2': not a list"),
        ({"further_s": [1, -2]}, ".further_s[1]: -2: not a number of seconds"),
        ({"configs_in_process": 0}, ".configs_in_process: 0: not a count"),
        ({"host": None}, ".host: None: not a string"),
    ],
)
def test_a_costs_file_from_elsewhere_is_data_checked_field_by_field(tmp_path: Path, edit: dict, said: str) -> None:
    a, _ = _two_configs()
    entry = costs.measure_job("run", a[:1], _junit(tmp_path / "j.xml", [(a[0].id, 4.0)]), 5.0, "H200")[0].to_json()
    path = tmp_path / "costs.json"
    path.write_text(json.dumps({"schema": 1, "measured": [{**entry, **edit}]}))
    with pytest.raises(UsageError) as err:
        costs.load([path])
    assert f"{path}: measured[0]{said}" in err.value.message
    path.write_text("[]")
    with pytest.raises(UsageError, match="not a costs file of schema 1"):
        costs.load([path])


def _measured(rows: list[plan.Row], phase: str, first: float, further: float, process: float) -> costs.Measured:
    r = rows[0]
    return costs.Measured(phase=phase, target=r.target, config=costs.config(r), model=r.model, suite=r.suite,
                          first_s=first, further_s=(further,) * (len(rows) - 1), process_s=process,
                          configs_in_process=1, host="NVIDIA H200", when=1.0)  # fmt: skip


def test_a_configuration_not_measured_on_its_target_takes_another_targets_then_a_median() -> None:
    a, b = _two_configs()
    known = estimate.Costs([_measured(a, "run", 40.0, 4.0, 20.0)])
    assert known.lookup("run", a[0])[1] == "measured"
    elsewhere = replace(a[0], target="cuda-sm121a")
    assert known.lookup("run", elsewhere) == (known.measured[0], "other target")
    assert known.lookup("bake", a[0]) == (None, "none")
    seconds, how = known.job_seconds("run", b[:2])
    assert how == ["model median" if b[0].model == a[0].model and b[0].suite == a[0].suite else "phase median"]
    assert seconds == pytest.approx(40.0 + 4.0 + 20.0)  # the median of one: the first row, one further, the process


def test_the_schedule_starts_the_longest_measured_job_first() -> None:
    groups: dict[tuple[str, str, str], list[plan.Row]] = {}
    for r in SM90:
        groups.setdefault((r.model, r.change, r.suite), []).append(r)
    rows = [r for together in list(groups.values())[:2] for r in together]
    plain = jobs(rows, STACK, share=True)
    first, last = plain[0].rows, plain[-1].rows
    measured = [_measured(list(first), "run", 10.0, 1.0, 5.0), _measured(list(last), "run", 90.0, 9.0, 5.0)]
    known = estimate.Costs(measured)
    ordered = jobs(rows, STACK, share=True, seconds=lambda together: known.job_seconds("run", together)[0])
    assert ordered[0].rows == last and ordered[-1].rows == first  # the measured costs turned the order round


def test_the_projection_packs_as_the_scheduler_does_and_leaves_out_what_it_cannot_cost() -> None:
    groups: dict[tuple[str, str, str], list[plan.Row]] = {}
    for r in SM90:
        if r.model.startswith("tiny-"):
            groups.setdefault((r.model, r.change, r.suite), []).append(r)
    a, b = [[r for r in g if costs.config(r) == costs.config(g[0])] for g in list(groups.values())[:2]]
    known = estimate.Costs([_measured(a, "bake", 60.0, 5.0, 20.0), _measured(b, "bake", 60.0, 5.0, 20.0)])
    rows = [*a, *b]
    size = max(j.memory_gib or 0 for j in jobs(rows, STACK, share=True))  # a GPU holds one shared process
    one = estimate.project(STACK, rows, [Device("0", size)], known, "bake")
    two = estimate.project(STACK, rows, [Device("0", size), Device("1", size)], known, "bake")
    assert one.jobs == two.jobs >= 2 and two.wall_s < one.wall_s
    assert one.wall_s == pytest.approx(sum(known.job_seconds("bake", j.rows)[0] for j in jobs(rows, STACK, share=True)))
    hub = next(r for r in PLAN.rows if r.target == "cuda-sm90" and STACK.models[r.model].weights != "dummy")
    wide = next(
        r for r in PLAN.rows if r.target == "cuda-sm90" and r.gpus > 1 and STACK.models[r.model].weights == "dummy"
    )
    p = estimate.project(STACK, [*rows, hub, wide], [Device("0", size)], known, "bake")
    assert p.hub_unmeasured == (hub,) and p.unplaceable == (wide,) and p.wall_s == one.wall_s
    lines = estimate.describe(p, size, ["NVIDIA H200"])
    assert f"projected on 1 GPU of {size:g} GiB" in lines[0] and "1 row with hub weights" in "\n".join(lines)


def test_ci_plan_estimate_prints_a_projection_from_a_costs_file(tmp_path: Path, capsys) -> None:
    a, b = _two_configs()
    path = costs.write(
        tmp_path / "costs.json", [_measured(a, "bake", 60.0, 5.0, 20.0), _measured(b, "run", 9.0, 2.0, 18.0)]
    )
    argv = ["plan", "--estimate", "--target", "cuda-sm121a", "--gpus", "1", "--gpu-memory", "119", "--costs", str(path)]
    assert cli.main(argv) == 0
    said = capsys.readouterr().out
    assert "a projection from measured costs, not a measurement" in said
    assert "bake: " in said and "run: " in said and "projected on 1 GPU of 119 GiB" in said
    assert cli.main(argv[:-2]) == 2  # the host's store (empty in a test): nothing to project from
    assert "no measured costs in" in capsys.readouterr().err
    assert cli.main(["plan", "--estimate", "--target", "cpu", "--costs", str(path)]) == 2
    assert "add --gpu-memory GIB" in capsys.readouterr().err
