"""A registry location is never echoed with its password, and a pinned reference is checked whole."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile

import pytest
from support.paths import REPO
from test_pipeline_on_two_agents import registry  # noqa: F401 (a fixture)

SECRET = "hunter2-s3cret"
DIGEST = "sha256:" + "ab" * 32


def _ci(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    given = env or {}
    full = {**{k: v for k, v in os.environ.items() if k != "STACKGATE_REGISTRY"}, "PYTHONPATH": str(REPO), **given}
    return subprocess.run([sys.executable, "-m", "ci", *args], cwd=REPO, env=full, capture_output=True, text=True)


@pytest.mark.parametrize(
    "url",
    [
        f"https://stackgate:{SECRET}@registry.lan:5000/ci",
        f"stackgate:{SECRET}@registry.lan/ci",
        f"https://stackgate:{SECRET}/x@registry.lan/ci",  # a password holding '/': still all before the last '@'
        f"https://stackgate:{SECRET}@registry.lan/ci\x01",  # a control character: refused before it is checked
    ],
    ids=["url", "bare-userinfo", "slash-in-password", "control-character"],
)
@pytest.mark.parametrize("how", ["env", "flag"])
@pytest.mark.parametrize("verb", ["pipeline", "push"])
def test_a_registry_with_a_password_is_refused_and_the_password_never_printed(url: str, how: str, verb: str) -> None:
    argv = ["pipeline", "--target", "cpu", "--suite", "selftest"] if verb == "pipeline" else ["push", "cpu"]
    done = _ci(*argv, "--registry", url) if how == "flag" else _ci(*argv, env={"STACKGATE_REGISTRY": url})
    assert done.returncode == 2, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert SECRET not in said and "Traceback" not in said
    assert "***@" in said


def test_a_registry_url_without_a_password_names_the_form_to_give() -> None:
    done = _ci("push", "cpu", "--registry", "https://registry.lan:5000/ci")
    assert done.returncode == 2
    assert "is a URL" in done.stderr and "registry.lan:5000/ci" in done.stderr


def test_a_pinned_reference_ending_in_a_newline_is_refused_before_any_pull() -> None:
    done = _ci("pull", f"127.0.0.1:1/stackgate/cpu@{DIGEST}\n", env={"PATH": "/nonexistent"})  # no docker to ask
    assert done.returncode == 2, done.stderr
    assert "is not an image pinned by digest" in done.stderr


def test_a_pinned_reference_with_a_password_is_refused_without_printing_it() -> None:
    done = _ci("pull", f"user:{SECRET}@registry.lan/cpu@{DIGEST}")
    assert done.returncode == 2 and SECRET not in done.stdout + done.stderr


@pytest.mark.docker
def test_repo_tag_at_digest_pulls_the_digest_and_is_accepted(registry: str, docker_client) -> None:  # noqa: F811
    """The engine pulls REPO:TAG@DIGEST by its digest and lists it as REPO@DIGEST: the registry served the right image,
    and `ci pull` says so instead of blaming it."""
    repo = f"{registry}/hostile-pull-{os.getpid()}"
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        info = tarfile.TarInfo("marker")
        data = f"{repo}\n".encode()
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    docker, digest = ["docker"], ""
    subprocess.run([*docker, "import", "-", f"{repo}:one"], input=layer.getvalue(), check=True, capture_output=True)
    try:
        pushed = subprocess.run([*docker, "push", f"{repo}:one"], capture_output=True, text=True, check=True).stdout
        digest = next(w for w in pushed.split() if w.startswith("sha256:"))
        subprocess.run([*docker, "image", "rm", f"{repo}:one"], check=True, capture_output=True)
        done = _ci("pull", f"{repo}:one@{digest}")
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"pulled {repo}:one@{digest}" in done.stdout
    finally:
        subprocess.run([*docker, "image", "rm", "-f", f"{repo}:one", f"{repo}@{digest}"], capture_output=True)
