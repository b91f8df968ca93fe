"""`ci lock` writes a target's requirements and its lock together or not at all: uv missing is said in one line
before any file is touched; a resolve that fails leaves both as they were; one that succeeds replaces both."""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

import pytest
from support.paths import REPO

from ci.cli import main
from ci.common.errors import NotHere, UsageError
from ci.images import lock
from ci.stack import loader


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A copy of the repository's locks to resolve into."""
    shutil.copytree(REPO / "containers" / "locks", tmp_path / "containers" / "locks")
    return tmp_path


def _uv(where: Path, body: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `uv` on PATH (and no uv package) that runs `body` in bash, with $out the -o file."""
    where.mkdir()
    script = where / "uv"
    script.write_text(f'#!/bin/bash\nwhile [ "$1" != "-o" ]; do shift; done; out=$2\n{body}\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{where}:/usr/bin:/bin")
    monkeypatch.setitem(sys.modules, "uv", None)


def test_without_uv_the_lock_verb_says_so_in_one_line_and_changes_no_file(root, monkeypatch, capsys) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setitem(sys.modules, "uv", None)  # no uv package either
    target = loader.load().targets["cuda-sm121a"]
    before = _digest(root / "containers" / "locks")
    with pytest.raises(UsageError) as info:
        lock.lock(target, root=root, vllm="0.27.1")
    assert info.value.message == "ci lock resolves with uv, which this host lacks: no file was changed"
    assert "pip install uv" in info.value.hint
    assert _digest(root / "containers" / "locks") == before
    repo_before = _digest(REPO / "containers" / "locks")
    assert main(["lock", "cuda-sm121a", "--vllm", "0.27.1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ci lock resolves with uv") and len(err.splitlines()) == 2  # the line and its fix
    assert _digest(REPO / "containers" / "locks") == repo_before


def test_a_failed_resolve_leaves_requirements_and_lock_as_they_were(root, tmp_path, monkeypatch) -> None:
    _uv(tmp_path / "bin", 'echo "no solution for vllm==0.27.1" >&2; echo partial > "$out"; exit 1', monkeypatch)
    target = loader.load().targets["cuda-sm121a"]
    before = _digest(root / "containers" / "locks")
    with pytest.raises(NotHere, match="no file was changed"):
        lock.lock(target, root=root, vllm="0.27.1")
    assert _digest(root / "containers" / "locks") == before


def test_a_resolve_replaces_both_together(root, tmp_path, monkeypatch) -> None:
    _uv(
        tmp_path / "bin",
        'grep -q "^vllm==0.27.1$" containers/locks/cuda.in && echo "vllm==0.27.1" > "$out"',
        monkeypatch,
    )
    target = loader.load().targets["cuda-sm121a"]
    written = lock.lock(target, root=root, vllm="0.27.1")
    locks = root / "containers" / "locks"
    assert written == [locks / "cuda-sm121a.txt", locks / "cuda.in"]
    assert "vllm==0.27.1\n" in (locks / "cuda.in").read_text() and "torch==" not in (locks / "cuda.in").read_text()
    text = (locks / "cuda-sm121a.txt").read_text()
    assert text.startswith("# Hashed lock for target cuda-sm121a") and text.endswith("vllm==0.27.1\n")
    assert lock.locked_vllm(target, root) == "0.27.1"
    assert not list(locks.glob(".*.tmp"))
