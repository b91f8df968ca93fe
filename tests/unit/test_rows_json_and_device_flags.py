"""ci.run's host side: row selection, rows.json, device flags from the target's data, and ci.repro."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from junitparser.xunit2 import JUnitXml

from ci import cli
from ci import engine as container
from ci.common.errors import UsageError
from ci.run import execute as run
from ci.run import run_spec
from ci.run.rerun import lines
from ci.stack import loader as stack
from ci.stack import plan, rows_json


@pytest.fixture(scope="module")
def st():
    return stack.load()


def _spec(st, target: str, suite: str, out: Path) -> run_spec.RunSpec:
    rows = run.select_rows(st, target, suite, [])
    return run_spec.RunSpec(target=st.targets[target], suite=suite, rows=rows, out=out, suites_dir=None, timeout_s=60)


def test_unknown_row_ids_are_a_usage_error(st, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not planned for cpu/selftest: nope"):
        run.select_rows(st, "cpu", "selftest", ["nope"])
    assert cli.main(["run", "cpu", "selftest", "--rows", "nope", "--host", "--out", str(tmp_path)]) == 2
    assert cli.main(["run", "no-such-target", "selftest", "--host", "--out", str(tmp_path)]) == 2


def test_rows_json_rows_are_self_contained(st, tmp_path: Path) -> None:
    spec = _spec(st, "cuda-sm90", "spec_decode", tmp_path)
    doc = rows_json.document(
        st,
        spec.target,
        spec.suite,
        spec.rows,
        image={"ref": "img", "digest": "sha256:1", "id": "sha256:1"},
        git_revision="abc",
        timeout_s=900,
    )
    assert doc["schema"] == 1 and doc["suite"] == "spec_decode" and doc["target"]["nvidia_compute_capability"] == "9.0"
    assert json.loads(json.dumps(doc["target"]["devices"])) == {"gpus": "all", "paths": [], "groups": []}
    row = doc["rows"][0]
    assert row["model_info"]["id"] == row["model"] and "drafter" in row["model_info"]
    assert {"tolerance", "graph_replay", "measurements"} <= set(row["acceptance"])
    json.dumps(doc)  # serialisable as it stands


def test_device_flags_come_from_the_target(st, tmp_path: Path) -> None:
    (tmp_path / "rows.json").write_text("{}")
    cuda = run.container_spec(_spec(st, "cuda-sm90", "spec_decode", tmp_path), "img").sdk_kwargs()
    assert cuda["device_requests"][0]["Count"] == -1 and cuda["device_requests"][0]["Capabilities"] == [["gpu"]]
    rocm = run.container_spec(_spec(st, "rocm-gfx1151", "sparse_mla", tmp_path), "img").sdk_kwargs()
    assert rocm["devices"] == ["/dev/kfd:/dev/kfd:rwm", "/dev/dri:/dev/dri:rwm"]
    assert rocm["group_add"] == ["video", "render"] and "device_requests" not in rocm
    cpu = run.container_spec(_spec(st, "cpu", "selftest", tmp_path), "img").sdk_kwargs()
    assert not {"devices", "group_add", "device_requests"} & set(cpu)
    assert cpu["network_mode"] == "none"
    mounts = {m["Target"]: m["ReadOnly"] for m in cpu["mounts"]}
    assert mounts[container.ROWS] is True and mounts[container.RESULTS] is False


def test_repro_reruns_exactly_one_row(st, tmp_path: Path) -> None:
    spec = _spec(st, "cpu", "selftest", tmp_path)
    tmp_path.joinpath("rows.json").write_text(
        json.dumps(
            rows_json.document(
                st,
                spec.target,
                spec.suite,
                spec.rows,
                image={"ref": "host", "digest": None},
                git_revision="x",
                timeout_s=900,
            )
        )
    )
    row = spec.rows[2].id
    image = "stackgate/cpu@sha256:" + "a" * 64
    r = lines.from_rows_json(st, tmp_path / "rows.json", row, image=image, python=sys.executable,
                             out=tmp_path / f"repro-{row}")  # fmt: skip
    assert "--stackgate-row" in r.docker and row in r.docker and image in r.docker
    assert "--network none" in r.docker and "\n" not in r.docker and "\n" not in r.host
    subprocess.run(["bash", "-c", r.host], check=False, capture_output=True)
    suite = next(iter(JUnitXml.fromfile(str(tmp_path / f"repro-{row}" / f"junit-repro-{row}.xml"))))
    assert [p.value for c in suite for p in c.properties() if p.name == "stackgate.row"] == [row]


def test_repro_gpu_row_carries_the_device_flags(st, tmp_path: Path) -> None:
    spec = _spec(st, "rocm-gfx1151", "sparse_mla", tmp_path)
    doc = rows_json.document(
        st,
        spec.target,
        spec.suite,
        spec.rows,
        image={"ref": "r/x:1", "digest": "sha256:" + "d" * 64, "id": "sha256:" + "e" * 64},
        git_revision="x",
        timeout_s=900,
    )
    tmp_path.joinpath("rows.json").write_text(json.dumps(doc))
    r = lines.from_rows_json(st, tmp_path / "rows.json", spec.rows[0].id)
    assert "--device /dev/kfd --device /dev/dri --group-add video --group-add render" in r.docker
    assert f" r/x@sha256:{'d' * 64} " in r.docker
    assert cli.main(["repro", "missing", "--rows-json", str(tmp_path / "rows.json")]) == 2


def test_plan_rows_have_one_suite_folder_each() -> None:
    suites = {r.suite for r in plan.build(stack.load()).rows}
    missing = [s for s in suites if not (run.DEFAULT_SUITES / s).is_dir()]
    assert not missing, f"planned suites without a folder under suites/: {missing}"


def _doc(st, spec, image, revision):
    return rows_json.document(st, spec.target, spec.suite, spec.rows, image=image, git_revision=revision, timeout_s=900)
