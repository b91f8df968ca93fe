"""Any fork, no edits: a small upstream and a fork of it made from scratch by git, and every verb that asks what the
fork holds giving one answer, with nothing written into stack/changes/ or stack/fork.yaml to point at it.

Upstream (main): #48407, #46849 and #46514 squash-merged after the release v0.26.0; #48804 closed unmerged. The fork
(branch `fork`, off v0.26.0, a clone's layout: upstream/main a remote branch) merged upstream at #48407 (converged),
cherry-picked #46849 through a conflict it resolved by hand (ported, edited) and #46514 as it is (ported), and lacks
#48804 (absent). The stack's change files hold upstream facts only: this upstream's, written once as the stack a
fork maintainer receives."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from support.git_repos import ENV, Repo, set_change
from support.paths import REPO
from support.report_helpers import rows as planned_rows
from support.report_helpers import write_rows

from ci.buildkite import steps as bk_steps
from ci.cli import main
from ci.common.errors import UsageError
from ci.fork import ablate, bundle, fork_plan, site, source
from ci.stack import loader
from ci.upstream.checkout import Checkout

BASE = {
    "vllm/__init__.py": "__version__ = '0.26.0'\n",
    "vllm/attention.py": "def attend(q):\n    return q\n\n\nDENSE = False\n",
    "vllm/spec.py": "STEPS = 1\nDRAFT = 'loop'\n",
    "vllm/mla.py": "LSE = False\n",
}
SUBJECT = {
    "48407": "[Attention] Skip sparse indexer scoring for dense short prefills (#48407)",
    "46849": "[MRV2][Spec] Fuse AR speculator multi-step decodes back into one CUDA graph (#46849)",
    "46514": "[Attention][MLA] FlashMLA sparse: DCP on the fp8_ds_mla mixed-batch path + MTP (#46514)",
}
WANT = {"48407": "converged", "46849": "ported, edited", "46514": "ported", "48804": "absent", "49903": "absent"}


@pytest.fixture
def world(tmp_path: Path, stack_copy: Path) -> tuple[Repo, dict[str, str], Path]:
    """The repository (upstream's main and the fork's branch), the commits by name, and the stack as shipped: its
    change files naming this upstream's merge commits, patch-ids and file patch-ids."""
    r = Repo(tmp_path / "vllm")
    ids = {"base": r.commit("vLLM 0.26.0", BASE)}
    r.git("tag", "v0.26.0")
    ids["48407"] = r.commit(SUBJECT["48407"], {"vllm/attention.py": BASE["vllm/attention.py"].replace("False", "True"),
                                               "tests/test_dense.py": "def test(): pass\n"})  # fmt: skip
    r.commit("[Core] upstream moves on", {"vllm/other.py": "OTHER = 1\n"})
    ids["46849"] = r.commit(SUBJECT["46849"], {"vllm/spec.py": "STEPS = 3\nDRAFT = 'loop'\n",
                                               "vllm/fused.py": "def fused(): ...\n"})  # fmt: skip
    ids["46514"] = r.commit(SUBJECT["46514"], {"vllm/mla.py": "LSE = True\nDCP = 2\n"})
    r.upstream()
    r.git("checkout", "-q", "-b", "fork", "v0.26.0")
    ids["tweak"] = r.commit("fork: mark the draft step count", {"vllm/spec.py": "STEPS = 1  # fork\nDRAFT = 'loop'\n"})
    r.git("merge", "-q", "--no-ff", "-m", "Merge upstream up to #48407", ids["48407"])
    picked = subprocess.run(["git", "-C", str(r.path), "cherry-pick", "-x", ids["46849"]], env=ENV, capture_output=True)
    assert picked.returncode != 0  # the fork's own edit of that line conflicts
    (r.path / "vllm" / "spec.py").write_text("STEPS = 3  # fork\nDRAFT = 'loop'\n")  # resolved by hand
    r.git("add", "-A")
    r.git("-c", "core.editor=true", "cherry-pick", "--continue")
    ids["edited"] = r.git("rev-parse", "HEAD")
    r.git("cherry-pick", "-x", ids["46514"])
    ids["verbatim"] = r.git("rev-parse", "HEAD")
    co = Checkout.open(r.path)
    for change in ("48407", "46849", "46514"):
        merge = ids[change]
        set_change(stack_copy, change, upstream={
            "merge_commit": merge[:12], "commits": None, "merged_on": "2023-11-15", "first_release": None,
            "patch_id": co.patch_ids(merge, walk=False)[merge], "file_ids": co.file_ids([merge])[merge]})  # fmt: skip
    return r, ids, stack_copy


