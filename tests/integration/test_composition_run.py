"""`ci run` for multi-GPU rows: each row gets its own tp x dp GPUs, a row needing more than the host has is
skipped with "needs N GPUs", and NVLink multicast is off in every row's environment (host and container)."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
from junitparser import Skipped
from junitparser.xunit2 import JUnitXml
from support.paths import SUITES

from ci import cli
from ci import engine as container
from ci.run import execute, harness_env, run_spec
from ci.run.schedule import gpus
from ci.stack import loader as stack
from ci.stack import plan

sys.path.insert(0, str(SUITES))  # the harness, as the images import it
from harness import hardware

SMI = "0, GPU-aaaa-0, 9.0\n1, GPU-bbbb-1, 9.0\n2, GPU-cccc-2, 8.0\n3, GPU-dddd-3, 9.0\n"
NVLS = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
    "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "trtllm",  # vLLM's default, mnnvl, allocates NVSwitch multicast memory
}


def _two_gpu_row() -> plan.Row:
    rows = plan.build(stack.load()).select(targets=["cuda-sm90"], changes=["composition"]).rows
    return next(r for r in rows if r.model == "tiny-llama-eagle" and r.tp == 2 and r.backend == "FLASH_ATTN")


def _spec(tmp_path: Path, rows: tuple[plan.Row, ...]) -> run_spec.RunSpec:
    st = stack.load()
    return run_spec.RunSpec(target=st.targets["cuda-sm90"], suite="composition", rows=rows, out=tmp_path,
                           suites_dir=None, timeout_s=240)  # fmt: skip


def test_the_multicast_switches_are_one_set_on_both_sides_of_the_boundary():
    assert container.GPU_ENV == hardware.NO_MULTICAST == NVLS


def test_host_and_container_rows_get_multicast_off(tmp_path: Path):
    spec = _spec(tmp_path, (_two_gpu_row(),))
    assert NVLS.items() <= harness_env.host_env(spec).items()
    assert NVLS.items() <= dict(execute.container_spec(spec, "img", available=[]).env).items()


def test_a_host_run_that_allows_jit_turns_the_jit_failing_switches_off(tmp_path: Path, monkeypatch):
    spec = _spec(tmp_path, (_two_gpu_row(),))
    monkeypatch.delenv("STACKGATE_REFUSE_JIT", raising=False)
    assert harness_env.host_env(spec)["FLASHINFER_DISABLE_JIT"] == "1"  # the target's env: JIT fails loudly
    monkeypatch.setenv("STACKGATE_REFUSE_JIT", "1")
    assert harness_env.host_env(spec)["CUDA_DISABLE_PTX_JIT"] == "1"
    monkeypatch.setenv("STACKGATE_REFUSE_JIT", "0")  # JIT allowed: nothing may fail for want of a prebuilt module
    monkeypatch.setenv("FLASHINFER_DISABLE_JIT", "0")  # FlashInfer refuses for any value: the switch must go
    env = harness_env.host_env(spec)
    assert "FLASHINFER_DISABLE_JIT" not in env and "CUDA_DISABLE_PTX_JIT" not in env
    assert NVLS.items() <= env.items()


def test_cuda_visible_devices_narrows_and_orders_the_host_gpus():
    assert gpus.visible(SMI, None, "9.0") == ["GPU-aaaa-0", "GPU-bbbb-1", "GPU-dddd-3"]
    assert gpus.visible(SMI, "3,0", "9.0") == ["GPU-dddd-3", "GPU-aaaa-0"]
    assert gpus.visible(SMI, "GPU-bbbb,7,0", "9.0") == ["GPU-bbbb-1"]  # CUDA stops at the first unknown entry
    assert gpus.visible(SMI, "", "9.0") == []
    found = hardware.parse_gpus(SMI)
    assert [g.uuid for g in hardware.visible(found, "3,0")] == ["GPU-dddd-3", "GPU-aaaa-0"]
    assert [g.uuid for g in hardware.visible(found, "GPU-bbbb,7,0")] == ["GPU-bbbb-1"]


def test_a_container_gets_as_many_gpus_as_its_largest_row(tmp_path: Path):
    spec = _spec(tmp_path, (_two_gpu_row(),))
    four = ["GPU-a", "GPU-b", "GPU-c", "GPU-d"]
    c = execute.container_spec(spec, "img", available=four)
    assert c.gpu_ids == ("GPU-a", "GPU-b")
    argv = c.argv()
    assert argv[argv.index("--gpus") + 1] == '"device=GPU-a,GPU-b"'
    (request,) = c.sdk_kwargs()["device_requests"]
    assert request["DeviceIDs"] == ["GPU-a", "GPU-b"] and request["Count"] in (None, 0)
    # fewer than the row needs: every one of them (the harness inside skips the row, saying why)
    assert execute.container_spec(spec, "img", available=["GPU-a"]).gpu_ids == ("GPU-a",)
    # no list known (no nvidia-smi here): every GPU, as before
    everything = execute.container_spec(spec, "img", available=[])
    assert everything.gpu_ids == () and everything.argv()[everything.argv().index("--gpus") + 1] == "all"


def test_each_row_gets_its_own_first_gpus(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(hardware, "nvidia_gpus", lambda: hardware.parse_gpus(SMI))
    sm90 = {"id": "cuda-sm90", "family": "cuda", "nvidia_compute_capability": "9.0"}
    assert hardware.assign(sm90, 2) == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert hardware.assign(sm90, 1) == {"CUDA_VISIBLE_DEVICES": "0"}
    assert hardware.assign(sm90, 3) == {"CUDA_VISIBLE_DEVICES": "0,1,3"}  # the 8.0 GPU is not the target's
    assert hardware.assign({"id": "cpu", "family": "cpu"}, 1) == {}
    assert hardware.absent_reason(sm90, 3) is None
    assert "row needs 8 GPUs" in (hardware.absent_reason(sm90, 8) or "")


ENV_TEST = """
import json, os
import pytest

