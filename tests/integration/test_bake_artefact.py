"""The bake as a portable artefact: `ci bake TARGET --host --out DIR` packs every JIT cache of the
target's root; `ci run --host --caches ARTEFACT` installs it at the same paths, or refuses one made for
another host, naming what differs."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from junitparser.xunit2 import JUnitXml
from support.paths import REPO


def _ci(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ci", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)  # fmt: skip


@pytest.fixture
def artefact(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    pytest.importorskip("triton")
    env = {**os.environ, "STACKGATE_RUNTIME_CACHES": str(tmp_path / "runtime"), "DOCKER_HOST": "unix:///nonexistent"}
    done = _ci(env, "bake", "cpu", "--host", "--out", str(tmp_path / "art"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    [path] = (tmp_path / "art").glob("caches-cpu-*.tar.gz")
    return path, env


def test_a_fresh_host_runs_baked_from_the_artefact(artefact, tmp_path: Path) -> None:
    path, env = artefact
    shutil.rmtree(tmp_path / "runtime")  # a host that has run nothing: only the artefact
    done = _ci({**env, "STACKGATE_REFUSE_JIT": "1"}, "run", "cpu", "selftest", "--host", "--caches", str(path),
               "--out", str(tmp_path / "out"))  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    cases = [c for s in JUnitXml.fromfile(str(tmp_path / "out" / "junit-cpu-selftest-0.xml")) for c in s]
    rows = [c for c in cases if c.name.startswith("test_selftest_row")]
    assert len(rows) == 4 and all(not c.result for c in rows)  # passed, with JIT refused
    props = [{p.name: p.value for p in c.properties()} for c in rows]
    assert {p["stackgate.jit.compiles"] for p in props} == {"0"}
    with tarfile.open(path, "r:gz") as tar:  # the bake's log came back from the artefact: nothing was re-baked here
        packed = tar.extractfile("root/aot-bake-jit.jsonl").read()
    assert (tmp_path / "runtime" / "cpu" / "aot-bake-jit.jsonl").read_bytes() == packed


def test_an_artefact_for_another_host_is_refused_naming_the_difference(artefact, tmp_path: Path) -> None:
    path, env = artefact
    forged = tmp_path / "forged.tar.gz"
    with tarfile.open(path, "r:gz") as src, tarfile.open(forged, "w:gz") as dst:
        for member in src.getmembers():
            data = src.extractfile(member).read() if member.isfile() else None
            if member.name == "stackgate-caches.json":
                doc = json.loads(data)
                doc["key"]["triton"] = "9.9.9"
                data = json.dumps(doc).encode()
                member.size = len(data)
            dst.addfile(member, io.BytesIO(data) if data is not None else None)
    done = _ci(env, "run", "cpu", "selftest", "--host", "--caches", str(forged), "--out", str(tmp_path / "o"))
    assert done.returncode == 2
    assert "made for another host: triton '9.9.9' in the artefact" in done.stderr
    assert "python -m ci bake cpu --host --out DIR" in done.stderr


def test_caches_are_for_host_runs(tmp_path: Path) -> None:
    done = _ci({**os.environ, "DOCKER_HOST": "unix:///nonexistent"}, "run", "cpu", "selftest", "--caches", "x.tar.gz",
               "--out", str(tmp_path))  # fmt: skip
    assert done.returncode == 2 and "add --host" in done.stderr


def test_a_bake_warms_only_the_rows_asked_for(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    env = {**os.environ, "STACKGATE_RUNTIME_CACHES": str(tmp_path / "runtime"), "DOCKER_HOST": "unix:///nonexistent"}
    ids = [r["id"] for r in json.loads(_ci(env, "plan", "--target", "cpu", "--format", "json").stdout)["rows"]]
    done = _ci(env, "bake", "cpu", "--host", "--out", str(tmp_path / "art"), "--rows", ids[1])
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert re.search(rf"\[1/1\] pass +{re.escape(ids[1])}", done.stdout) and ids[0] not in done.stdout
    done = _ci(env, "bake", "cpu", "--host", "--out", str(tmp_path / "art"), "--rows", "48804.cpu.nope")
    assert done.returncode == 2 and "row(s) not planned for cpu/*: 48804.cpu.nope" in done.stderr
    done = _ci(env, "bake", "cpu", "--host", "--out", str(tmp_path / "art"), "--change", "48804")
    assert done.returncode == 2 and "no row of cpu to warm with these filters" in done.stderr


def test_unbaked_runs_from_empty_caches_and_says_so(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    env = {**os.environ, "STACKGATE_RUNTIME_CACHES": str(tmp_path / "runtime"), "DOCKER_HOST": "unix:///nonexistent",
           "STACKGATE_REFUSE_JIT": "1"}  # fmt: skip
    done = _ci(env, "run", "cpu", "selftest", "--host", "--unbaked", "--out", str(tmp_path / "a"))
    assert done.returncode == 0, done.stdout[-3000:]
    xml = JUnitXml.fromfile(str(tmp_path / "a" / "junit-cpu-selftest-0.xml"))
    assert {p.name: p.value for s in xml for p in s.properties()}["stackgate.caches"] == "empty"
    rows = [c for s in xml for c in s if c.name.startswith("test_selftest_row")]
    assert rows and all("nothing was baked" in (c.result[0].message or "") for c in rows)  # skipped, saying why
    assert not (tmp_path / "runtime" / "cpu" / "aot-manifest.json").exists()

    (tmp_path / "runtime" / "cpu" / "triton").mkdir(parents=True)
    (tmp_path / "runtime" / "cpu" / "triton" / "leftover.cubin").write_bytes(b"x")
    again = _ci(env, "run", "cpu", "selftest", "--host", "--unbaked", "--out", str(tmp_path / "b"))
    assert again.returncode == 2 and "already holds 1 cache file(s), e.g. triton/leftover.cubin" in again.stderr
    kept = _ci(env, "run", "cpu", "selftest", "--host", "--unbaked", "--keep-caches", "--out", str(tmp_path / "k"))
    assert kept.returncode == 0, kept.stdout[-3000:]  # a later run of the same kind reuses what the earlier left
    xml = JUnitXml.fromfile(str(tmp_path / "k" / "junit-cpu-selftest-0.xml"))
    assert {p.name: p.value for s in xml for p in s.properties()}["stackgate.caches"].startswith("as found (1 files")
    alone = _ci(env, "run", "cpu", "selftest", "--host", "--keep-caches", "--out", str(tmp_path / "alone"))
    assert alone.returncode == 2 and "--keep-caches is about an --unbaked run's caches" in alone.stderr
    both = _ci(
        env, "run", "cpu", "selftest", "--host", "--unbaked", "--caches", "x.tar.gz", "--out", str(tmp_path / "c")
    )
    assert both.returncode == 2 and "contradict" in both.stderr


def test_the_aot_bake_alone_is_an_artefact_with_no_gpu_in_its_key(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    env = {**os.environ, "STACKGATE_RUNTIME_CACHES": str(tmp_path / "runtime"), "DOCKER_HOST": "unix:///nonexistent"}
    (tmp_path / "runtime" / "cpu" / "inductor").mkdir(parents=True)
    (tmp_path / "runtime" / "cpu" / "inductor" / "from-an-earlier-run.py").write_text("")
    done = _ci(env, "bake", "cpu", "--host", "--aot-only", "--out", str(tmp_path / "art"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    [path] = (tmp_path / "art").glob("caches-cpu-aot-*.tar.gz")
    with tarfile.open(path, "r:gz") as tar:
        doc = json.loads(tar.extractfile("stackgate-caches.json").read())
        names = tar.getnames()
    assert doc["key"]["kind"] == "aot" and "driver" not in doc["key"] and "gpu" not in doc["key"]
    assert any(n.startswith("root/triton/") for n in names) and not any("inductor" in n for n in names)
    shutil.rmtree(tmp_path / "runtime")
    ran = _ci({**env, "STACKGATE_REFUSE_JIT": "1"}, "run", "cpu", "selftest", "--host", "--caches", str(path),
              "--out", str(tmp_path / "out"))  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-3000:]
    xml = JUnitXml.fromfile(str(tmp_path / "out" / "junit-cpu-selftest-0.xml"))
    assert {p.name: p.value for s in xml for p in s.properties()}["stackgate.caches"] == f"artefact:{path.name}"
    shutil.rmtree(tmp_path / "runtime")  # a root an earlier run left a compile in: the rows start from both
    (tmp_path / "runtime" / "cpu" / "inductor").mkdir(parents=True)
    (tmp_path / "runtime" / "cpu" / "inductor" / "left-by-a-run.py").write_text("")
    again = _ci(env, "run", "cpu", "selftest", "--host", "--caches", str(path), "--out", str(tmp_path / "again"))
    assert again.returncode == 0 and "beside 1 files earlier runs left there" in again.stdout, again.stdout[-3000:]
    xml = JUnitXml.fromfile(str(tmp_path / "again" / "junit-cpu-selftest-0.xml"))
    said = {p.name: p.value for s in xml for p in s.properties()}["stackgate.caches"]
    assert said == f"artefact:{path.name} + 1 files found in the root"
    refused = _ci(env, "bake", "cpu", "--aot-only")
    assert refused.returncode == 2 and "--aot-only packs a host bake" in refused.stderr


def test_a_warm_run_runs_the_rows_own_test_off_the_record(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    env = {**os.environ, "STACKGATE_RUNTIME_CACHES": str(tmp_path / "runtime"), "DOCKER_HOST": "unix:///nonexistent"}
    first = json.loads(_ci(env, "plan", "--target", "cpu", "--format", "json").stdout)["rows"][0]["id"]
    assert _ci(env, "run", "cpu", "selftest", "--host", "--rows", first, "--out", str(tmp_path / "r")).returncode == 0
    xml = JUnitXml.fromfile(str(tmp_path / "r" / "junit-cpu-selftest-0.xml"))
    assert {p.name: p.value for s in xml for p in s.properties()}["stackgate.caches"] == "aot"  # a plain host run
    own_log = tmp_path / "the-callers-jit.jsonl"
    code = ("import os, sys; from harness.rows import load; from harness.warm_run import run_row_test; "
            "row = load(os.environ['STACKGATE_ROWS']).rows[0]; sys.exit(run_row_test(row))")  # fmt: skip
    suites = REPO / "suites"
    env.update({"PYTHONPATH": str(suites), "STACKGATE_ROWS": str(tmp_path / "r" / "rows.json"),
                "STACKGATE_JIT_LOG": str(own_log), "TRITON_CACHE_DIR": str(tmp_path / "cold"),
                "STACKGATE_KERNEL_LIST": str(tmp_path / "runtime" / "cpu" / "aot-manifest.json")})  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], cwd=suites, capture_output=True, text=True, timeout=600,
                          env=env)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{first}: warm run of its test ran (pytest exit" in done.stdout
    # the test loaded the baked kernels from an empty cache: it compiled them there, logging elsewhere
    assert any((tmp_path / "cold").rglob("*.json")) and not own_log.exists()
    # where the bake asks (ci bake --host: beside the caches), its compiles and its logs are kept, to tell later
    # which part of a key moved when a run misses them
    kept = tmp_path / "keep" / "warm-bake-jit.jsonl"
    env.update(
        {
            "STACKGATE_WARM_JIT_LOG": str(kept),
            "TRITON_CACHE_DIR": str(tmp_path / "cold2"),
            "PYTHONPATH": os.pathsep.join([str(suites / "harness" / "startup"), str(suites)]),
        }
    )  # the sentinel on
    again = subprocess.run([sys.executable, "-c", code], cwd=suites, capture_output=True, text=True, timeout=600,
                           env=env)  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    events = [json.loads(line) for line in kept.read_text().splitlines()]
    assert events and all(e["key_parts"]["fn"] and e["key_parts"]["triton"] for e in events)
    assert any((tmp_path / "keep" / "warm-logs").glob("*.log"))


def test_an_artefact_baked_with_other_vllm_switches_is_refused_naming_the_switch(artefact, tmp_path: Path) -> None:
    """vLLM keys its compiled graphs by its VLLM_* switches: a run with one the bake lacked would compile every
    graph again (and fail with JIT refused), so the artefact is refused up front, naming the switch."""
    path, env = artefact
    with tarfile.open(path, "r:gz") as tar:
        made = json.loads(tar.extractfile("stackgate-caches.json").read())["key"]["compile_env"]
    assert made["VLLM_FLASHINFER_ALLREDUCE_BACKEND"] == "trtllm"  # the rows' own switches are part of the key
    assert "VLLM_CACHE_ROOT" not in made  # a path vLLM leaves out of its key
    done = _ci({**env, "VLLM_USE_V2_MODEL_RUNNER": "1", "VLLM_LOGGING_LEVEL": "DEBUG"}, "run", "cpu", "selftest",
               "--host", "--caches", str(path), "--out", str(tmp_path / "o"))  # fmt: skip
    assert done.returncode == 2
    assert "compile_env VLLM_USE_V2_MODEL_RUNNER unset in the artefact, '1' here" in done.stderr
    assert "LOGGING" not in done.stderr  # logging is not part of vLLM's key
