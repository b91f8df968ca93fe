"""The cpu image built for real (offline base, --network none) and checked through the docker engine.

Skipped only when no engine answers; with STACKGATE_REQUIRE_DOCKER=1 (set by .ci/run) that fails instead.
Builds happen in a copy of the repository so a test can edit suites/ without touching the checkout.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import time
import uuid
from pathlib import Path

import docker.errors
import pytest

from ci import engine as container
from ci.common.errors import BuildError
from ci.images import baked_layer, rebuild, verify, wheels
from ci.images import build as images
from ci.images.debian import debs
from ci.stack import loader as stack

pytestmark = pytest.mark.docker
TAG = f"stackgate/test-cpu:{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def client(docker_client):
    return docker_client


@pytest.fixture(scope="module")
def repo(committed_repo, client) -> Path:
    return committed_repo


@pytest.fixture(scope="module")
def target():
    return stack.load().targets["cpu"]


@pytest.fixture(scope="module")
def built(repo, target, client):
    created = []
    first = images.build(target, tag=TAG, root=repo)
    created.append(TAG)
    yield first, created
    for ref in created:
        with contextlib.suppress(Exception):
            client.images.remove(ref, force=True)


def test_labels_on_the_built_image(built, client, repo):
    first, _ = built
    labels = client.images.get(TAG).labels
    for key in images.LABELS:
        assert labels.get(key), key
    rev = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert labels["org.opencontainers.image.revision"] == rev
    assert labels["org.opencontainers.image.base.digest"].startswith("sha256:")
    assert labels["org.opencontainers.image.base.name"].endswith(labels["org.opencontainers.image.base.digest"][7:])
    assert labels["stackgate.target"] == "cpu"
    assert first.image_id == client.images.get(TAG).id
    # what went in: the wheels' lock, and the base's Debian lock, which the base itself carries too
    assert labels["stackgate.lock"] == "sha256:" + wheels.file_digest(repo / "containers" / "locks" / "cpu.txt")
    lock = debs.read(stack.load().targets["cpu"], repo)
    assert labels["stackgate.base_lock"] == lock.digest
    base = client.images.get(labels["org.opencontainers.image.base.digest"])
    assert base.labels["stackgate.base_lock"] == lock.digest


def test_second_build_is_fast_and_identical(built, repo, target):
    first, _ = built
    again = images.build(target, tag=TAG, root=repo)
    assert again.image_id == first.image_id
    assert again.seconds < 10, f"second build took {again.seconds:.1f} s"


def test_touching_suites_rebuilds_one_layer(built, repo, target, client):
    before = client.images.get(TAG).attrs["RootFS"]["Layers"]
    (repo / "suites" / "touched.txt").write_text(f"{time.time()}\n")
    try:
        images.build(target, tag=TAG, root=repo)
        after = client.images.get(TAG).attrs["RootFS"]["Layers"]
    finally:
        (repo / "suites" / "touched.txt").unlink()
    assert len(after) == len(before)
    assert after[:-1] == before[:-1] and after[-1] != before[-1]


def test_a_clean_rebuild_in_another_clone_is_the_same_image(built, repo, target, client, tmp_path, capsys):
    """`ci verify cpu --rebuild` from a fresh clone (other path, other file times): the base bootstrapped again from
    its lock and every step run again (--no-cache) give the image id the first build gave."""
    first, _ = built
    assert images.build(target, tag=TAG, root=repo).image_id == first.image_id  # undo what other tests tagged
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    time.sleep(1.1)  # every file of the clone is newer than the repository's
    # the clone's origin is the repository's path, not the repository's: nothing of it goes into the image
    assert rebuild.main(target, TAG, root=clone) == 0
    out = capsys.readouterr().out
    base = client.images.get(TAG).labels["org.opencontainers.image.base.digest"]
    assert re.search(rf"same +base +bootstrapped from cpu.debs.txt +{base}", out), out
    assert f"the same image {first.image_id}" in out
    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(rebuild.side_tag(TAG))  # the same image: the side tag is removed


def test_verify_rebuild_names_the_layer_a_non_deterministic_step_made(built, repo, target, client, tmp_path):
    nd = tmp_path / "nd"
    subprocess.run(["git", "clone", "-q", str(repo), str(nd)], check=True)
    dockerfile = nd / "containers" / "cpu" / "Dockerfile"
    anchor = "# AOT bake: only the files it reads"
    dockerfile.write_text(dockerfile.read_text().replace(anchor, f"RUN date +%s%N > /opt/stackgate/built-at\n{anchor}"))
    git = ["git", "-C", str(nd), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "commit", "-qam", "a build step that writes the time"], check=True)
    tag = f"{TAG}-nd"
    images.build(target, tag=tag, root=nd)
    try:
        with pytest.raises(BuildError) as exc:
            rebuild.main(target, tag, root=nd, base_again=False)  # the base's rebuild is the test above's
        assert re.search(
            r"layer 5 of 9 \(RUN date \+%s%N > /opt/stackgate/built-at\):\n +"
            r"opt/stackgate/built-at: content '\d+\\n' vs '\d+\\n'",
            exc.value.message,
        ), exc.value.message
        assert "layer 6" not in exc.value.message  # the steps above and after it write the same bytes
    finally:
        for ref in (tag, rebuild.side_tag(tag)):
            with contextlib.suppress(Exception):
                client.images.remove(ref, force=True)


def test_verify_rebuild_refuses_an_image_of_another_commit(built, capsys):
    from ci import cli

    # TAG was built from the test's copy of the repository (its own commit), the verb runs in this checkout
    assert cli.main(["verify", "cpu", "--rebuild", "--image", TAG]) == 3
    assert re.search(rf"image {TAG} was built from [0-9a-f]{{40}}, and this checkout is at", capsys.readouterr().err)


def test_verify_passes_and_lists_sm_121a(built, repo, capsys):
    assert verify.main(stack.load(), stack.load().targets["cpu"], TAG, root=repo) == 0
    out = capsys.readouterr().out
    assert "add_kernel.sm_121a.cubin" in out and "add_kernel.sm_90a.cubin" in out
    assert "amdgcn-amd-amdhsa--gfx1151" in out


def test_verify_fails_on_a_tag_only_base(built, repo, target, client):
    _, created = built
    from ci.images.debian import bootstrap

    tag = f"{TAG}-unpinned"
    base = bootstrap.lock_tag(target, debs.read(target, repo))
    images.build(target, base=base, allow_unpinned=True, tag=tag, root=repo)
    created.append(tag)
    with pytest.raises(BuildError, match=r"base pinned: localhost/stackgate-base-bookworm:lock-[\w-]+ \(no digest"):
        verify.main(stack.load(), stack.load().targets["cpu"], tag, root=repo)


def test_verify_fails_naming_a_missing_kernel(built, repo, client):
    _, created = built
    manifest = container.capture(TAG, ["cat", "/opt/stackgate/aot/manifest.json"]).stdout
    import json

    entry = next(
        e for e in json.loads(manifest)["entries"] if e["kernel"] == "add_kernel" and e["target"] == "cuda:121"
    )
    # the cache dir name is base32 of the hash: find it by the metadata inside
    found = container.capture(TAG, ["sh", "-c", f"grep -l {entry['hash']} $TRITON_CACHE_DIR/*/add_kernel.json"])
    key = found.stdout.split()[0]
    box = client.containers.create(TAG, ["rm", "-rf", str(Path(key).parent)], network_mode="none")
    try:
        box.start()
        assert box.wait()["StatusCode"] == 0
        tag = f"{TAG}-missing"
        box.commit(repository=tag.rsplit(":", 1)[0], tag=tag.rsplit(":", 1)[1])
        created.append(tag)
    finally:
        box.remove(force=True)
    with pytest.raises(BuildError, match=r"kernel baked: add_kernel \[cuda:121\] \(1/2 entries"):
        verify.main(stack.load(), stack.load().targets["cpu"], tag, root=repo)


UNLISTED = (
    '{kernels: [{name: relu_kernel, function: "harness.sample_kernels:relu_kernel",'
    ' signature: {x_ptr: "*fp32", out_ptr: "*fp32", n: i32}, constexprs: {BLOCK: 128}, specialisations: [{n: 7}]}]}'
)


def test_baked_kernels_compile_nothing_and_an_unlisted_one_is_recorded(built, client):
    import json

    script = (
        "python -m harness.aot run /opt/stackgate/kernels/selftest.yaml > /dev/null"
        " && echo baked=$(cat $STACKGATE_JIT_LOG 2>/dev/null | wc -l)"
        # a child of a child: the .pth sentinel must load in every process
        f' && python -c \'import subprocess, sys; subprocess.run([sys.executable, "-m", "harness.aot", "run",'
        f' sys.argv[1], "--targets", "cuda:121"], check=True, stdout=subprocess.DEVNULL)\' \'{UNLISTED}\''
        " && cat $STACKGATE_JIT_LOG"
    )
    ran = container.capture(TAG, ["sh", "-c", script])
    assert ran.code == 0, ran.stderr
    out = ran.stdout
    lines = out.strip().splitlines()
    assert lines[0] == "baked=0", out
    events = [json.loads(line) for line in lines[1:]]
    assert [(e["kernel"], e["target"], e["cache_hit"]) for e in events] == [("relu_kernel", "cuda:121", False)]
    assert {"pid", "kernel", "target", "hash", "cache_hit", "time_s", "wall", "row"} <= set(events[0])
    assert events[0]["function"] == "harness.sample_kernels:relu_kernel" and events[0]["num_warps"] == 4


def test_bake_commits_the_warm_run_as_one_layer(built, target, client, repo, tmp_path):
    _, created = built
    with pytest.raises(BuildError, match=r"no rows"):
        baked_layer.bake(target, TAG, tag=f"{TAG}-baked")  # the default warm-up needs the target's rows
    from ci.stack import plan, rows_json

    st = stack.load()
    rows = plan.build(st).select(targets=["cpu"]).rows
    doc = rows_json.document(st, target, "*", rows, image={"ref": TAG}, git_revision="x", timeout_s=60)
    rows_json.write(tmp_path / "rows.json", doc)
    default = baked_layer.bake(target, TAG, tag=f"{TAG}-default", rows=tmp_path / "rows.json")
    created.append(default.tag)
    assert "nothing to warm for suite selftest" in default.log  # the self-test's kernels were baked at build
    assert client.images.get(default.tag).attrs["Config"]["Env"] == client.images.get(TAG).attrs["Config"]["Env"]
    warm = ["python", "-m", "harness.aot", "run", UNLISTED, "--targets", "hip:gfx1151"]
    baked = baked_layer.bake(target, TAG, command=warm, tag=f"{TAG}-baked")
    created.append(baked.tag)
    before, after = client.images.get(TAG), client.images.get(baked.tag)
    assert after.attrs["RootFS"]["Layers"][:-1] == before.attrs["RootFS"]["Layers"]
    assert after.attrs["Config"]["Env"] == before.attrs["Config"]["Env"]
    # what the warm-up's processes get
    seen = baked_layer.bake(target, TAG, command=["sh", "-c", "env"], tag=f"{TAG}-env")
    created.append(seen.tag)
    assert all(f"{k}={v}" in seen.log.splitlines() for k, v in container.GPU_ENV.items())  # as the rows do
    assert client.images.get(seen.tag).attrs["Config"]["Env"] == before.attrs["Config"]["Env"]
    assert after.labels["stackgate.target"] == "cpu" and "harness.aot" in after.labels["stackgate.baked"]
    script = f"python -m harness.aot run '{UNLISTED}' --targets hip:gfx1151 >/dev/null; cat $STACKGATE_JIT_LOG | wc -l"
    out = container.capture(baked.tag, ["sh", "-c", script]).stdout
    assert out.strip() == "0"  # the warm run's compile is now a cache hit


def test_cpu_selftest_in_the_built_image_writes_one_testcase_per_row(built, tmp_path):
    """`python -m ci run cpu selftest` in the cpu image: every planned row with its properties, and
    the baked kernels load with 0 compiles while an unbaked one is caught by name."""
    from junitparser.xunit2 import JUnitXml

    from ci import cli
    from ci.stack import plan

    rc = cli.main(["run", "cpu", "selftest", "--image", TAG, "--out", str(tmp_path)])
    assert rc == 0
    suite = next(iter(JUnitXml.fromfile(str(tmp_path / "junit-cpu-selftest-0.xml"))))
    assert suite.name == "stackgate.cpu.selftest.0"
    planned = {r.id for r in plan.build(stack.load()).select(targets=["cpu"]).rows}
    cases = {c.name: {p.name: p.value for p in c.properties()} for c in suite}
    rows = {props["stackgate.row"]: props for name, props in cases.items() if name.startswith("test_selftest_row[")}
    assert set(rows) == planned and len(planned) == 4
    for props in rows.values():
        assert props["stackgate.image_digest"].startswith("sha256:")
        for key in ("stackgate.change", "stackgate.track", "stackgate.target", "stackgate.git_revision"):
            assert props[key], key
        assert props["stackgate.jit.compiles"] == "0"
        assert json.loads(props["stackgate.metric.baked_kernel_compiles"])["value"] == 0
        for metric in ("cold_workload_ms", "warm_workload_ms", "max_abs_err"):
            assert json.loads(props[f"stackgate.metric.{metric}"])["unit"]
    unbaked = cases["test_sentinel_catches_unbaked_kernel"]
    assert int(unbaked["stackgate.jit.compiles"]) == 1
    assert unbaked["stackgate.jit.kernels"].startswith("stackgate_unbaked_")