def _ci(stack: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ci", "--stack", str(stack), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def _snapshot(stack: Path) -> dict[str, bytes]:
    return {str(p.relative_to(stack)): p.read_bytes() for p in sorted(stack.rglob("*.yaml"))}


def _base_site(root: Path) -> Path:
    """The base release installed: its vllm/ files with a RECORD, as a wheel leaves them."""
    where = root / "base-site"
    record = []
    for name, text in BASE.items():
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        (where / name).write_text(text)
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text)}")
    info = where / "vllm-0.26.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.26.0\n")
    (info / "RECORD").write_text("\n".join(record) + "\n")
    return where


def _recorded(site_dir: Path) -> tuple[tuple[str, str], ...]:
    """What a row run on this build records (suites/engine/row_record.py): the fork build's properties."""
    probe = [sys.executable, "-m", "harness.vllm_build", str(site_dir / "vllm")]
    seen = json.loads(subprocess.run(probe, cwd=REPO / "suites", capture_output=True, text=True, check=True).stdout)
    fork = seen["fork"]
    return (("vllm_build", seen["vllm_build"]), ("fork_changes", ",".join(seen["fork_changes"])),
            ("fork", f"{fork['name']} {fork['ref']} {fork['built'][:12]}"),
            ("fork_held", ";".join(f"{c}:{s}" for c, s in sorted(seen["fork_held"].items()))))  # fmt: skip


def test_every_verb_gives_one_answer_for_a_fork_nobody_recorded(world, tmp_path, capsys) -> None:
    repo, ids, stack = world
    before = _snapshot(stack)
    fork = ["--fork", str(repo.path), "--ref", "fork"]

    up = _ci(stack, "upstream", *fork, "--format", "json")
    assert up.returncode == 0, up.stderr
    upstream = {c["change"]: c for c in json.loads(up.stdout)["changes"] if c["pr"]}
    assert {c: s["state"] for c, s in upstream.items()} == WANT
    assert upstream["48407"]["detail"] == f"merge commit {ids['48407'][:12]} is an ancestor of fork"
    assert upstream["46849"]["detail"].startswith(f"{ids['edited'][:12]} carries upstream's merge commit ")
    assert "edited: vllm/spec.py" in upstream["46849"]["detail"]

    fk = _ci(stack, "fork", *fork, "--format", "json")
    assert fk.returncode == 0, fk.stderr
    doc = json.loads(fk.stdout)
    held = {c["change"]: c for c in doc["changes"]}
    assert {c: h["state"] for c, h in held.items()} == WANT
    assert doc["base"]["version"] == "0.26.0" and doc["base"]["ref"] == "v0.26.0" and doc["fork"] == "vllm"
    assert held["48407"]["commits"] == [ids["48407"]]  # upstream's merge, brought by the fork's merge of upstream
    assert held["46849"]["commits"] == [ids["edited"]] and held["46514"]["commits"] == [ids["verbatim"]]
    assert held["48804"]["commits"] == []

    pl = _ci(stack, "plan", *fork, "--format", "json")
    assert pl.returncode == 0, pl.stderr
    planned = json.loads(pl.stdout)
    assert {r["change"] for r in planned["absent_in_fork"]} == {"48804", "49903"}
    assert "48804" not in {r["change"] for r in planned["rows"]}
    assert {"48407", "46849", "46514"} <= {r["change"] for r in planned["rows"]}

    st = loader.load(stack)
    theirs = source.open_fork(st, repo.path, ref="fork")
    made = bundle.write(theirs, bundle.overlay(theirs, theirs.commit), tmp_path / "fork.tar.gz")
    base_site = _base_site(tmp_path)
    site.build(made, base_site, tmp_path / "site")
    props = _recorded(tmp_path / "site")
    picked = [r for c, s in WANT.items() if s != "absent" for r in planned_rows(c, target="cuda-sm90")[:1]]  # ran
    write_rows(tmp_path / "junit", picked, lambda r, c: replace(c, props=props, vllm_version="0.26.0"))
    assert _ci(stack, "plan", *fork, "--not-run", str(tmp_path / "junit")).returncode == 0  # as ci main --fork does
    argv = ["--stack", str(stack), "report", str(tmp_path / "junit"), "--out", str(tmp_path / "report")]
    assert main(argv) in (0, 1)
    capsys.readouterr()
    md = (tmp_path / "report" / "report.md").read_text()
    n = len(planned["absent_in_fork"])  # one line: its folder's reasons, each change's once
    assert f"- {n} rows not run: #48804: absent in the fork vllm fork ({theirs.commit[:12]}): none of the files" in md
    for change, state in WANT.items():
        assert f"; in the fork build (vllm fork {theirs.commit[:12]}): {state}" in _heading(md, change), change
    assert _snapshot(stack) == before  # nothing written into the stack to point at this fork


