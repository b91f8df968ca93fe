from __future__ import annotations

import importlib
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support import fork_site
from support.git_repos import Repo
from support.paths import REPO, SUITES

from ci.stack.loader import DEFAULT_STACK

UNIT = Path(__file__).resolve().parent / "unit"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """tests/unit runs without a docker engine (`nox -s unit`, in two minutes): a test there that asks for the
    engine belongs in tests/integration, and collecting it is an error that says so."""
    engine = [
        item.nodeid
        for item in items
        if item.path.is_relative_to(UNIT)
        and ("docker_client" in getattr(item, "fixturenames", ()) or item.get_closest_marker("docker"))
    ]
    if engine:
        raise pytest.UsageError(f"tests/unit needs no docker engine; move these to tests/integration: {engine}")


@pytest.fixture(autouse=True)
def _costs_store(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test its own store of measured costs (ci.run.schedule.costs), never the host's: a schedule reads it."""
    monkeypatch.setenv("STACKGATE_COSTS", str(tmp_path_factory.mktemp("costs") / "costs.json"))


@pytest.fixture(autouse=True)
def _no_fork_from_the_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fork a test judges is the one it names: never one the user's shell configured."""
    for name in ("STACKGATE_FORK", "STACKGATE_FORK_REF", "STACKGATE_UPSTREAM_REF"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def stack_copy(tmp_path: Path) -> Path:
    """A private copy of the real stack/ that a test may edit."""
    dest = tmp_path / "stack"
    shutil.copytree(DEFAULT_STACK, dest)
    return dest


@pytest.fixture
def fork_repo(tmp_path: Path) -> tuple[Repo, dict[str, str]]:
    """A small fork made by git (support/fork_site.py): the repository and the commit of each change it carries."""
    return fork_site.make_fork(tmp_path / "fork")


@pytest.fixture
def edit() -> Callable[[Path, str, str], None]:
    """Replace exactly one occurrence of `old` in a file (so a test fails loudly if the data moved)."""

    def _edit(path: Path, old: str, new: str) -> None:
        text = path.read_text()
        assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {path}"
        path.write_text(text.replace(old, new))

    return _edit


@pytest.fixture(scope="session")
def committed_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A committed copy of this checkout's tracked and unignored files, for builds that must not touch it."""
    import subprocess

    src = REPO
    root = tmp_path_factory.mktemp("repo")
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=src,
                           capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    for name in files:
        if (src / name).is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / name, root / name)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "copy"], check=True)
    return root


@pytest.fixture(scope="session")
def docker_client():
    """The docker engine's client. Tests that need it skip where none answers, unless
    STACKGATE_REQUIRE_DOCKER=1 (CI) turns that into a failure."""
    try:
        import docker

        client = docker.from_env()
        client.ping()
        return client
    except Exception as exc:
        if os.environ.get("STACKGATE_REQUIRE_DOCKER") == "1":
            pytest.fail(f"STACKGATE_REQUIRE_DOCKER=1 and no docker engine answers: {exc}")
        pytest.skip(f"no docker engine answers: {exc}")


@pytest.fixture
def engine_pkg(monkeypatch):
    """suites/engine imported afresh from the suites tree (as the images import it), for one test."""
    monkeypatch.syspath_prepend(str(SUITES))
    for name in [m for m in sys.modules if m == "engine" or m.startswith("engine.")]:
        monkeypatch.delitem(sys.modules, name)
    return importlib.import_module("engine")
