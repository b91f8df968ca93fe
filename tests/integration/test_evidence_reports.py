"""The committed evidence reports are what today's code renders from their committed JUnit (`nox -s evidence`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ci import evidence
from ci.common import options

REPORTS = evidence.reports()


def test_every_committed_report_records_the_command_that_made_it():
    assert len(REPORTS) >= 10
    for folder in REPORTS:
        argv = evidence.argv_of(folder)
        assert argv[0] == "report" and "--out" in argv, folder


@pytest.mark.parametrize("folder", REPORTS, ids=[str(p.relative_to(evidence.EVIDENCE)) for p in REPORTS])
def test_a_committed_report_is_todays_rendering_of_its_junit(folder, monkeypatch):
    monkeypatch.chdir(options.REPO)  # recorded paths are relative to the repository root
    assert evidence.differences(folder, evidence.rendered(folder)) == []


def test_a_report_that_differs_is_found_and_named(tmp_path, monkeypatch):
    monkeypatch.chdir(options.REPO)
    folder = REPORTS[0]
    fresh = evidence.rendered(folder)
    edited = {**fresh, "report.md": fresh["report.md"].replace(b"not ready", b"ready", 1)}
    found = evidence.differences(folder, edited)
    assert len(found) == 1 and "report.md (committed)" in found[0] and "-" in found[0]


def test_the_revision_alone_is_no_difference(monkeypatch):
    monkeypatch.chdir(options.REPO)
    folder = REPORTS[0]
    fresh = evidence.rendered(folder)
    doc = json.loads(fresh["report.json"])
    doc["generator"]["revision"] = "0" * 40
    other = {**fresh, "report.json": json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"}
    assert evidence.differences(folder, other) == []
    doc["generator"]["version"] = "9.9.9"
    other = {**fresh, "report.json": json.dumps(doc).encode()}
    assert evidence.differences(folder, other)


def test_the_command_line_passes_a_true_report_and_refuses_a_moved_one(tmp_path):
    """`python -m ci.evidence`: exit 0 on a committed report; exit 1, naming why, on a copy elsewhere (its
    recorded --out names another folder, so it cannot be the rendering of that command)."""
    folder = REPORTS[0]
    copy = tmp_path / "report"
    shutil.copytree(folder, copy)
    env = {**os.environ, "PYTHONPATH": str(options.REPO)}
    ok = subprocess.run([sys.executable, "-m", "ci.evidence", str(folder)], cwd=tmp_path, env=env,
                        capture_output=True, text=True)  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert "as today's code renders it" in ok.stdout
    moved = subprocess.run([sys.executable, "-m", "ci.evidence", str(copy)], cwd=tmp_path, env=env,
                           capture_output=True, text=True)  # fmt: skip
    assert moved.returncode == 1
    assert f"not to {copy}" in moved.stderr


# Results whose row truly was defined otherwise when it ran: the warning is the report telling the truth.
DEFINED_OTHERWISE = {
    # its DeepSeek-V4 rows ran before models.yaml gave the model VLLM_USE_DEEP_GEMM=1 (evidence/h200-shrunk/FINDINGS.md)
    "h200-shrunk/third-run/report": "model.env.VLLM_USE_DEEP_GEMM",
}


@pytest.mark.parametrize("folder", REPORTS, ids=[str(p.relative_to(evidence.EVIDENCE)) for p in REPORTS])
def test_no_committed_report_warns_of_another_stack(folder):
    """The stack digest covers what a row means (ci.stack.meaning), not every byte of stack/: an edit of prose,
    upstream facts or resources since a run leaves its report without a warning; a row defined otherwise is named."""
    md = (folder / "report.md").read_text()
    assert "another stack" not in md
    said = [line for line in md.splitlines() if "defined otherwise" in line]
    why = DEFINED_OTHERWISE.get(str(folder.relative_to(evidence.EVIDENCE)))
    assert all(why and why.replace("_", "\\_") in line for line in said), said
    assert bool(said) == bool(why)


def test_a_campaigns_runs_are_packed_only_where_its_reports_render_the_same_and_unpacked_only_while_rendering(
    tmp_path: Path,
) -> None:
    """pack() moves the run files into runs.tar.xz (the same bytes back); unpacked() puts them in place for as long as
    it holds, then removes exactly what it made; a member naming a path outside the campaign is refused."""
    import io
    import tarfile

    camp = tmp_path / "evidence" / "c"
    (camp / "arms" / "run-1" / "logs").mkdir(parents=True)
    (camp / "README.md").write_text("# c\n")
    (camp / "arms" / "run-1" / "junit-x.xml").write_text("<testsuites/>")
    (camp / "arms" / "run-1" / "logs" / "row.log").write_text("log\n")
    (camp / "arms" / "run-1" / "rows.json").write_text("{}")
    assert evidence.pack(camp) == 3
    assert sorted(p.name for p in camp.rglob("*") if p.is_file()) == ["README.md", evidence.ARCHIVE]
    before = sorted(camp.rglob("*"))
    with evidence.unpacked(["c"], root=tmp_path / "evidence") as root:
        assert root == tmp_path
        assert (camp / "arms" / "run-1" / "logs" / "row.log").read_text() == "log\n"
    assert sorted(camp.rglob("*")) == before
    bad = tmp_path / "evidence" / "d"
    bad.mkdir()
    with tarfile.open(bad / evidence.ARCHIVE, "w:xz") as tar:
        info = tarfile.TarInfo("../../escaped.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with (
        pytest.raises(ValueError, match="not a plain file inside the campaign"),
        evidence.unpacked(["d"], root=tmp_path / "evidence"),
    ):
        pass
    assert not (tmp_path / "escaped.txt").exists()
