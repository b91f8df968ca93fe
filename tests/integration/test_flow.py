"""The user's commands from a clean clone: nox sessions generated from the stack, each the whole flow for
its target; rows that cannot run here are reported "not run" with the command that makes them possible."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import REPO

NO_ENGINE = {**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"}


def _sessions(env: dict[str, str]) -> dict[str, str]:
    argv = [sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-l", "--json", "-k", "not lint"]
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=True)
    return {s["session"]: s["description"] for s in json.loads(done.stdout)}


def test_run_sessions_come_from_the_stack_and_follow_a_new_target(stack_copy: Path) -> None:
    sessions = _sessions(os.environ)
    assert {"rocm_sparse_mla", "sm121a_spec_decode", "sm90_sparse_mla", "cpu_selftest"} <= set(sessions)
    assert sessions["cuda_spec_decode"] == "Alias of sm121a_spec_decode."  # the old names stay as aliases
    assert not any(name.startswith("cpu_s") and name != "cpu_selftest" for name in sessions)  # only suites with rows
    # A copy of the cpu target under another id and session name: its sessions appear, noxfile.py untouched.
    targets = stack_copy / "targets.yaml"
    cpu = targets.read_text().split("  - id: cpu\n", 1)[1]
    cpu = cpu.replace("fallback: true", "fallback: false")
    targets.write_text(targets.read_text() + "\n  - id: cpu-two\n    session: cpu2\n" + cpu)
    grown = _sessions({**os.environ, "STACKGATE_STACK": str(stack_copy)})
    assert set(grown) - set(sessions) == {"cpu2_selftest"}
    assert "selftest rows of cpu-two" in grown["cpu2_selftest"]


def test_main_without_an_engine_runs_the_selftest_on_this_host(tmp_path: Path) -> None:
    """What `.ci/run` does with the README's first command: no engine answers, so the flow says so in one
    line and runs the cpu self-test on this host's Python; every cpu row passes."""
    done = subprocess.run([sys.executable, "-m", "ci", "main", "--out", str(tmp_path)], cwd=REPO, env=NO_ENGINE,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "no docker engine answers" in done.stdout.splitlines()[0] and "(--host)" in done.stdout.splitlines()[0]
    doc = json.loads((tmp_path / "report" / "report.json").read_text())
    cpu = [r for r in doc["rows"] if r["target"] == "cpu"]
    assert len(cpu) == 4 and {r["status"] for r in cpu} == {"pass"}
    assert {r["runs"][0]["image_digest"] for r in cpu} == {"none"}  # ran on the host, and says so


@pytest.mark.docker
def test_rocm_sparse_mla_session_reports_not_run_naming_the_lock_command(docker_client, tmp_path: Path) -> None:
    """`nox -s rocm_sparse_mla` on this machine: the rocm lock is unresolved, so the image cannot be built;
    the rows are reported not run with the command that resolves the lock, under exit code 6."""
    argv = [sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", "rocm_sparse_mla", "--", "--out"]
    done = subprocess.run([*argv, str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=900)
    out = done.stdout + done.stderr
    assert "exit code 6" in out or "exited with exit code 6" in out, out[-3000:]
    assert "fix: python -m ci lock rocm-gfx1151" in out and "not found locally" not in out
    record = json.loads((tmp_path / "rocm-gfx1151-sparse_mla-0" / "not-run.json").read_text())
    doc = json.loads((tmp_path / "report" / "report.json").read_text())
    assert {r["id"] for r in doc["rows"]} == set(record["rows"]) and len(record["rows"]) == 6
    for row in doc["rows"]:
        assert row["status"] == "not run" and "fix: python -m ci lock rocm-gfx1151" in row["note"]
