from __future__ import annotations

import pytest

from ci.common.errors import UsageError
from ci.run import host
from ci.stack import loader as stack


def test_no_accelerator_means_the_fallback_target(monkeypatch):
    monkeypatch.delenv(host.ENV_OVERRIDE, raising=False)
    monkeypatch.setattr(host, "nvidia_compute_capabilities", set)
    monkeypatch.setattr(host, "amdgpu_gfx_names", set)
    assert host.detect(stack.load()).id == "cpu"


@pytest.mark.parametrize(("caps", "gfx", "want"), [({"12.1"}, set(), "cuda-sm121a"), ({"9.0"}, set(), "cuda-sm90"),
                                                   (set(), {"gfx1151"}, "rocm-gfx1151")])  # fmt: skip
def test_accelerators_pick_their_target(monkeypatch, caps, gfx, want):
    monkeypatch.delenv(host.ENV_OVERRIDE, raising=False)
    monkeypatch.setattr(host, "nvidia_compute_capabilities", lambda: caps)
    monkeypatch.setattr(host, "amdgpu_gfx_names", lambda: gfx)
    assert host.detect(stack.load()).id == want


def test_override_must_name_a_target(monkeypatch):
    monkeypatch.setenv(host.ENV_OVERRIDE, "tpu")
    with pytest.raises(UsageError):
        host.detect(stack.load())


def test_kfd_topology_gfx_names(tmp_path, monkeypatch):
    node = tmp_path / "1"
    node.mkdir()
    (node / "properties").write_text("cpu_cores_count 0\ngfx_target_version 110501\n")
    (tmp_path / "0").mkdir()
    (tmp_path / "0" / "properties").write_text("gfx_target_version 0\n")
    monkeypatch.setattr(host, "_KFD_NODES", tmp_path)
    assert host.amdgpu_gfx_names() == {"gfx1151"}
