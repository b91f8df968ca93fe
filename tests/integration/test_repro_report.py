"""`ci repro <row> --report report.json`: one docker line from a report alone; a GPU row refused plainly where
this host lacks the GPU. The line is run for real in tests/integration/test_faults_in_a_container.py."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import REPO
from support.selftest_trees import FAILING_TEST, failing_tree

from ci import cli
from ci.run import host
from ci.run.rerun import report_read


@pytest.fixture(scope="module")
def host_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A report of the failing tree run on this host's Python (the rows.json of the run beside its JUnit)."""
    tmp = tmp_path_factory.mktemp("repro")
    tree = failing_tree(tmp / "suites")
    argv = ["run", "cpu", "selftest", "--host", "--suites-dir", str(tree), "--out", str(tmp / "results" / "r0")]
    assert cli.main(argv) == 1
    assert cli.main(["report", str(tmp / "results"), "--out", str(tmp / "report")]) == 1  # failing rows: exit 1
    return tmp / "report" / "report.json"


def _failing(report: Path) -> dict:
    return next(r for r in json.loads(report.read_text())["rows"] if r["status"] == "failure")


def test_the_report_carries_each_run_rows_document(host_report: Path) -> None:
    rows = {r["id"]: r for r in json.loads(host_report.read_text())["rows"]}
    ran = [r for r in rows.values() if r["target"] == "cpu"]
    assert ran and all(r["rows_json"] and [x["id"] for x in r["rows_json"]["rows"]] == [r["id"]] for r in ran)
    doc = ran[0]["rows_json"]
    assert doc["target"]["platform"] == "linux/amd64" and doc["target"]["devices"] == {"gpus": None, "paths": [],
                                                                                       "groups": []}  # fmt: skip
    assert doc["suites_dir"].endswith("suites") and doc["image"]["ref"] == "host"
    assert all(r["rows_json"] is None for r in rows.values() if r["status"] == "not run")


