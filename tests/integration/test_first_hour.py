"""The first hour of a user without the hardware: a target's nox session on a host that cannot run its rows exits 6
(nothing could run here) with a report, and the fix it prints is the command that makes them run: on a host of the
target, the lock first where the target has none. The same with the docker engine present and absent."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys

import pytest
from support.paths import REPO

from ci import engine
from ci.run import host
from ci.stack import loader

SESSIONS = {  # session -> (target, suite, the fix printed)
    "sm121a_spec_decode": ("cuda-sm121a", "spec_decode", "nox -s sm121a_spec_decode   (on a host with a GB10"),
    "rocm_sparse_mla": (
        "rocm-gfx1151",
        "sparse_mla",
        "python -m ci lock rocm-gfx1151   (on a host that reaches its package index), then nox -s rocm_sparse_mla   "
        "(on a host with a Strix Halo",
    ),
    "sm90_sparse_mla": ("cuda-sm90", "sparse_mla", "nox -s sm90_sparse_mla   (on a host with an H200"),
}


@functools.cache
def _sessions() -> dict:
    """The noxfile's sessions, registered once."""
    pytest.importorskip("nox")
    from nox import registry

    spec = importlib.util.spec_from_file_location("noxfile", REPO / "noxfile.py")
    assert spec and spec.loader
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    return dict(registry.get())


def _session_argv(name: str) -> list[str]:
    """What the nox session runs: its `python -m ci` arguments, read from the noxfile's own session."""
    found = _sessions()
    ran: list[tuple[str, ...]] = []

    class Session:
        posargs: tuple[str, ...] = ()

        def install(self, *args: str, **kw: object) -> None:
            pass

        def run(self, *args: str) -> None:
            ran.append(args)

    found[name].func(Session())
    (argv,) = ran
    assert argv[:3] == ("python", "-m", "ci")
    return list(argv[3:])


@pytest.mark.parametrize("engine_state", ["present", "absent"])
@pytest.mark.parametrize("session", list(SESSIONS))
def test_a_session_without_the_hardware_exits_6_with_a_report_and_the_fix(session, engine_state, tmp_path, stack_copy):
    """A new user's first session: no fork configured (the stack's fork.yaml names a checkout they do not have)."""
    target, suite, fix = SESSIONS[session]
    t = loader.load().targets[target]
    if host.has(t.detect.nvidia_compute_capability, t.detect.amdgpu_gfx):
        pytest.skip(f"this host has the {t.short}")
    env = {**os.environ, "PYTHONPATH": str(REPO), "STACKGATE_STACK": str(stack_copy)}
    if engine_state == "absent":
        env["DOCKER_HOST"] = f"unix://{tmp_path}/no-engine.sock"
    elif engine.unreachable():
        if os.environ.get("STACKGATE_REQUIRE_DOCKER") == "1":
            pytest.fail("STACKGATE_REQUIRE_DOCKER=1 and no docker engine answers")
        pytest.skip("no docker engine answers here")
    argv = _session_argv(session)
    assert argv[:5] == ["main", "--target", target, "--suite", suite]
    out = tmp_path / "out"
    argv[argv.index("--out") + 1] = str(out)
    done = subprocess.run([sys.executable, "-m", "ci", *argv], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 6, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"this host has no {t.name}" in done.stdout and fix in done.stdout
    assert "== python -m ci build" not in done.stdout  # rows that cannot run here are not built for
    not_run = json.loads((out / f"{target}-{suite}-0" / "not-run.json").read_text())
    assert fix in json.dumps(not_run)
    report = json.loads((out / "report" / "report.json").read_text())
    rows = [r for r in report["rows"] if r["target"] == target]
    assert rows and all(r["status"] == "not run" for r in rows)
    md = (out / "report" / "report.md").read_text()
    assert f"this host has no {t.name}" in md
