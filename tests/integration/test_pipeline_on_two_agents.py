"""The pipeline on two agents, with real parts: a registry (Debian's docker-registry, on loopback) and a second docker
engine that has never seen the image (its own data root: no image, no build cache). The first agent runs the build
step (build, verify, push, record the digest) and a run step; the second runs the same run step, which pulls the
recorded digest and builds nothing. Both agents give the same verdict per row."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from junitparser.xunit2 import JUnitXml
from support.buildkite import check_schema, run_step, stand_in_agent
from support.paths import REPO

pytestmark = pytest.mark.docker


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(what: str, ready, log: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.2)
    pytest.fail(f"{what} did not start; its log:\n{log.read_text()[-2000:]}")


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[str]:
    """Debian's docker-registry (the distribution registry, v2 API) on a loopback port: an engine pushes to and pulls
    from 127.0.0.1 over plain HTTP without any setting."""
    binary = shutil.which("docker-registry")
    if binary is None:
        if os.environ.get("STACKGATE_REQUIRE_REGISTRY") == "1":
            pytest.fail("docker-registry is not installed: apt-get install docker-registry")
        pytest.skip("docker-registry is not installed (apt-get install docker-registry)")
    port = _free_port()
    config = tmp_path / "registry.yml"
    config.write_text(yaml.safe_dump({"version": 0.1, "log": {"level": "warn"},
                                      "storage": {"filesystem": {"rootdirectory": str(tmp_path / "blobs")}},
                                      "http": {"addr": f"127.0.0.1:{port}"}}))  # fmt: skip
    log = tmp_path / "registry.log"
    with log.open("w") as out:
        proc = subprocess.Popen([binary, "serve", str(config)], stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait("docker-registry", lambda: _answers(port), log)
        yield f"127.0.0.1:{port}/stackgate"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture
def second_engine(tmp_path_factory: pytest.TempPathFactory, docker_client) -> Iterator[str]:
    """A docker engine of its own (data root, exec root, socket): what an agent that never built the image has."""
    root = tmp_path_factory.mktemp("agent2-engine")
    sock = root / "docker.sock"
    log = root / "dockerd.log"
    # A bridge of its own: with --bridge=none a daemon deletes the host's docker0 (moby's removeDefaultBridgeInterface),
    # which the first engine's containers need.
    bridge = f"sg-agent2-{os.getpid() % 100000}"
    subprocess.run(["ip", "link", "add", bridge, "type", "bridge"], check=True)
    subprocess.run(["ip", "addr", "add", "172.31.251.1/24", "dev", bridge], check=True)
    subprocess.run(["ip", "link", "set", bridge, "up"], check=True)
    argv = [
        "dockerd",
        "--data-root",
        str(root / "data"),
        "--exec-root",
        str(root / "exec"),
        "--pidfile",
        str(root / "pid"),
        "--host",
        f"unix://{sock}",
        "--iptables=false",
        "--ip-masq=false",
        "--bridge",
        bridge,
    ]
    with log.open("w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    host = f"unix://{sock}"
    env = {**os.environ, "DOCKER_HOST": host}
    ok = lambda: subprocess.run(["docker", "info"], env=env, capture_output=True).returncode == 0  # noqa: E731
    try:
        _wait("a second dockerd", ok, log)
        yield host
    finally:
        subprocess.run(["docker", "system", "prune", "-af"], env=env, capture_output=True)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        subprocess.run(["ip", "link", "del", bridge], check=False)
        shutil.rmtree(root, ignore_errors=True)


def _verdicts(folder: Path) -> dict[str, str]:
    out = {}
    for junit in folder.glob("junit-*.xml"):
        for case in (c for s in JUnitXml.fromfile(str(junit)) for c in s):
            row = next((p.value for p in case.properties() if p.name == "stackgate.row"), case.name)
            out[row] = type(case.result[0]).__name__.lower() if case.result else "pass"
    return out


def _engine(host: str | None, *args: str) -> str:
    env = {**os.environ, **({"DOCKER_HOST": host} if host else {})}
    return subprocess.run(["docker", *args], env=env, capture_output=True, text=True, check=True).stdout


def test_a_run_step_on_a_second_agent_pulls_the_pushed_digest_and_builds_nothing(
    tmp_path: Path, registry: str, second_engine: str
) -> None:
    made = subprocess.run([sys.executable, "-m", "ci", "pipeline", "--target", "cpu", "--suite", "selftest"],
                          cwd=REPO, capture_output=True, text=True, check=False,
                          env={**os.environ, "STACKGATE_REGISTRY": registry})  # fmt: skip
    assert made.returncode == 0, made.stderr
    (tmp_path / "pipeline.yml").write_text(made.stdout)
    check_schema(tmp_path / "pipeline.yml")
    by_key = {s.get("key"): s for s in yaml.safe_load(made.stdout)["steps"]}
    build, run = by_key["build-cpu"], by_key["run-cpu-selftest-0"]
    assert not any("nox -s build" in c or " ci build" in c for c in run["commands"])  # a run step never builds

    store = tmp_path / "store"
    store.mkdir()
    first, env1 = stand_in_agent(tmp_path / "agent1", store)
    env1["HOME"] = os.environ.get("HOME", str(tmp_path))  # the building agent keeps its caches (wheels, bases)
    assert run_step(build, first, env1, store, tmp_path / "build.log") == 0, (tmp_path / "build.log").read_text()
    ref = json.loads((store / "meta-data.json").read_text())["stackgate-image-cpu"]
    assert ref.startswith(f"{registry}/cpu@sha256:") and (store / "stackgate-image-cpu.ref").read_text().strip() == ref
    assert run_step(run, first, env1, store, tmp_path / "run1.log") == 0, (tmp_path / "run1.log").read_text()
    on_first = _verdicts(first / "results" / "cpu-selftest-0")

    second, env2 = stand_in_agent(tmp_path / "agent2", store)
    env2["DOCKER_HOST"] = second_engine
    assert _engine(second_engine, "images", "-q") == ""  # nothing there before the step
    log = tmp_path / "run2.log"
    assert run_step(run, second, env2, store, log) == 0, log.read_text()
    said = log.read_text()
    assert f"pulled {ref}" in said
    assert not any(w in said for w in ("load build definition", "Step 1/", "exporting layers", "naming to"))
    images = json.loads(_engine(second_engine, "image", "inspect", ref))
    assert [img["RepoDigests"] for img in images] == [[ref]]
    assert "Build Cache     0" in _engine(second_engine, "system", "df")  # nothing was built on the second agent
    on_second = _verdicts(second / "results" / "cpu-selftest-0")
    assert on_second == on_first and len(on_second) == 5  # 4 rows and the harness's own test
    rows_json = json.loads((second / "results" / "cpu-selftest-0" / "rows.json").read_text())
    assert rows_json["image"]["digest"] == ref.split("@", 1)[1]  # the rows record the image they ran in, by digest
    assert (
        subprocess.run(["ip", "link", "show", "docker0"], capture_output=True).returncode == 0
    )  # the host's bridge stays


def test_a_recorded_digest_the_registry_lacks_fails_the_run_step_naming_it(
    tmp_path: Path, registry: str, second_engine: str
) -> None:
    argv = [sys.executable, "-m", "ci", "pipeline", "--target", "cpu", "--suite", "selftest", "--registry", registry]
    made = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=True)
    run = next(s for s in yaml.safe_load(made.stdout)["steps"] if s.get("key") == "run-cpu-selftest-0")
    store = tmp_path / "store"
    store.mkdir()
    missing = f"{registry}/cpu@sha256:{'0' * 64}"
    work, env = stand_in_agent(tmp_path / "agent", store)
    env["DOCKER_HOST"] = second_engine
    log = tmp_path / "run.log"
    assert run_step(run, work, env, store, log) == 4  # no meta-data recorded: the build step's image is unknown
    assert "the build step recorded no image for cpu (meta-data stackgate-image-cpu)" in log.read_text()
    (store / "meta-data.json").write_text(json.dumps({"stackgate-image-cpu": missing}))
    assert run_step(run, work, env, store, log) == 4
    assert f"cannot pull {missing}" in log.read_text() and "manifest unknown" in log.read_text()
    assert not (work / "results" / "cpu-selftest-0" / "junit-cpu-selftest-0.xml").exists()
