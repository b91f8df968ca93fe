"""The cuda Dockerfile's fork layer built for real: the bundle of a small fork made by git (support/fork_site.py) laid
over a venv holding a stand-in base release."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import uuid

import pytest
from support.fork_site import make_base_site, stack_for_fork
from support.paths import REPO

from ci.fork import bundle, site, source
from ci.stack import loader


@pytest.mark.docker
def test_the_images_fork_layer_lays_the_bundle_over_the_venvs_vllm(stack_copy, fork_repo, tmp_path, docker_client):
    """The cuda Dockerfile's fork layer, as written there, built for real over a venv holding a stand-in base release:
    the image's tree is the fork build (its id equals the host build's), and without a bundle the layer is a no-op."""
    from ci import engine
    from ci.images import build as images
    from ci.images import fork_layer, source_build

    repo, ids = fork_repo
    st = loader.load(stack_for_fork(stack_copy, repo, ids))
    fork = source.open_fork(st)
    base_site = make_base_site(tmp_path)
    host = site.build(
        bundle.write(fork, bundle.overlay(fork, fork.commit), tmp_path / "b.tgz"), base_site, tmp_path / "s"
    )
    ctx = tmp_path / "ctx"
    root = REPO
    for rel in ("suites/harness/vllm_build.py", "containers/fork-layer.sh"):
        (ctx / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(root / rel, ctx / rel)
    shutil.copytree(base_site, ctx / "base-site")
    (ctx / fork_layer.FORK).mkdir()
    shutil.copy(tmp_path / "b.tgz", ctx / fork_layer.FORK / fork_layer.FORK_BUNDLE)
    cuda = (root / "containers" / "cuda" / "Dockerfile").read_text()
    layer = cuda[
        cuda.index('ARG FORK_BUNDLE=""') : cuda.index("/tmp/vllm_build.py\n", cuda.index('ARG FORK_BUNDLE=""')) + 19
    ]
    cli = engine.find()
    base = source_build.local_base(cli, images.host_platform())
    (ctx / "Dockerfile").write_text(
        f"FROM {base}\nRUN python3 -m venv /opt/venv\nENV PATH=/opt/venv/bin:$PATH\n"
        "COPY base-site/ /opt/venv/lib/python3.11/site-packages/\n" + layer + "\n"
    )
    tags = [f"stackgate-test-fork-layer:{uuid.uuid4().hex[:8]}" for _ in range(2)]
    try:
        for tag, bundle_name in zip(tags, (fork_layer.FORK_BUNDLE, ""), strict=True):
            argv = [
                cli.path,
                "build",
                "--network",
                "none",
                "-q",
                "-t",
                tag,
                "--build-arg",
                f"FORK_BUNDLE={bundle_name}",
            ]
            subprocess.run([*argv, str(ctx)], check=True, capture_output=True, env=cli.env())
        probe = "cat /opt/venv/lib/python3.11/site-packages/stackgate-vllm-build.json"
        made = json.loads(docker_client.containers.run(tags[0], ["sh", "-c", probe], remove=True, network_mode="none"))
        assert made["vllm_build"] == host["vllm_build"] and made["changes"] == ["46514", "46849", "48407"]
        stock = docker_client.containers.run(
            tags[1], ["sh", "-c", f"{probe} 2>&1 || echo none"], remove=True, network_mode="none"
        )
        assert stock.decode().strip().endswith("none")
    finally:
        for tag in tags:
            with contextlib.suppress(Exception):
                docker_client.images.remove(tag, force=True)