def _heading(md: str, change: str) -> str:
    """The line under a change's heading in report.md: its upstream state, and how the fork build holds it."""
    lines = md.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(f"### #{change} "))
    return lines[at + 2]


def test_without_removes_a_converged_an_edited_and_a_verbatim_change_and_refuses_a_dependent_one(world, tmp_path):
    repo, ids, stack = world
    st = loader.load(stack)
    theirs = source.open_fork(st, repo.path, ref="fork")
    tree = {}
    for change in ("48407", "46849", "46514"):
        dropped = ablate.without(st, theirs, change)
        ov = bundle.overlay(theirs, dropped.commit)
        tree[change] = {p.removeprefix("vllm/"): ov.files[p].decode() for p in ov.files}
        built = site.build(bundle.write(theirs, ov, tmp_path / f"w{change}.tar.gz", dropped=dropped),
                           _base_site(tmp_path / change), tmp_path / f"without-{change}")  # fmt: skip
        assert built["without"] == change and change not in built["changes"]
        assert built["removed"]["state"] == WANT[change] and built["held"][change]["state"] == "removed"
    assert ablate.without(st, theirs, "48407").how == f"upstream's merge commit {ids['48407'][:12]}"
    assert "attention.py" not in tree["48407"]  # the base's again; the others stay
    assert tree["48407"]["spec.py"] == "STEPS = 3  # fork\nDRAFT = 'loop'\n"
    assert tree["46849"]["spec.py"] == "STEPS = 1  # fork\nDRAFT = 'loop'\n" and "fused.py" not in tree["46849"]
    assert "mla.py" not in tree["46514"] and tree["46514"]["attention.py"].endswith("DENSE = True\n")
    with pytest.raises(UsageError, match=r"#48804 is absent in vllm fork .*: there is nothing to drop"):
        ablate.without(st, theirs, "48804")
    later = repo.commit("fork: tune the sparse path", {"vllm/mla.py": "LSE = True  # tuned\nDCP = 2\n"})
    again = source.open_fork(st, repo.path, ref="fork")
    with pytest.raises(ablate.Dependent) as err:
        ablate.without(st, again, "46514")
    assert "cannot drop #46514 alone" in str(err.value) and "vllm/mla.py" in str(err.value)
    assert f"{later[:12]} 'fork: tune the sparse path'" in str(err.value)


def _refused_for_another_release(stack: Path, argv: list[str]) -> None:
    done = _ci(stack, *argv)
    assert done.returncode == 2, (argv, done.stdout, done.stderr)
    assert "vllm fork is built on vLLM 0.27.1, but target cuda-sm90's lock installs vllm==0.26.0" in done.stderr
    assert "python -m ci lock cuda-sm90 --vllm 0.27.1" in done.stderr
    assert "python -m ci build" not in done.stdout and "fork bundle" not in done.stdout


def test_a_fork_on_another_release_is_refused_before_any_build(world):
    """The fork is on v0.27.1; the target's lock installs vLLM 0.26.0: `ci build --fork` stops with exit 2 naming
    both versions and the command that re-locks, before a bundle, a bootstrap or a build."""
    repo, _, stack = world
    repo.git("tag", "v0.27.1")
    bundles = REPO / ".whl" / "fork.tar.gz"
    had = bundles.stat().st_mtime_ns if bundles.exists() else None
    _refused_for_another_release(stack, ["build", "cuda-sm90", "--fork", str(repo.path), "--ref", "fork"])
    assert (bundles.stat().st_mtime_ns if bundles.exists() else None) == had


def test_main_with_a_fork_on_another_release_stops_before_any_build(world, tmp_path, docker_client):
    """`ci main --fork` (an engine answers: the images route), where the target's rows cannot run here: nothing is
    planned into a bundle or built, and the command that runs them re-locks for the fork's release first, then judges
    the same fork (exit 6: nothing could run here, the report written). Where they can run, `ci build` refuses as
    above (`test_a_fork_on_another_release_is_refused_before_any_build`)."""
    repo, _, stack = world
    repo.git("tag", "v0.27.1")
    out = tmp_path / "out"
    argv = ["main", "--target", "cuda-sm90", "--fork", str(repo.path), "--ref", "fork", "--out", str(out)]
    done = _ci(stack, *argv)
    assert done.returncode == 6, (done.stdout, done.stderr)
    assert "python -m ci build" not in done.stdout and "fork bundle" not in done.stdout
    assert not (out / "fork").exists()
    doc = json.loads((out / "report" / "report.json").read_text())
    steps = {t["command"] for c in doc["changes"] for t in c["targets"] if t["target"] == "cuda-sm90"}
    assert steps == {"python -m ci lock cuda-sm90 --vllm 0.27.1"}  # the report's next step: the lock first
    said = f"python -m ci lock cuda-sm90 --vllm 0.27.1, then nox -s sm90_spec_decode -- --fork {repo.path} --ref fork"
    assert said in done.stdout  # then the session, judging the same fork


