"""`ci bake --host` scheduled as `ci run` is, on this machine's CPU with stand-in GPUs: the rows of a model and change
warm in one process, the groups packed over the GPUs; a SIGTERM keeps what finished and --resume goes on; --deadline
stops in time with every finished configuration in a partial artefact; the run from the artefact, JIT refused,
compiles nothing; a bake seeded with --from an artefact of a build that differs in Python files alone re-uses it.

The stand-in suite compiles one real Triton kernel per engine configuration (cross-compiled for sm_90: a compile
the JIT sentinel sees, into the caches root the bake packs) and sleeps, as a GPU row would build its engine.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from support.paths import REPO

SUITE = """
import importlib, os, sys, time
from pathlib import Path

import pytest


@pytest.mark.track("harness-selftest")
def test_row(row, record_property):
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget

    start = time.time()
    name = "standin_" + row.change  # one kernel per engine configuration: the rows of a change share one
    src = Path(os.environ["STANDIN_SOURCES"])
    src.mkdir(parents=True, exist_ok=True)
    if not (src / f"{name}.py").exists():
        (src / f"{name}.py").write_text(
            "import triton\\nimport triton.language as tl\\n\\n\\n@triton.jit\\n"
            f"def {name}(x_ptr, n):\\n    offs = tl.arange(0, 64)\\n    tl.store(x_ptr + offs, offs, mask=offs < n)\\n"
        )
    sys.path.insert(0, str(src))
    kernel = getattr(importlib.import_module(name), name)
    triton.compile(triton.compiler.ASTSource(kernel, {"x_ptr": "*i32", "n": "i32"}), target=GPUTarget("cuda", 90, 32))
    time.sleep(float(os.environ.get("STANDIN_SECONDS", "0.5")))
    record_property("standin_gpu", os.environ.get("CUDA_VISIBLE_DEVICES", ""))
    record_property("standin_span", f"{start} {time.time()}")