@pytest.mark.track("composition")
def test_env(row, record_property):
    keys = ("CUDA_VISIBLE_DEVICES", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
            "VLLM_FLASHINFER_ALLREDUCE_BACKEND")
    record_property("stackgate.env", json.dumps({k: os.environ.get(k) for k in keys}))
"""


def _fake_smi(bin_dir: Path, csv: str) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\ncase \"$*\" in *index*) printf '{csv}';; *) printf '%s\\n' 9.0;; esac\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)


@pytest.mark.parametrize("host_gpus", [1, 2])
def test_a_two_gpu_row_runs_on_two_gpus_and_is_skipped_on_one(tmp_path, monkeypatch, host_gpus):
    row = _two_gpu_row()
    tree = tmp_path / "suites"
    (tree / "composition").mkdir(parents=True)
    (tree / "composition" / "test_env.py").write_text(ENV_TEST)
    csv = "".join(f"{i + 2}, GPU-{i}{i}{i}{i}, 9.0\\n" for i in range(host_gpus))  # a host's GPUs 2 and 3
    _fake_smi(tmp_path / "bin", csv)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("STACKGATE_RUNTIME_CACHES", str(tmp_path / "caches"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    out = tmp_path / "out"
    rc = cli.main(["run", "cuda-sm90", "composition", "--host", "--unbaked", "--suites-dir", str(tree),
                   "--rows", row.id, "--out", str(out)])  # fmt: skip
    (junit,) = out.glob("junit-cuda-sm90-composition-0*.xml")  # this host has the target's GPUs: rows are scheduled
    (case,) = list(next(iter(JUnitXml.fromfile(str(junit)))))
    if host_gpus == 1:
        assert rc == 6
        (skip,) = [r for r in case.result if isinstance(r, Skipped)]
        assert "needs 2 GPUs" in skip.message
    else:
        assert rc == 0, case.result
        env = json.loads(next(p.value for p in case.properties() if p.name == "stackgate.env"))
        assert env == {"CUDA_VISIBLE_DEVICES": "2,3", **NVLS}


def test_a_run_that_allows_jit_records_the_env_its_rows_got_for_the_repro(tmp_path: Path, monkeypatch):
    from ci.run.rerun import lines

    row = _two_gpu_row()
    monkeypatch.setenv("STACKGATE_REFUSE_JIT", "0")
    cli.main(["run", "cuda-sm90", "composition", "--host", "--rows", row.id, "--out", str(tmp_path)])
    env = json.loads((tmp_path / "rows.json").read_text())["target"]["env"]
    assert env["STACKGATE_REFUSE_JIT"] == "0" and "FLASHINFER_DISABLE_JIT" not in env
    assert env["VLLM_USE_AOT_COMPILE"] == "0"  # the target's other switches stay
    line = lines.from_rows_json(stack.load(), tmp_path / "rows.json", row.id).host
    assert "STACKGATE_REFUSE_JIT=0" in line and "FLASHINFER_DISABLE_JIT" not in line
    monkeypatch.delenv("STACKGATE_REFUSE_JIT")
    cli.main(["run", "cuda-sm90", "composition", "--host", "--rows", row.id, "--out", str(tmp_path / "refused")])
    assert (
        json.loads((tmp_path / "refused" / "rows.json").read_text())["target"]["env"]["FLASHINFER_DISABLE_JIT"] == "1"
    )


def test_a_row_names_the_cards_it_runs_on(monkeypatch: pytest.MonkeyPatch):
    smi = (
        "0, GPU-aaaa-0, 9.0, NVIDIA H100 80GB HBM3, 81559 MiB, 580.159.04\n"
        "1, GPU-bbbb-1, 9.0, NVIDIA H100 80GB HBM3, 81559 MiB, 580.159.04\n"
        "2, GPU-cccc-2, 8.0, NVIDIA A100-SXM4-80GB, 81920 MiB, 580.159.04\n"
    )
    monkeypatch.setattr(hardware, "nvidia_gpus", lambda: hardware.parse_gpus(smi))
    sm90 = {"id": "cuda-sm90", "family": "cuda", "nvidia_compute_capability": "9.0"}
    # the target's label ("H200") is not the card: the driver's own name, memory and driver are
    assert hardware.cards(sm90, 1) == "NVIDIA H100 80GB HBM3 (81559 MiB, driver 580.159.04)"
    assert hardware.cards(sm90, 2) == "2 x NVIDIA H100 80GB HBM3 (81559 MiB, driver 580.159.04)"
    assert hardware.cards({"id": "cpu", "family": "cpu"}, 1) == ""
    # an nvidia-smi that gives only the three old fields still parses; the card is then named by its capability
    monkeypatch.setattr(hardware, "nvidia_gpus", lambda: hardware.parse_gpus(SMI))
    assert hardware.cards(sm90, 1) == "NVIDIA GPU of compute capability 9.0"
