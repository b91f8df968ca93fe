"""The GPU suites on a machine without those GPUs, through `ci run --host`: one item per planned row, each skipped
with its reason, none passed."""

from __future__ import annotations

import pytest
from junitparser import Skipped
from junitparser.xunit2 import JUnitXml

from ci import cli
from ci.run import host
from ci.stack import loader as stack
from ci.stack import plan


@pytest.mark.parametrize("target", ["cuda-sm121a", "rocm-gfx1151", "cuda-sm90"])
@pytest.mark.parametrize("suite", ["spec_decode", "sparse_mla"])
def test_gpu_rows_collect_one_item_each_and_skip_here(target, suite, tmp_path):
    detect = stack.load().targets[target].detect
    if detect.nvidia_compute_capability in host.nvidia_compute_capabilities() or (
        detect.amdgpu_gfx in host.amdgpu_gfx_names()
    ):
        pytest.skip(f"this host has the {target} hardware: its rows would run")
    planned = {r.id for r in plan.build(stack.load()).select(targets=[target], suites=[suite]).rows}
    assert cli.main(["run", target, suite, "--host", "--out", str(tmp_path)]) == 6  # nothing could run here
    cases = [c for s in JUnitXml.fromfile(str(tmp_path / f"junit-{target}-{suite}-0.xml")) for c in s]
    rows = [next(p.value for p in c.properties() if p.name == "stackgate.row") for c in cases]
    assert sorted(rows) == sorted(planned) and len(rows) == len(set(rows))
    for case in cases:
        assert case.result and isinstance(case.result[0], Skipped), case.name
        assert "hardware absent" in case.result[0].message