"""

CHANGES = ("selftest", "selftestb", "selftestc")  # three groups of four rows, one engine configuration each


@pytest.fixture
def bench(tmp_path: Path, stack_copy: Path) -> dict:
    pytest.importorskip("triton")
    text = (stack_copy / "changes" / "selftest.yaml").read_text()
    for other in CHANGES[1:]:
        (stack_copy / "changes" / f"{other}.yaml").write_text(text.replace("id: selftest\n", f"id: {other}\n"))
    suites = tmp_path / "suites"
    (suites / "selftest").mkdir(parents=True)
    (suites / "selftest" / "test_rows.py").write_text(SUITE)
    env = {**os.environ, "STACKGATE_RUNTIME_CACHES": str(tmp_path / "rt"), "STANDIN_SOURCES": str(tmp_path / "src"),
           "DOCKER_HOST": "unix:///nonexistent", "STACKGATE_REFUSE_JIT": "1"}  # fmt: skip
    return {"stack": stack_copy, "suites": suites, "env": env, "tmp": tmp_path}


def _ci(bench: dict, *argv: str, env: dict | None = None, wait: bool = True):
    cmd = [sys.executable, "-m", "ci", "--stack", str(bench["stack"]), *argv]
    proc = subprocess.Popen(cmd, cwd=REPO, env={**bench["env"], **(env or {})}, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)  # fmt: skip
    if not wait:
        return proc
    out, _ = proc.communicate(timeout=600)
    return proc.returncode, out


def _bake(bench: dict, out: str, *extra: str, gpus: str = "a,b", **kw):
    # one shared process of a group is budgeted 30 GiB (12 of KV, 6 beside, 12 for its kept second engine): one a GPU
    return _ci(bench, "bake", "cpu", "--host", "--suites-dir", str(bench["suites"]), "--gpus", gpus,
               "--gpu-memory", "30", "--out", str(bench["tmp"] / out), *extra, **kw)  # fmt: skip


def _kernels(artefact: Path) -> set[str]:
    """The stand-in kernels an artefact holds (Triton's cache keeps a <kernel>.json beside each binary)."""
    with tarfile.open(artefact) as tar:
        names = [Path(n).name for n in tar.getnames()]
    return {
        n.removesuffix(".json").removeprefix("standin_")
        for n in names
        if n.startswith("standin_") and n.endswith(".json")
    }


def _artefact(said: str, kind: str = "artefact") -> Path:
    line = next(x for x in said.splitlines() if x.startswith(f"{kind} "))
    return Path(line[len(kind) + 1 :].split()[0])


def _spans(folder: Path) -> list[tuple[str, float, float]]:
    from lxml import etree

    found = []
    for junit in folder.rglob("junit-*.xml"):
        for tc in etree.parse(str(junit)).getroot().iter("testcase"):
            props = {p.get("name"): p.get("value") for p in tc.iter("property")}
            if "standin_span" in props:
                start, end = map(float, props["standin_span"].split())
                found.append((props["standin_gpu"], start, end))
    return found


def test_the_bake_packs_groups_over_the_gpus_and_the_run_from_its_artefact_compiles_nothing(bench: dict) -> None:
    code, said = _bake(bench, "art")
    assert code == 0, said
    assert said.count("  group cpu-selftest/") == 3 and "1 engine configuration, 4 rows" in said and "ETA" in said
    spans = _spans(bench["tmp"] / "art" / "bake-results")
    assert len(spans) == 12 and {g for g, _, _ in spans} == {"a", "b"}  # the groups spread over both stand-in GPUs
    on_a = [s for s in spans if s[0] == "a"]
    on_b = [s for s in spans if s[0] == "b"]
    assert min(e for _, _, e in on_a + on_b) > max(min(s for _, s, _ in on_a), min(s for _, s, _ in on_b))
    artefact = _artefact(said)
    assert _kernels(artefact) == set(CHANGES)  # each configuration's compile, once
    costs = json.loads((bench["tmp"] / "art" / "bake-results" / "cpu-selftest-0" / "costs.json").read_text())
    assert sorted(m["config"].split("/")[1] for m in costs["measured"]) == sorted(CHANGES)
    assert all(m["phase"] == "bake" and len(m["further_s"]) == 3 for m in costs["measured"])
    # a fresh host: the root gone, the artefact installed, JIT refused: every row passes, nothing compiled
    import shutil

    shutil.rmtree(bench["tmp"] / "rt")
    run = ["run", "cpu", "selftest", "--host", "--suites-dir", str(bench["suites"]), "--gpus", "a,b",
           "--gpu-memory", "30"]  # fmt: skip
    code, said = _ci(bench, *run, "--caches", str(artefact), "--out", str(bench["tmp"] / "run"))
    assert code == 0 and "12 rows: 12 pass" in said, said
    # the control: the same run from empty caches, JIT refused: each configuration's first row compiles its kernel,
    # and errors naming it
    shutil.rmtree(bench["tmp"] / "rt")
    code, said = _ci(bench, *run, "--unbaked", "--out", str(bench["tmp"] / "cold"))
    assert code == 1 and "12 rows: 3 error, 9 pass" in said, said
    from lxml import etree

    messages = [e.get("message") or "" for f in (bench["tmp"] / "cold").glob("junit-*.xml")
                for e in etree.parse(str(f)).getroot().iter("error")]  # fmt: skip
    assert any("JIT refused" in m and "standin_selftestb" in m for m in messages), messages


def test_a_sigterm_keeps_the_finished_groups_and_resume_bakes_the_rest(bench: dict) -> None:
    proc = _bake(bench, "art", gpus="a", wait=False, env={"STANDIN_SECONDS": "1.5"})  # one group at a time
    results = bench["tmp"] / "art" / "bake-results" / "cpu-selftest-0"
    deadline = time.monotonic() + 120
    while _finished(results) < 4 and time.monotonic() < deadline:  # the first group done
        time.sleep(0.2)
    time.sleep(1.0)  # the second group is in flight
    proc.send_signal(signal.SIGTERM)
    said, _ = proc.communicate(timeout=120)
    assert proc.returncode == 143, said
    assert not list((bench["tmp"] / "art").glob("caches-*.tar.gz"))  # a stop packs nothing
    code, said = _bake(bench, "art", "--resume", gpus="a")
    assert code == 0, said
    kept = int(re.search(r"--resume: (\d+) rows? (?:has|have) a result", said).group(1))  # type: ignore[union-attr]
    assert 4 <= kept < 12 and f"[{12 - kept}/{12 - kept}]" in said, said  # the rest, the row stopped in flight too
    assert _kernels(_artefact(said)) == set(CHANGES)


def _finished(results: Path) -> int:
    from ci.run.schedule import dispatch

    return sum(o == "pass" for f in results.glob("junit-*.xml") for o in dispatch.row_outcomes(f).values())


def test_the_deadline_packs_every_finished_configuration_and_a_fresh_host_goes_on_from_it(bench: dict) -> None:
    code, said = _bake(bench, "art", "--deadline", "14", gpus="a", env={"STANDIN_SECONDS": "1.5"})
    assert code == 9, said
    partial = _artefact(said, "partial artefact")
    baked = _kernels(partial)
    assert 1 <= len(baked) < 3, said
    assert "the configurations finished are in the artefact above" in said and "--resume" in said
    from ci.run.schedule import dispatch

    results = bench["tmp"] / "art" / "bake-results" / "cpu-selftest-0"
    finished = {r: o for f in results.glob("junit-*.xml") for r, o in dispatch.row_outcomes(f).items()
                if o == "pass"}  # fmt: skip
    recorded = json.loads(_manifest(partial))["rows"]
    assert recorded == finished and 4 <= len(recorded) < 12, (recorded, said)  # the rows it finished, no other
    assert f"{len(recorded)} rows baked" in said  # 4 or more
    assert {r.split(".")[0] for r in recorded} <= baked  # every row it records has its configuration's kernel
    import shutil

    # a fresh host runs from the partial artefact, JIT refused: told which rows its bake did not reach, and with
    # --rows-baked it runs only the others, every one from its caches
    shutil.rmtree(bench["tmp"] / "rt")
    run = ["run", "cpu", "selftest", "--host", "--suites-dir", str(bench["suites"]), "--gpus", "a",
           "--gpu-memory", "30", "--caches", str(partial)]  # fmt: skip
    code, said = _ci(bench, *run, "--rows-baked", "--out", str(bench["tmp"] / "baked"))
    assert code == 0 and f"{len(recorded)} rows: {len(recorded)} pass" in said, said
    assert f"--rows-baked: {len(recorded)} of the 12 rows chosen" in said and f"{12 - len(recorded)} left out" in said
    shutil.rmtree(bench["tmp"] / "rt")
    code, said = _ci(bench, *run, "--out", str(bench["tmp"] / "all"))
    assert code == 1 and f"the artefact's bake did not reach {12 - len(recorded)} of these 12 rows" in said, said
    assert "JIT refused" in said or " error" in said

    shutil.rmtree(bench["tmp"] / "rt")  # another host: only the partial artefact travels
    code, said = _bake(bench, "art", "--resume", "--from", str(partial), gpus="a")
    assert code == 0, said
    final = _artefact(said)
    assert _kernels(final) == set(CHANGES)
    assert "re-used from --from:" in said and "were the seed's, unchanged" in said
    assert len(json.loads(_manifest(final))["rows"]) == 12 and "12 rows baked" in said


def test_rows_baked_wants_an_artefact_that_records_its_rows(bench: dict) -> None:
    """--rows-baked without --caches, or from an artefact of the AOT bake alone (it warms no row), is refused."""
    code, said = _ci(bench, "run", "cpu", "selftest", "--host", "--rows-baked", "--out", str(bench["tmp"] / "r"))
    assert code == 2 and "--rows-baked chooses the rows a --caches artefact baked" in said, said
    code, said = _ci(bench, "bake", "cpu", "--host", "--aot-only", "--out", str(bench["tmp"] / "aot"))
    if code != 0:  # a host whose triton cannot bake the cpu target's kernel lists: the refusal is asked of main
        pytest.skip(said.splitlines()[-1])
    aot = _artefact(said)
    code, said = _ci(bench, "main", "--host", "--target", "cpu", "--caches", str(aot), "--rows-baked", "--out",
                     str(bench["tmp"] / "m"))  # fmt: skip
    assert code == 2 and "records no rows (an AOT bake warms no row)" in said, said


def _manifest(artefact: Path) -> bytes:
    with tarfile.open(artefact) as tar:
        return tar.extractfile("stackgate-caches.json").read()  # type: ignore[union-attr]


def test_a_build_that_differs_in_python_alone_reuses_the_old_artefact_and_another_build_is_refused(
    bench: dict,
) -> None:
    site = bench["tmp"] / "site"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text('__version__ = "0.26.0"\n')
    (site / "vllm" / "_C.abi3.so").write_bytes(b"\x7fELF compiled part")
    env = {"PYTHONPATH": str(site)}
    code, said = _bake(bench, "one", env=env)
    assert code == 0, said
    first = _artefact(said)
    (site / "vllm" / "__init__.py").write_text('__version__ = "0.26.0"\nPATCHED = True\n')  # a fork's Python edit
    code, said = _ci(bench, "run", "cpu", "selftest", "--host", "--caches", str(first), "--suites-dir",
                     str(bench["suites"]), "--out", str(bench["tmp"] / "r"), env=env)  # fmt: skip
    assert code == 2 and "vllm_build" in said  # a run still wants the artefact of its own build
    code, said = _bake(bench, "two", "--from", str(first), env=env)
    assert code == 0, said
    files = len(json.loads(_manifest(first))["files"])
    line = next(x for x in said.splitlines() if x.startswith("re-used from --from:"))
    reused = int(line.split(":")[1].split()[0])
    assert reused >= files - 5, line  # the seed's files stay as they were (the compile logs grow)
    (site / "vllm" / "_C.abi3.so").write_bytes(b"\x7fELF another compiled part")  # not Python alone any more
    code, said = _bake(bench, "three", "--from", str(first), env=env)
    assert code == 2 and "vllm_native" in said and "made for another host" in said, said


HOOK = """
import os


def warm(row):
    raise AssertionError("a group of rows warms through warm_group")


def warm_group(rows):
    with open(os.environ["STANDIN_LOG"], "a") as fh:
        fh.write(f"{os.getpid()} {' '.join(r.id for r in rows)}\\n")
    return 0
"""


def test_the_image_bakes_warm_up_runs_each_group_of_rows_in_one_process(tmp_path: Path, stack_copy: Path) -> None:
    """The image bake (`python -m harness.warm_run` in the container) warms the rows of a model and change in one
    process, through the suite's warm_group hook, a line per group with the time left."""
    from dataclasses import replace

    from ci.stack import loader, plan, rows_json

    text = (stack_copy / "changes" / "selftest.yaml").read_text()
    (stack_copy / "changes" / "selftestb.yaml").write_text(text.replace("id: selftest\n", "id: selftestb\n"))
    st = loader.load(stack_copy)
    rows = [replace(r, suite="standin") for r in plan.build(st).rows if r.target == "cpu"]
    doc = rows_json.document(st, st.targets["cpu"], "*", rows, image={"ref": "host"}, git_revision="x", timeout_s=60)
    path = rows_json.write(tmp_path / "rows.json", doc)
    (tmp_path / "standin").mkdir()
    (tmp_path / "standin" / "__init__.py").write_text("")
    (tmp_path / "standin" / "warmup.py").write_text(HOOK)
    log = tmp_path / "log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO / "suites")]), "STANDIN_LOG": str(log)}
    done = subprocess.run([sys.executable, "-m", "harness.warm_run", "--rows", str(path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line.split() for line in log.read_text().splitlines()]
    assert len(lines) == 2 and len({pid for pid, *_ in lines}) == 2  # a process a group
    assert sorted(sorted(ids) for _, *ids in lines) == sorted(
        sorted(r.id for r in rows if r.change == c) for c in ("selftest", "selftestb")
    )
    assert "(standin): ok, 4 rows, 1 engine configuration(s)" in done.stdout
    assert "4 rows left, ETA" in done.stdout and "[2/2]" in done.stdout
