"""`python -m ci run` in a real container: the same faults, the same statuses; files stay the user's.

The faults need no Triton: these tests build a small image FROM the local dev base with pytest and
junitparser installed from wheels, offline, with suites/ copied last as the real image does. The cpu
self-test runs in the real cpu image (tests/integration/test_cpu_image_build.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from junitparser.xunit2 import JUnitXml
from support import faults
from support.paths import REPO

from ci import cli

pytestmark = pytest.mark.docker

WHEELS_ENV = "STACKGATE_TEST_WHEELS"  # a folder of py3.11 wheels for pytest and junitparser
DOCKERFILE = """\
FROM {base}
COPY wheels /tmp/wheels
RUN python3 -m venv /opt/stackgate/venv \\
 && /opt/stackgate/venv/bin/pip install --no-index --find-links /tmp/wheels pytest junitparser \\
 && rm -rf /tmp/wheels
ENV PATH=/opt/stackgate/venv/bin:$PATH
COPY suites /opt/stackgate/suites
# every process loads the sentinel, as in the real images (containers/*/Dockerfile): a hung row's processes dump
RUN site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') \\
 && cp /opt/stackgate/suites/harness/jit_sentinel.py "$site/stackgate_jit_sentinel.py" \\
 && echo 'import stackgate_jit_sentinel; stackgate_jit_sentinel.install()' > "$site/stackgate_jit_sentinel.pth"