def test_print_gives_one_docker_line_for_the_row(host_report: Path, tmp_path: Path) -> None:
    row = _failing(host_report)
    argv = [sys.executable, "-m", "ci", "repro", row["id"], "--report", str(host_report), "--print",
            "--image", "stackgate/cpu@sha256:" + "a" * 64, "--out", str(tmp_path / "re")]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    # the run mounted a suites tree of its own: a report never names the host path to mount
    assert done.returncode == 2 and "add --suites-dir DIR" in done.stderr, done.stderr
    done = subprocess.run([*argv, "--suites-dir", str(host_report.parent.parent / "suites")], cwd=REPO,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1 and done.stdout.startswith("docker run "), done.stdout
    words = shlex.split(done.stdout)
    assert "stackgate/cpu@sha256:" + "a" * 64 in words and words[words.index("--platform") + 1] == "linux/amd64"
    assert f"/opt/stackgate/user-suites/selftest/test_fits.py::test_context_fits[{row['id']}]" in words
    assert words[words.index("--stackgate-row") + 1] == row["id"]
    written = json.loads((tmp_path / "re" / "rows.json").read_text())
    assert [r["id"] for r in written["rows"]] == [row["id"]]


def test_a_host_run_re_runs_on_this_host_into_a_results_folder(
    host_report: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    """A row that ran on a host's Python re-runs there (`ci run --host`, that row alone) into out/repro/<row> under
    the current folder, never beside the report; its own suites tree is named, as a report never chooses one."""
    row = _failing(host_report)["id"]
    monkeypatch.chdir(tmp_path)
    assert cli.main(["repro", row, "--report", str(host_report)]) == 2
    assert "add --suites-dir DIR" in capsys.readouterr().err
    before = sorted(p.name for p in host_report.parent.iterdir())
    assert (
        cli.main(
            ["repro", row, "--report", str(host_report), "--suites-dir", str(host_report.parent.parent / "suites")]
        )
        == 1
    )
    out = capsys.readouterr().out
    assert out.startswith(f"# {row} ran on a host's Python") and f"--rows {row}" in out
    (junit,) = (tmp_path / "out" / "repro" / row).glob("junit-*.xml")
    assert f"test_context_fits[{row}]" in junit.read_text() and "is over 4096" in junit.read_text()
    assert sorted(p.name for p in host_report.parent.iterdir()) == before


def test_the_fork_reports_h200_row_prints_its_host_line_and_exits_6_writing_nothing(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """The committed fork report's failing H200 row, here without the GPU: the line that re-runs it on an H200 host,
    then exit 6 naming the GPU; nothing written, under evidence/ or anywhere."""
    if host.has("9.0", None):
        pytest.skip("this host has the target's GPU")
    report = REPO / "evidence" / "h200-fork" / "report" / "report.json"
    row = _failing(report)["id"]
    tree = sorted((p, p.stat().st_mtime_ns) for p in (REPO / "evidence").rglob("*"))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["repro", row, "--report", str(report)]) == 6
    out, err = capsys.readouterr()
    assert "re-run it on an H200 host (cuda-sm90)" in out and f"python -m ci repro {row} --report " in out
    assert f"run cuda-sm90 sparse_mla --host --rows {row}" in out
    assert "runs on cuda-sm90 (NVIDIA compute capability 9.0); this host has" in err
    assert sorted((p, p.stat().st_mtime_ns) for p in (REPO / "evidence").rglob("*")) == tree
    assert list(tmp_path.iterdir()) == []


def test_a_gpu_row_says_this_host_lacks_the_gpu_before_trying(tmp_path: Path, capsys) -> None:
    from ci.stack import loader, plan

    st = loader.load()
    row = next(r for r in plan.build(st).rows if r.target == "rocm-gfx1151")
    entry = {"id": row.id, "status": "failure", "rows_json": {"image": {"id": "sha256:" + "b" * 64}},
             "runs": [{"test": f"{row.suite}.test_x::test_y[{row.id}]", "status": "failure"}]}  # fmt: skip
    gpu_report = tmp_path / "report.json"
    gpu_report.write_text(json.dumps({"rows": [entry]}))
    argv = ["repro", row.id, "--report", str(gpu_report)]
    if host.has(None, "gfx1151"):
        pytest.skip("this host has the target's GPU")
    assert cli.main(argv) == 6
    out, err = capsys.readouterr()
    assert "runs on rocm-gfx1151 (AMD gfx1151); this host has" in err and "--print" in err
    assert "--device /dev/kfd" in out  # the line is still shown, before the refusal
    assert cli.main([*argv, "--print"]) == 0


def test_bad_report_input_exits_2(host_report: Path, tmp_path: Path, capsys) -> None:
    assert cli.main(["repro", "selftest.cpu.nope.12345678", "--report", str(host_report), "--print"]) == 2
    assert "its failing rows: selftest.cpu." in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{")
    assert cli.main(["repro", "a.b.c.d", "--report", str(tmp_path / "bad.json")]) == 2
    assert "not a report.json written by ci report" in capsys.readouterr().err
    argv = ["repro", "a.b.c.d", "--report", str(host_report), "--rows-json", "x"]
    assert cli.main(argv) == 2


def test_node_ids_come_from_the_failing_runs() -> None:
    entry = {"runs": [{"test": "sel.test_a::test_x[r1]", "status": "pass"},
                      {"test": "sel.test_a.TestK::test_y[r1]", "status": "failure"}]}  # fmt: skip
    assert report_read.node_ids(report_read.RowEntry.model_validate({"id": "r1", **entry}), "sel") == (
        "sel/test_a.py::TestK::test_y[r1]",
    )
    # the harness's "no test serves this row" case names no test module: the suite's folder is run
    entry = report_read.RowEntry.model_validate({"id": "r1", "runs": [{"test": "sel::r1", "status": "error"}]})
    assert report_read.node_ids(entry, "sel") == ()


def test_without_a_report_here_it_says_where_it_looked(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["repro", "a.b.c.d", "--print"]) == 2
    err = capsys.readouterr().err
    assert "no report here (report/report.json or out/report/report.json)" in err and "--report" in err


@pytest.mark.parametrize("target", ["cuda-sm121a", "rocm-gfx1151", "cuda-sm90", "cpu"])
def test_every_target_gets_its_platform_devices_and_env(target: str, tmp_path: Path, capsys) -> None:
    from ci.stack import loader, plan, rows_json

    st = loader.load()
    row = next(r for r in plan.build(st).rows if r.target == target)
    t = st.targets[target]
    image = {
        "ref": f"registry.example/stackgate/{target}:abc",
        "digest": "sha256:" + "d" * 64,
        "id": "sha256:" + "e" * 64,
    }
    doc = rows_json.document(st, t, row.suite, [row], image=image, git_revision="x", timeout_s=900)
    entry = {"id": row.id, "status": "failure", "rows_json": doc,
             "runs": [{"test": f"{row.suite}.test_x::test_y[{row.id}]", "status": "failure"}]}  # fmt: skip
    (tmp_path / "report.json").write_text(json.dumps({"rows": [entry]}))
    assert cli.main(["repro", row.id, "--report", str(tmp_path / "report.json"), "--print"]) == 0
    words = shlex.split(capsys.readouterr().out)
    assert f"registry.example/stackgate/{target}@sha256:{'d' * 64}" in words  # the registry digest, not the tag
    assert words[words.index("--platform") + 1] == t.platform
    assert ("--gpus" in words) == (t.devices.gpus == "all")
    assert [words[i + 1] for i, w in enumerate(words) if w == "--device"] == list(t.devices.paths)
    assert all(f"{k}={v}" in words for k, v in t.env.items())
    assert f"/opt/stackgate/suites/{row.suite}/test_x.py::test_y[{row.id}]" in words


# a test naming no row, beside the rows: it fails, and so must the report, with a line that re-runs it
PLAIN_TEST = """\
def test_plain_check():
    assert 1 + 1 == 3, "arithmetic is off"
"""


def test_a_failing_test_outside_the_plan_fails_the_report_and_its_printed_line_reproduces_it(tmp_path) -> None:
    tree = tmp_path / "suites"
    (tree / "selftest").mkdir(parents=True)
    (tree / "selftest" / "test_plain.py").write_text(PLAIN_TEST)
    (tree / "selftest" / "test_fits.py").write_text(FAILING_TEST.replace("<= 4096", "<= 10**9"))  # rows pass
    out = tmp_path / "results" / "r0"
    assert cli.main(["run", "cpu", "selftest", "--host", "--suites-dir", str(tree), "--out", str(out)]) == 1
    done = subprocess.run([sys.executable, "-m", "ci", "report", str(tmp_path / "results"), "--out",
                           str(tmp_path / "report")], cwd=REPO, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "1 testcase outside the plan (1 failed or errored)" in done.stdout
    doc = json.loads((tmp_path / "report" / "report.json").read_text())
    (plain,) = [c for c in doc["unkeyed"] if c["test"].endswith("test_plain_check")]
    line = plain["repro_command"]
    assert line and "selftest/test_plain.py::test_plain_check" in line
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    # the line runs from the folder the report was made in (here the checkout): its paths below it say "$PWD"
    import shutil

    shutil.rmtree(REPO / "out" / "repro" / "test-test_plain_check", ignore_errors=True)  # no earlier run's file
    subprocess.run(["bash", "-c", line], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert not (out / "repro-test-test_plain_check").exists()  # never beside the run it re-runs
    (again,) = (REPO / "out" / "repro" / "test-test_plain_check").glob("junit-repro-*.xml")
    text = again.read_text()
    assert "test_plain_check" in text and "arithmetic is off" in text and "<failure" in text
    assert "test_context_fits" not in text  # that one test, not the suite
    assert "test_plain.py::test_plain_check" in (tmp_path / "report" / "report.md").read_text().replace("\\", "")


def test_ci_repro_takes_a_test_id_from_a_rows_json(tmp_path, capsys) -> None:
    tree = tmp_path / "suites"
    (tree / "selftest").mkdir(parents=True)
    (tree / "selftest" / "test_plain.py").write_text(PLAIN_TEST)
    out = tmp_path / "r0"
    cli.main(["run", "cpu", "selftest", "--host", "--suites-dir", str(tree), "--out", str(out)])
    capsys.readouterr()
    assert cli.main(["repro", "selftest/test_plain.py::test_plain_check", "--rows-json", str(out / "rows.json")]) == 0
    said = capsys.readouterr().out
    assert "# docker" in said and "selftest/test_plain.py::test_plain_check" in said and "--stackgate-row" not in said
    assert cli.main(["repro", "selftest/../x.py::t", "--rows-json", str(out / "rows.json")]) == 2


def test_the_report_names_no_path_of_the_machine_and_its_line_works_from_a_copy(tmp_path) -> None:
    """Made from a folder (a checkout, a build's downloaded artifacts), the report writes every path relative to it:
    the re-run line says "$PWD", and pasted in a copy of that folder elsewhere, it re-runs the test there."""
    made = tmp_path / "made"
    tree = made / "suites"
    (tree / "selftest").mkdir(parents=True)
    (tree / "selftest" / "test_plain.py").write_text(PLAIN_TEST)
    (tree / "selftest" / "test_fits.py").write_text(FAILING_TEST)  # two rows fail
    assert cli.main(["run", "cpu", "selftest", "--host", "--suites-dir", str(tree), "--out",
                     str(made / "results" / "r0")]) == 1  # fmt: skip
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "ci", "report", "results", "--out", "report"], cwd=made, env=env,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 1, done.stderr
    for name in ("report.md", "report.html", "report.json"):
        assert str(tmp_path) not in (made / "report" / name).read_text(), name
    doc = json.loads((made / "report" / "report.json").read_text())
    assert doc["generator"]["argv"] == ["report", "results", "--out", "report"]
    failing = [r for r in doc["rows"] if r["status"] == "failure"]
    assert failing and all(r["repro"].endswith("--rows-json results/r0/rows.json") for r in failing)
    assert all('"$PWD"/results/r0/' in r["repro_command"] for r in failing)
    html = (made / "report" / "report.html").read_text()
    assert 'href="../results/r0/logs/' in html  # the failing rows' logs, beside their JUnit
    assert "full log: logs/" in (made / "results" / "r0" / "junit-cpu-selftest-0.xml").read_text()

    moved = tmp_path / "elsewhere"
    made.rename(moved)
    (plain,) = [c for c in doc["unkeyed"] if c["test"].endswith("test_plain_check")]
    subprocess.run(["bash", "-c", plain["repro_command"]], cwd=moved, env=env, capture_output=True, timeout=300)
    (again,) = (moved / "out" / "repro" / "test-test_plain_check").glob("junit-repro-*.xml")
    assert "arithmetic is off" in again.read_text()
