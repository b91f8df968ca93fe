"""The sentinel's public API, without triton or docker: log lines, torn lines, cache-dir diffs."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.paths import REPO, SUITES

_PATH = SUITES / "harness" / "jit_sentinel.py"


@pytest.fixture
def sentinel(monkeypatch, tmp_path):
    spec = importlib.util.spec_from_file_location("stackgate_jit_sentinel_under_test", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setenv("STACKGATE_JIT_LOG", str(tmp_path / "log" / "jit.jsonl"))
    return mod


@pytest.fixture
def log(monkeypatch, sentinel):
    """The reading side (harness.jit_log), over the same log as `sentinel`."""
    monkeypatch.syspath_prepend(str(_PATH.parent.parent))
    return importlib.import_module("harness.jit_log")


def test_listener_logs_real_compiles_only_and_chains(sentinel, log):
    seen = []
    fake_triton = SimpleNamespace(knobs=SimpleNamespace(compilation=SimpleNamespace(listener=None)))
    fake_triton.knobs.compilation.listener = lambda **kw: seen.append(kw["cache_hit"])
    sentinel._attach(fake_triton)
    sentinel._attach(fake_triton)  # idempotent: not wrapped twice
    listener = fake_triton.knobs.compilation.listener
    meta = {"name": "k", "hash": "h1", "target": SimpleNamespace(backend="cuda", arch=121)}
    listener(src=None, metadata=meta, metadata_group={}, times=SimpleNamespace(total=2500), cache_hit=False)
    listener(src=None, metadata=meta, metadata_group={}, times=SimpleNamespace(total=10), cache_hit=True)
    events, offset = log.read_events()
    assert seen == [False, True]
    assert [(e["kernel"], e["target"], e["hash"], e["time_s"]) for e in events] == [("k", "cuda:121", "h1", 0.0025)]
    assert log.compiles(events) == events
    assert log.read_events(offset=offset) == ([], offset)


def test_a_torn_last_line_waits_for_the_next_read(sentinel, log):
    path = Path(sentinel.log_path())
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"kernel": "a"}) + "\n" + '{"kernel": "b"')
    events, offset = log.read_events()
    assert [e["kernel"] for e in events] == ["a"]
    with path.open("a") as fh:
        fh.write("}\n")
    assert [e["kernel"] for e in log.read_events(offset=offset)[0]] == ["b"]


def test_new_files_lists_what_appeared(log, tmp_path):
    cache = tmp_path / "cache"
    (cache / "old").mkdir(parents=True)
    (cache / "old" / "x.bin").write_text("x")
    before = log.snapshot([str(cache)])
    (cache / "new").mkdir()
    (cache / "new" / "y.cubin").write_text("y")
    assert log.new_files(before, [str(cache)]) == [str(cache / "new" / "y.cubin")]


def test_install_defers_until_triton_is_imported(sentinel, monkeypatch):
    monkeypatch.delitem(sys.modules, "triton", raising=False)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    sentinel.install()
    sentinel.install()
    hooks = [f for f in sys.meta_path if isinstance(f, sentinel._TritonImportHook)]
    assert len(hooks) == 1 and "triton" not in sys.modules


def test_the_sentinel_watches_every_cache_the_runtime_root_holds() -> None:
    """Two sides of the boundary name the JIT caches: the sentinel (in the images, watching them) and
    ci.run.artefact.jit_caches (on the host, pointing them into the bake root). They must name the same ones."""
    from ci.run.artefact import jit_caches

    spec = importlib.util.spec_from_file_location("sentinel_names", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert set(mod.CACHE_ENV) == set(jit_caches.CACHE_ENV)


@pytest.mark.parametrize("preset", [None, "/opt/cuda/bin/ptxas"])
def test_every_process_starts_with_one_ptxas_pinned(tmp_path: Path, preset: str | None) -> None:
    """Triton keys every kernel with the ptxas version it reads at its first compile; torch's inductor points
    $TRITON_PTXAS_PATH at torch's own ptxas when it first loads a kernel, unless it is set. The startup hook
    pins Triton's own at interpreter start (and keeps one a user set), so a bake and its runs key alike."""
    import os
    import subprocess

    triton = pytest.importorskip("triton")
    repo = REPO
    env = {k: v for k, v in os.environ.items() if k != "TRITON_PTXAS_PATH"}
    env["PYTHONPATH"] = os.pathsep.join([str(repo / "suites" / "harness" / "startup"), str(repo / "suites")])
    if preset:
        env["TRITON_PTXAS_PATH"] = preset
    code = "import os, sys; print(os.environ.get('TRITON_PTXAS_PATH')); print('triton' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    pinned, imported = out.split()
    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    assert pinned == (preset or str(bundled)) and imported == "False"  # pinned without importing triton


def test_named_kernels_account_for_the_count(monkeypatch):
    """Seven compiles of six kernels: the second specialization is named with its count, not folded away."""
    monkeypatch.syspath_prepend(str(_PATH.parent.parent))
    jit = importlib.import_module("harness.jit_seen")
    names = ["a", "b", "a", "c", "d", "e", "f"]
    seen = jit.Seen(compiles=7, kernels=tuple(dict.fromkeys(names)), cache_new_files=(),
                    events=tuple({"kernel": k} for k in names))  # fmt: skip
    assert seen.named() == ("a ×2", "b", "c", "d", "e", "f")
    assert sum(int(n.partition(" ×")[2] or 1) for n in seen.named()) == seen.compiles