"""


def _wheels(dest: Path) -> Path:
    given = os.environ.get(WHEELS_ENV)
    if given:
        shutil.copytree(given, dest)
        return dest
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--only-binary", ":all:", "--python-version", "3.11",
           "--platform", "manylinux2014_x86_64", "-d", str(dest), "pytest", "junitparser"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        pytest.skip(f"no wheels for the test image (set ${WHEELS_ENV}): {done.stderr.strip()[-300:]}")
    return dest


@pytest.fixture(scope="session")
def test_image(tmp_path_factory: pytest.TempPathFactory, docker_client) -> Iterator[str]:
    from ci import engine as docker_cli
    from ci.images.debian import bootstrap
    from ci.stack import loader as stack

    client = docker_client
    # the cpu target's offline base (bootstrapped from its Debian lock), the same one `ci build cpu` uses
    base = bootstrap.ensure(stack.load().targets["cpu"], docker_cli.find(), REPO).name
    dockerfile = DOCKERFILE.format(base=base)
    ctx = tmp_path_factory.mktemp("image")
    _wheels(ctx / "wheels")
    shutil.copytree(REPO / "suites", ctx / "suites", ignore=shutil.ignore_patterns("__pycache__"))
    (ctx / "Dockerfile").write_text(dockerfile)
    digest = hashlib.sha256(dockerfile.encode())
    for p in sorted(f for f in ctx.rglob("*") if f.is_file()):  # the tag follows the content, not the temp path
        digest.update(str(p.relative_to(ctx)).encode() + p.read_bytes())
    # the tag follows the content; its suffix is this session's, so a test session running beside this one
    # (another checkout on the same engine) never removes the image this one uses
    tag = f"stackgate-run-test:{digest.hexdigest()[:12]}-{os.getpid()}"
    client.images.build(path=str(ctx), tag=tag, network_mode="none", rm=True, forcerm=True)
    yield tag
    if not os.environ.get("STACKGATE_KEEP_TEST_IMAGE"):
        client.images.remove(tag, force=True)


def test_every_fault_is_recorded_in_docker(tmp_path: Path, test_image: str) -> None:
    tree = faults.write_tree(tmp_path / "suites")
    out = tmp_path / "out"
    argv = ["run", "cpu", "faults", "--image", test_image, "--suites-dir", str(tree)]
    rc = cli.main([*argv, "--timeout", str(faults.TIMEOUT_S), "--out", str(out)])
    assert rc == 1
    faults.check(out / "junit-cpu-faults-0.xml")
    # root in the container wrote them for the user who owns the results folder
    assert {p.stat().st_uid for p in out.rglob("*")} == {os.getuid()}


def test_sigterm_in_docker_stops_the_row_and_the_container(tmp_path: Path, test_image: str, docker_client) -> None:
    """The signal reaches the harness (the container's first process): the row in flight is an error, the
    JUnit is whole, `ci run` exits 143 and no container is left."""
    tree = tmp_path / "suites"
    (tree / "hostile").mkdir(parents=True)
    (tree / "hostile" / "test_hostile.py").write_text(
        "import subprocess, time\n\ndef test_1():\n    pass\n\n"
        "def test_2():\n    subprocess.Popen(['setsid', 'sleep', '600'])\n    time.sleep(600)\n"
    )
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "ci", "run", "cpu", "hostile", "--image", test_image, "--suites-dir", str(tree),
           "--out", str(out)]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    junit = out / "junit-cpu-hostile-0.xml"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (junit.exists() and "test_1" in junit.read_text()):
        time.sleep(0.2)
    time.sleep(1.0)  # test_2 is under way
    mine = {"volume": str(out.resolve())}  # this run's container (the results folder is mounted), not another run's
    assert docker_client.containers.list(all=True, filters=mine)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 143, proc.stdout.read() if proc.stdout else ""
    cases = {c.name: c for s in JUnitXml.fromfile(str(junit)) for c in s}
    assert not cases["test_1"].result
    assert "interrupted by SIGTERM" in cases["test_2"].result[0].message
    assert not docker_client.containers.list(all=True, filters=mine)


def test_a_process_escaped_with_setsid_fails_its_row_in_docker(tmp_path: Path, test_image: str) -> None:
    tree = tmp_path / "suites"
    (tree / "hostile").mkdir(parents=True)
    (tree / "hostile" / "test_hostile.py").write_text(
        "import subprocess\n\ndef test_escapes():\n    subprocess.Popen(['setsid', 'sleep', '600'])\n\n"
        "def test_after():\n    pass\n"
    )
    rc = cli.main(
        ["run", "cpu", "hostile", "--image", test_image, "--suites-dir", str(tree), "--out", str(tmp_path / "o")]
    )
    assert rc == 1
    cases = {c.name: c for s in JUnitXml.fromfile(str(tmp_path / "o" / "junit-cpu-hostile-0.xml")) for c in s}
    assert "left 1 process(es) running after the test, killed: sleep" in cases["test_escapes"].result[0].message
    assert not cases["test_after"].result


def test_a_failing_row_reproduces_from_the_report_alone(tmp_path: Path, test_image: str, docker_client) -> None:
    """The run's report names the row and its image by content, and `ci repro --report` makes the line again from
    them and the stack: running that line fails the row again, with the same message."""
    import json
    import shlex

    from support.selftest_trees import failing_tree

    tree = failing_tree(tmp_path / "suites")
    argv = ["run", "cpu", "selftest", "--image", test_image, "--suites-dir", str(tree)]
    assert cli.main([*argv, "--out", str(tmp_path / "results" / "cpu-selftest-0")]) == 1
    assert cli.main(["report", str(tmp_path / "results"), "--out", str(tmp_path / "report")]) == 1  # failing rows
    report = tmp_path / "report" / "report.json"
    row = next(r for r in json.loads(report.read_text())["rows"] if r["status"] == "failure")

    # from the folder holding report/report.json, the default --report
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # the run mounted its own suites tree: the person names it here (a report never chooses a host path to mount)
    cmd = [sys.executable, "-m", "ci", "repro", row["id"], "--suites-dir", str(tree), "--print"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip()
    assert "\n" not in line and line.startswith("docker run ")
    image_id = docker_client.images.get(test_image).id
    assert image_id.startswith("sha256:") and image_id in shlex.split(line)  # never pushed: the local image id
    assert f"test_context_fits[{row['id']}]" in line

    again = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=300, check=False)
    assert again.returncode == 1, again.stdout[-2000:] + again.stderr[-2000:]
    junit = tmp_path / "out" / "repro" / row["id"] / f"junit-repro-{row['id']}.xml"  # under the folder it ran in
    cases = [c for s in JUnitXml.fromfile(str(junit)) for c in s]
    assert [c.name for c in cases] == [f"test_context_fits[{row['id']}]"]
    assert cases[0].result[0].message.splitlines()[0] == row["message"].splitlines()[0]
    # and `ci repro` runs the line itself without --print, exiting with its status
    rerun = subprocess.run([*cmd[:-1], "--report", str(report)], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=300, check=False)  # fmt: skip
    assert rerun.returncode == 1 and rerun.stdout.startswith(line), rerun.stderr[-2000:]


def test_a_bake_of_an_earlier_build_is_not_run(test_image: str, docker_client, capsys) -> None:
    """`ci run` takes the baked image only while it was baked from the current build: an agent that built a
    newer image since its last bake runs the new build, unbaked, and says so."""
    from dataclasses import replace

    from ci.images import build
    from ci.images.baked_layer import BAKED_FROM
    from ci.stack import loader

    target = replace(loader.load().targets["cpu"], id=f"bakecheck-{os.getpid()}")
    name = build.image_name(target)
    img = docker_client.images.get(test_image)
    img.tag(name, "latest")

    def commit(tag: str, labels: dict[str, str]) -> None:
        box = docker_client.containers.create(img.id, ["true"], network_mode="none")
        try:
            box.commit(repository=name, tag=tag, conf={"Labels": labels})
        finally:
            box.remove(force=True)

    try:
        commit("baked", {**(img.labels or {}), BAKED_FROM: img.id})
        assert build.image_ref(target) == f"{name}:baked"
        commit("latest", {"stackgate.test": "a newer build"})
        assert build.image_ref(target) == f"{name}:latest"
        assert f"{name}:baked was baked from another build" in capsys.readouterr().err
    finally:
        for tag in ("latest", "baked"):
            docker_client.images.remove(f"{name}:{tag}", force=True)


def test_scheduled_rows_each_run_in_their_own_container(tmp_path: Path, test_image: str, docker_client) -> None:
    """The scheduler in docker mode (the default on a GPU host). With --isolate, one container per row, each writing
    its own JUnit into the mounted results folder; two stand-in devices of two rows each, so the rows run side by
    side. By default the four rows (one model and change) are one job: one container, one shared child process,
    one JUnit holding the four rows, each row's own log."""
    tree = tmp_path / "suites"
    (tree / "selftest").mkdir(parents=True)
    (tree / "selftest" / "test_rows.py").write_text(
        "import os\nimport pytest\n\n@pytest.mark.track('harness-selftest')\n"
        "def test_row(row, record_property):\n    record_property('pid', str(os.getpid()))\n"
    )
    out = tmp_path / "out"
    argv = ["run", "cpu", "selftest", "--image", test_image, "--suites-dir", str(tree), "--gpus", "a,b",
            "--gpu-memory", "36", "--out", str(out)]  # fmt: skip
    assert cli.main([*argv, "--isolate"]) == 0
    files = sorted(out.glob("junit-cpu-selftest-0.*.xml"))
    assert len(files) == 4 and all("<failure" not in f.read_text() for f in files)
    assert {p.stat().st_uid for p in out.rglob("*")} == {os.getuid()}
    assert not docker_client.containers.list(all=True, filters={"volume": str(out.resolve())})
    assert cli.main(argv) == 0
    (shared,) = out.glob("junit-cpu-selftest-0.*.xml")
    from ci.run.schedule import dispatch

    assert sorted(dispatch.row_outcomes(shared).values()) == ["pass"] * 4
    assert len(set(re.findall(r'name="pid" value="(\d+)"', shared.read_text()))) == 1
    assert len([p for p in (out / "logs").glob("selftest_test_rows.py*.log")]) == 4
    assert {p.stat().st_uid for p in out.rglob("*")} == {os.getuid()}


def _dead_harness_run(tmp_path: Path, image: str, body: str) -> tuple[int, Path]:
    from support.selftest_trees import ROWS

    tree = tmp_path / "suites" / "selftest"
    tree.mkdir(parents=True)
    (tree / "test_rows.py").write_text(f"ROWS = {ROWS!r}\n" + body)
    out = tmp_path / "out"
    argv = ["run", "cpu", "selftest", "--image", image, "--suites-dir", str(tmp_path / "suites"), "--out", str(out)]
    return cli.main(argv), out


def test_a_torn_jit_log_line_in_docker_is_an_unreadable_compile_and_the_run_goes_on(
    tmp_path: Path, test_image: str, capsys
) -> None:
    from support.selftest_trees import ROWS, TORN_LOG, rows_in

    rc, out = _dead_harness_run(tmp_path, test_image, TORN_LOG)
    junit = out / "junit-cpu-selftest-0.xml"
    assert "INTERNALERROR" not in capsys.readouterr().out
    assert sorted(rows_in(junit)) == sorted(ROWS)
    assert "1 unreadable JIT-log line(s)" in junit.read_text()  # that row errors; the run goes on
    assert rc == 1


def test_a_junit_that_cannot_be_written_in_docker_is_a_run_error_with_the_rest_not_run(
    tmp_path: Path, test_image: str, capsys
) -> None:
    from support.selftest_trees import CANNOT_WRITE_JUNIT, ROWS

    rc, out = _dead_harness_run(tmp_path, test_image, CANNOT_WRITE_JUNIT)
    err = capsys.readouterr().err
    assert rc == 4, err
    assert "unreadable JUnit" in err and "Traceback" not in err
    # the file the results were in is gone (its path is a folder now): every row is accounted for as not run
    assert json.loads((out / "not-run.json").read_text())["rows"] == ROWS


KILLED_FROM_OUTSIDE = """
import os, time
import pytest


@pytest.mark.track("harness-selftest")
def test_row(row):
    if row.id == ROWS[1]:  # the second row says it started, then waits for the container to be killed
        open(os.path.join(os.path.dirname(os.environ["STACKGATE_ROWS"]), "second-row-started"), "w").close()
        time.sleep(600)
"""


def test_a_container_killed_mid_run_is_a_run_error_and_the_rows_it_never_finished_are_not_run(
    tmp_path: Path, test_image: str, docker_client
) -> None:
    """The OOM killer's way in docker: the container's first process (the harness) is killed from outside."""
    from support.selftest_trees import ROWS, rows_in

    tree = tmp_path / "suites" / "selftest"
    tree.mkdir(parents=True)
    (tree / "test_rows.py").write_text(f"ROWS = {ROWS!r}\n" + KILLED_FROM_OUTSIDE)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "ci", "run", "cpu", "selftest", "--image", test_image, "--suites-dir",
           str(tmp_path / "suites"), "--out", str(out)]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (out / "second-row-started").exists():
        time.sleep(0.2)
    (container,) = docker_client.containers.list(filters={"volume": str(out.resolve())})
    container.kill(signal="SIGKILL")
    text = proc.communicate(timeout=120)[0]
    assert proc.returncode == 4, text
    assert "before it ran 3 of the 4 rows" in text
    assert rows_in(out / "junit-cpu-selftest-0.xml") == ROWS[:1]
    assert json.loads((out / "not-run.json").read_text())["rows"] == ROWS[1:]
