"""A stop or a full disk ends a command in words that say what was done: Ctrl-C at any moment of a host run (as a
terminal sends it, to the whole process group) prints no traceback from a harness still starting, and a bake
stopped or out of space while packing leaves its --out as it was, no temporary file in it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.paths import REPO


def _own_group() -> None:
    """The child leads a process group of its own (a terminal's foreground job), SIGINT at its default."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.setpgrp()


@pytest.mark.parametrize("delay", [0.15 + 0.03 * n for n in range(16)], ids=lambda d: f"{d:.2f}s")
def test_ctrl_c_to_the_group_at_any_moment_of_a_host_run_prints_no_traceback(delay: float, tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "ci", "run", "cpu", "selftest", "--host", "--out", str(tmp_path / "o")]
    proc = subprocess.Popen(argv, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, preexec_fn=_own_group)  # fmt: skip
    time.sleep(delay)
    os.killpg(proc.pid, signal.SIGINT)
    said, _ = proc.communicate(timeout=240)
    assert "Traceback" not in said and "Fatal Python error" not in said, said
    assert proc.returncode in (130, -signal.SIGINT, 0, 6), said  # 0/6: it ended before the signal came


PACK = """
import sys, time
from pathlib import Path
from ci.run import bake_verb
from ci.stack import loader
target = loader.load().targets["cpu"]
print("packing", flush=True)
sys.exit(bake_verb._packed(target, Path(sys.argv[1]), "warm", {}, time.monotonic(), {}, rows={}))
"""


@pytest.fixture
def warm_root(tmp_path: Path, monkeypatch) -> Iterator[Path]:
    """A caches root of 96 MB that does not compress: packing it takes a few seconds."""
    root = tmp_path / "root"
    (root / "cpu" / "triton").mkdir(parents=True)
    for n in range(12):
        (root / "cpu" / "triton" / f"k{n}.bin").write_bytes(os.urandom(8 << 20))
    monkeypatch.setenv("STACKGATE_RUNTIME_CACHES", str(root))
    yield root


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_stop_while_packing_a_bake_leaves_no_temporary_file_and_says_so(
    warm_root: Path, tmp_path: Path, sig: int, code: int
) -> None:
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", PACK, str(out)], cwd=REPO, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)},
                            preexec_fn=_own_group)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "packing"
    time.sleep(1.0)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    assert f"stopped by {signal.Signals(sig).name} while packing the artefact" in err and "before anything" not in err
    assert "--resume" in err and "Traceback" not in err
    assert list(out.iterdir()) == []  # no artefact, no temporary file


def test_a_full_disk_while_packing_a_bake_is_exit_3_naming_it(warm_root: Path, tmp_path: Path) -> None:
    from ci.common.errors import BuildError
    from ci.run import bake_verb
    from ci.stack import loader

    disk = tmp_path / "disk"
    disk.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        with pytest.raises(BuildError) as err:
            bake_verb._packed(loader.load().targets["cpu"], disk / "out", "warm", {}, time.monotonic(), {}, rows={})
        assert "No space left on device (ENOSPC)" in err.value.message and err.value.exit_code == 3
        assert "--resume" in err.value.hint
        assert list((disk / "out").iterdir()) == []
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_lock_that_fails_to_resolve_leaves_the_previous_lock_whole(tmp_path: Path, monkeypatch) -> None:
    """uv writes its answer beside the lock; the lock is replaced only once resolved (a resolver that writes half an
    answer and fails, or a stop, leaves the previous one)."""
    from ci.common.errors import StackgateError
    from ci.images import build, lock
    from ci.stack import loader

    target = loader.load().targets["cuda-sm90"]
    previous = build.lock_path(target, tmp_path)
    previous.parent.mkdir(parents=True)
    previous.write_text("# the previous lock\nvllm==0.26.0 --hash=sha256:00\n")
    requirements = lock.requirements(target, tmp_path)
    requirements.write_text("vllm==0.26.0\n")
    uv = tmp_path / "uv"
    uv.write_text('#!/bin/sh\nfor a; do out="$a"; done\nprintf "half an answer" > "$out"\nexit 1\n')
    uv.chmod(0o755)
    monkeypatch.setattr(lock.shutil, "which", lambda name: str(uv))
    with pytest.raises(StackgateError):
        lock.lock(target, root=tmp_path)
    assert previous.read_text() == "# the previous lock\nvllm==0.26.0 --hash=sha256:00\n"
    assert requirements.read_text() == "vllm==0.26.0\n"
    assert sorted(p.name for p in previous.parent.iterdir()) == sorted([previous.name, requirements.name])  # no temp