def _resolved(repo: Repo, head: str) -> str:
    """The fork as the pipeline writes it into every step: as resolved where it was made, every ref a commit."""
    up, base = repo.git("rev-parse", "upstream/main"), repo.git("rev-parse", "v0.26.0^{commit}")
    return f"--fork {repo.path} --ref {head} --upstream-ref {up} --base-ref {base} --base-version 0.26.0"


def test_the_pipeline_builds_the_forks_image_and_each_ablation(world, tmp_path):
    """`ci pipeline --fork --without 48407`: Buildkite's schema; its build steps build the fork's image (the ref
    resolved to a commit) and the fork without #48407; run steps only for rows the fork can run, the ablation's
    for #48407's rows; the report compares the fork against the fork without it."""
    from support.buildkite import REGISTRY, check_schema

    repo, _, stack = world
    head = repo.git("rev-parse", "fork")
    env = {"STACKGATE_REGISTRY": REGISTRY}
    done = subprocess.run([sys.executable, "-m", "ci", "--stack", str(stack), "pipeline", "--target", "cuda-sm90",
                           "--fork", str(repo.path), "--ref", "fork", "--without", "48407"], cwd=REPO,
                          capture_output=True, text=True, env={**os.environ, **env})  # fmt: skip
    assert done.returncode == 0, done.stderr
    path = tmp_path / "pipeline.yml"
    path.write_text(done.stdout)
    check_schema(path)
    steps = [s for s in yaml.safe_load(done.stdout)["steps"] if "key" in s]
    by_key = {s["key"]: s for s in steps}
    fork = _resolved(repo, head)
    build = by_key["build-cuda-sm90"]["commands"]
    assert f"nox -s build -- --stack {stack} cuda-sm90 {fork}" in build
    assert any(c.endswith(f"plan --stack {stack} {fork} --target cuda-sm90 --not-run results") for c in build)
    ablation = by_key["build-cuda-sm90-without-48407"]["commands"]
    assert (f"nox -s build -- --stack {stack} cuda-sm90 {fork} --without 48407 --tag stackgate/cuda-sm90:without-48407"
            in ablation)  # fmt: skip
    assert any("push" in c and "--image stackgate/cuda-sm90:without-48407-baked" in c for c in ablation)
    ran = [s for s in steps if s["key"].startswith("run-")]
    rows = {k: s["commands"][-1].split("--rows ")[1].split()[0].split(",") for k, s in by_key.items() if k in
            {r["key"] for r in ran}}  # fmt: skip
    assert ran and not any(r.startswith("48804.") for rs in rows.values() for r in rs)
    without = [k for k in rows if k.endswith("-without-48407")]
    assert without and all(r.startswith("48407.") for k in without for r in rows[k])
    assert all(by_key[k]["depends_on"] == ["build-cuda-sm90-without-48407"] for k in without)
    report = " ".join(by_key["report"]["commands"])
    assert "--compare results-without-48407" in report and "--label fork --label without-48407" in report
    assert "results/fork-absent/*/not-run.json" in report
    assert bk_steps.ABSENT == fork_plan.ABSENT


def test_the_pipeline_runs_the_timing_protocol_on_one_agent_per_target(world, tmp_path):
    repo, _, stack = world
    head = repo.git("rev-parse", "fork")
    done = subprocess.run([sys.executable, "-m", "ci", "--stack", str(stack), "pipeline", "--target", "cuda-sm90",
                           "--fork", str(repo.path), "--ref", "fork", "--compare-without", "46849", "--runs", "6"],
                          cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "STACKGATE_REGISTRY": "registry.test:5000/stackgate"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    from support.buildkite import check_schema

    path = tmp_path / "pipeline.yml"
    path.write_text(done.stdout)
    check_schema(path)
    step = next(s for s in yaml.safe_load(done.stdout)["steps"] if s.get("key") == "compare-46849-cuda-sm90")
    run = next(c for c in step["commands"] if " main " in c)
    assert f"{_resolved(repo, head)} --compare-without 46849 --runs 6 --aa --rows 46849.cuda-sm90." in run
    assert step["agents"]["queue"] == "gpu-h200"
