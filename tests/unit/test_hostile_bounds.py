"""A number from the command line is held to the bound of what it counts: outside it, exit 2 naming the bound, before
anything is built from it (30,000,000 GPUs would have the projection make them all)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support.paths import REPO

from ci import cli
from ci.run.schedule import costs
from ci.stack import loader, plan

STACK = loader.load(REPO / "stack")


def _costs_file(tmp_path: Path) -> Path:
    row = next(r for r in plan.build(STACK).rows if r.target == "cuda-sm90")
    measured = costs.Measured(phase="run", target=row.target, config=costs.config(row), model=row.model,
                              suite=row.suite, first_s=10.0, further_s=(), process_s=5.0, configs_in_process=1,
                              host="NVIDIA H200", when=1.0)  # fmt: skip
    return costs.write(tmp_path / "costs.json", [measured])


@pytest.mark.parametrize("gpus", ["0", "-2", "30000000", "1e3", "two"])
def test_plan_estimate_refuses_a_count_of_gpus_out_of_bounds(gpus: str, tmp_path: Path, capsys) -> None:
    argv = ["plan", "--estimate", "--target", "cuda-sm90", "--gpu-memory", "80", "--costs", str(_costs_file(tmp_path))]
    start = time.monotonic()
    with pytest.raises(SystemExit) as stop:
        cli.main([*argv, "--gpus", gpus])
    assert stop.value.code == 2 and time.monotonic() - start < 5
    err = capsys.readouterr().err
    assert "--gpus" in err and ("give 1 to 1,024" in err or "not a whole number" in err)
    assert cli.main([*argv, "--gpus", "8"]) == 0


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["main", "--compare-without", "46849", "--runs", "0"], "give 1 to 1,000"),
        (["main", "--compare-without", "46849", "--aa", "--aa-runs", "1"], "give 2 to 1,000"),
        (["pipeline", "--one-agent", "--runs", "100000"], "give 1 to 1,000"),
        (["run", "cpu", "selftest", "--host", "--out", "o", "--timeout", "1e12"], "at most 604,800"),
        (["run", "cpu", "selftest", "--host", "--out", "o", "--gpu-memory", "1e9"], "at most 4,096"),
        (["run", "cpu", "selftest", "--host", "--out", "o", "--shard", "-1"], "give 0 to 9,999"),
    ],
)
def test_every_count_and_amount_on_the_command_line_is_bounded(args: list[str], says: str, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        cli.main(args)
    assert stop.value.code == 2 and says in capsys.readouterr().err
