"""`ci repro --report` on a report.json from elsewhere runs nothing the stack and the local images do not vouch for:
no text of the report reaches a shell, and the image, devices and mounts are never the report's choice. An image the
engine lacks is test_repro_fetches_no_image.py's."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from support.report_helpers import rows, write_rows

from ci import cli
from ci.stack import loader, plan, rows_json

IMAGE = "sha256:" + "f" * 64  # by content, and held by no engine


def _cpu_row() -> plan.Row:
    st = loader.load()
    return next(r for r in plan.build(st).rows if r.target == "cpu")


def _hostile_rows_json(row: plan.Row, **target: object) -> dict:
    """A rows.json as a report from elsewhere may carry it: its devices, env and suites tree chosen by its author."""
    st = loader.load()
    doc = rows_json.document(st, st.targets["cpu"], row.suite, [row], image={"ref": "host", "digest": None},
                             git_revision="x", timeout_s=900)  # fmt: skip
    doc["target"].update(target)
    return doc


def test_a_tests_repro_command_in_the_report_is_never_run(tmp_path: Path, capsys) -> None:
    """The case seen: `ci repro TEST --report R` passed R's `repro_command` to `bash -c`."""
    marker = tmp_path / "ran"
    test = "selftest.test_x::test_y"
    entry = {"file": "x.xml", "test": test, "status": "failure", "message": "m",
             "repro_command": f"touch {marker}; echo pwned"}  # fmt: skip
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"rows": [], "unkeyed": [entry]}))
    assert cli.main(["repro", test, "--report", str(report)]) == 2  # no target or suite to make a line from
    assert cli.main(["repro", test, "--report", str(report), "--print"]) == 2
    entry.update(target="cpu", suite="selftest", image=IMAGE)
    report.write_text(json.dumps({"rows": [], "unkeyed": [entry]}))
    capsys.readouterr()
    assert cli.main(["repro", test, "--report", str(report), "--print"]) == 0
    line = capsys.readouterr().out
    assert "pwned" not in line and str(marker) not in line
    words = shlex.split(line)
    assert (
        words[:2] == ["docker", "run"]
        and IMAGE in words
        and "/opt/stackgate/suites/selftest/test_x.py::test_y" in words
    )
    assert cli.main(["repro", test, "--report", str(report), "--out", str(tmp_path / "o")]) == 4  # image not held
    assert "is not held by this docker engine" in capsys.readouterr().err
    assert not marker.exists()


def test_a_rows_devices_mounts_env_and_image_come_from_the_stack_never_the_report(tmp_path: Path, capsys) -> None:
    """The case seen: a report's rows_json chose `--device /dev/vda`, group 0, a host mount and the image."""
    row = _cpu_row()
    doc = _hostile_rows_json(row, devices={"gpus": "all", "paths": ["/dev/vda"], "groups": ["0"]},
                             env={"LD_PRELOAD": "/tmp/evil.so"}, platform="linux/evil")  # fmt: skip
    entry = {"id": row.id, "status": "failure", "rows_json": doc,
             "runs": [{"test": f"{row.suite}.test_x::test_y[{row.id}]", "status": "failure"}]}  # fmt: skip
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"rows": [entry]}))
    capsys.readouterr()
    assert cli.main(["repro", row.id, "--report", str(report), "--print"]) == 0  # a host run's record: a host re-run
    shown = capsys.readouterr().out
    assert f"run cpu selftest --host --rows {row.id}" in shown
    assert "/dev/vda" not in shown and "LD_PRELOAD" not in shown and "evil" not in shown and "docker" not in shown
    for image in ("evil:latest", "--privileged", "alpine; touch x"):
        doc["image"] = {"ref": image, "digest": image, "id": image}
        report.write_text(json.dumps({"rows": [entry]}))
        assert cli.main(["repro", row.id, "--report", str(report), "--print"]) == 2
        assert "names no image by content" in capsys.readouterr().err
    doc["image"] = {"ref": "x", "digest": IMAGE, "id": IMAGE}
    doc["suites_dir"] = "/"
    report.write_text(json.dumps({"rows": [entry]}))
    assert cli.main(["repro", row.id, "--report", str(report), "--print"]) == 2  # a host path to mount: refused
    assert "add --suites-dir DIR" in capsys.readouterr().err
    del doc["suites_dir"]
    report.write_text(json.dumps({"rows": [entry]}))
    assert cli.main(["repro", row.id, "--report", str(report), "--print", "--out", str(tmp_path / "o")]) == 0
    words = shlex.split(capsys.readouterr().out)
    assert "--device" not in words and "--group-add" not in words and "--gpus" not in words
    assert "/dev/vda" not in words and "LD_PRELOAD=/tmp/evil.so" not in words
    assert words[words.index("--platform") + 1] == "linux/amd64" and IMAGE in words
    assert [w for w in words if w.startswith("type=bind,source=/,")] == []
    written = json.loads((tmp_path / "o" / "rows.json").read_text())  # written anew from the stack
    assert written["target"]["devices"] == {"gpus": None, "paths": [], "groups": []}
    assert "LD_PRELOAD" not in written["target"]["env"]


def test_a_row_the_stack_does_not_plan_is_refused(tmp_path: Path, capsys) -> None:
    row = _cpu_row()
    forged = row.id.rsplit(".", 1)[0] + ".00000000"
    entry = {"id": forged, "status": "failure", "rows_json": {"image": {"id": IMAGE}}, "runs": []}
    (tmp_path / "report.json").write_text(json.dumps({"rows": [entry]}))
    assert cli.main(["repro", forged, "--report", str(tmp_path / "report.json"), "--print"]) == 2
    assert "is not in the plan of" in capsys.readouterr().err


def test_the_reports_own_lines_take_the_targets_devices_from_the_stack(tmp_path: Path) -> None:
    """The line the report prints for a failing row is made from the stack, not from the rows.json beside the JUnit
    (which came with the results)."""
    from dataclasses import replace

    selftest = rows("selftest")
    [junit] = write_rows(tmp_path / "j", selftest, lambda r, c: replace(c, status="failure", message="no"))
    doc = _hostile_rows_json(selftest[0], devices={"gpus": None, "paths": ["/dev/vda"], "groups": ["0"]})
    doc["rows"] = [rows_json.row_document(loader.load(), r) for r in selftest]
    doc["image"] = {"ref": "x", "digest": IMAGE, "id": IMAGE}
    (junit.parent / "rows.json").write_text(json.dumps(doc))
    assert cli.main(["report", str(junit), "--out", str(tmp_path / "r")]) == 1
    made = json.loads((tmp_path / "r" / "report.json").read_text())
    lines = [r["repro_command"] for r in made["rows"] if r.get("repro_command")]
    assert lines and all("/dev/vda" not in line and "--group-add" not in line for line in lines)
    assert all(IMAGE in line for line in lines)


@pytest.mark.parametrize("image", ["--privileged", "evil:latest"])
def test_an_image_given_on_the_command_line_is_checked_too(tmp_path: Path, capsys, image: str) -> None:
    row = _cpu_row()
    entry = {"id": row.id, "status": "failure", "rows_json": {"image": {"id": IMAGE}}, "runs": []}
    (tmp_path / "report.json").write_text(json.dumps({"rows": [entry]}))
    assert cli.main(["repro", row.id, "--report", str(tmp_path / "report.json"), f"--image={image}", "--print"]) == 2
    assert "does not name an image by content" in capsys.readouterr().err
