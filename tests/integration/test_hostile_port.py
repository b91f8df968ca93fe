"""`ci fork port` where the world is hostile: a stop at any moment says what was made and leaves no temporary file, a
checkout that cannot be written or a full disk is said in words with nothing left half-made, and the objects a port
writes are written by git, with the permissions the repository asks for. test_port_readiness's world, made by git
itself; git is the real one, put behind a `git` on PATH where a test needs to know when a step is reached."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.git_repos import ENV
from support.paths import REPO
from test_port_readiness import make_world

GIT = shutil.which("git")


@pytest.fixture
def world(tmp_path: Path, stack_copy: Path):
    return make_world(tmp_path / "vllm", stack_copy)


def _argv(stack: Path, repo, change: str = "46514") -> list[str]:
    return [sys.executable, "-m", "ci", "--stack", str(stack), "fork", "port", change, "--fork", str(repo.path),
            "--ref", "fork"]  # fmt: skip


def _left(tmp: Path, repo) -> list[str]:
    """What a port may leave behind: scratch folders in $TMPDIR, temporary files in the object store."""
    mine = [p.name for p in tmp.iterdir() if p.name.startswith("stackgate-")]
    objects = repo.path / ".git" / "objects"
    return mine + [str(p) for p in objects.rglob("*") if p.name.startswith((".stackgate-", "tmp_obj_", "tmp_pack_"))]


def _git_that_waits(tmp_path: Path, on: str, after: bool) -> tuple[dict[str, str], Path]:
    """An environment whose `git` is the real one, touching a mark when a git process with `on` among its arguments
    starts (then waiting there, `after`=False) or has ended (`after`=True)."""
    bin_dir, mark = tmp_path / "bin", tmp_path / "reached"
    bin_dir.mkdir()
    wait = "" if after else "sleep 60 & wait $!\n"
    run = f'"{GIT}" "$@"; rc=$?; touch "{mark}"; exit $rc' if after else f'touch "{mark}"\n{wait}exec "{GIT}" "$@"'
    (bin_dir / "git").write_text(f'#!/bin/sh\ncase " $* " in *" {on} "*) {run};; esac\nexec "{GIT}" "$@"\n')
    (bin_dir / "git").chmod(0o755)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    return {**ENV, "PATH": f"{bin_dir}:{os.environ['PATH']}", "TMPDIR": str(tmp), "PYTHONPATH": str(REPO)}, mark


def _stopped(argv: list[str], env: dict[str, str], mark: Path, signum: int) -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not mark.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert mark.exists(), proc.communicate()
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the waiting shell's sleep, where it outlived the stop
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


# 8. A stop says what was made, and leaves no temporary file


def test_a_sigterm_mid_port_makes_nothing_and_leaves_no_scratch_folder(world, tmp_path) -> None:
    repo, _, stack = world
    env, mark = _git_that_waits(tmp_path, "apply", after=False)  # the three-way attempt, in a scratch index
    refs = repo.git("for-each-ref")
    done = _stopped(_argv(stack, repo), env, mark, signal.SIGTERM)
    assert done.returncode == 143 and "Traceback" not in done.stderr, done.stderr
    assert "stopped by SIGTERM: nothing was made; no temporary file is left" in (
        done.stderr)  # fmt: skip
    assert repo.git("for-each-ref") == refs and _left(tmp_path / "tmp", repo) == []


def test_a_ctrl_c_after_the_branch_exists_says_the_branch_was_made(world, tmp_path) -> None:
    repo, _, stack = world
    env, mark = _git_that_waits(tmp_path, "update-ref", after=True)
    done = _stopped(_argv(stack, repo), env, mark, signal.SIGINT)
    assert done.returncode == 130 and "Traceback" not in done.stderr, done.stderr
    tip = repo.git("rev-parse", "stackgate/port-46514")
    assert f"stopped by SIGINT: the branch stackgate/port-46514 ({tip[:12]}) was made and holds the port" in (
        done.stderr)  # fmt: skip
    assert "before anything ran" not in done.stderr and _left(tmp_path / "tmp", repo) == []


# 9. A checkout that cannot be written, or a full disk: said in words, nothing left half-made


@contextlib.contextmanager
def _read_only(path: Path):
    """`path` and everything under it made unwritable: by its modes, or, for root (whom modes do not stop), by the
    immutable attribute; the test is skipped where neither holds."""
    paths = [path, *path.rglob("*")]
    modes = {p: p.stat().st_mode for p in paths}
    for p in paths:
        p.chmod(stat.S_IMODE(modes[p]) & ~0o222)
    immutable = False
    try:
        if os.access(path, os.W_OK):  # root
            done = subprocess.run(["chattr", "-R", "+i", str(path)], capture_output=True)
            immutable = done.returncode == 0
            probe = path / ".probe"
            with contextlib.suppress(OSError):
                probe.mkdir()
                probe.rmdir()
                pytest.skip("no way to make a folder unwritable here")
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-R", "-i", str(path)], capture_output=True)
        for p in paths:
            p.chmod(stat.S_IMODE(modes[p]))


def test_a_read_only_checkout_is_said_and_nothing_is_left(world, tmp_path) -> None:
    repo, _, stack = world
    refs = repo.git("for-each-ref")
    objects = repo.path / ".git" / "objects"
    before = sorted(str(p) for p in objects.rglob("*"))
    with _read_only(objects):
        done = subprocess.run(_argv(stack, repo), cwd=REPO, capture_output=True, text=True, env=ENV, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"{repo.path} cannot be written (" in done.stderr and "a checkout you can write" in done.stderr
    assert repo.git("for-each-ref") == refs and sorted(str(p) for p in objects.rglob("*")) == before


def test_a_full_disk_is_exit_3_and_nothing_is_left(tmp_path: Path, stack_copy: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("no small file system can be mounted here")
    try:
        repo, _, stack = make_world(disk / "vllm", stack_copy)
        refs = repo.git("for-each-ref")
        filler = disk / "filler"
        with contextlib.suppress(OSError), open(filler, "wb") as fh:  # the disk full, to its last block
            while True:
                fh.write(b"\0" * 4096)
                fh.flush()
        done = subprocess.run(_argv(stack, repo), cwd=REPO, capture_output=True, text=True, env=ENV, timeout=120)
        assert done.returncode == 3 and "Traceback" not in done.stderr, done.stderr
        assert "no space left on device" in done.stderr and "free space" in done.stderr
        filler.unlink()
        assert repo.git("for-each-ref") == refs and _left(tmp_path, repo) == []
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


# 10. The objects a port writes honour core.sharedRepository


def test_a_port_in_a_group_shared_repository_writes_objects_the_group_can_write(world, tmp_path) -> None:
    repo, _, stack = world
    repo.git("config", "core.sharedRepository", "group")
    objects = repo.path / ".git" / "objects"
    before = {p for p in objects.iterdir()}
    done = subprocess.run(_argv(stack, repo), cwd=REPO, capture_output=True, text=True, env=ENV, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    made = [p for p in objects.iterdir() if p not in before and len(p.name) == 2]
    assert made, "the port wrote no object folder of its own"
    for folder in made:
        assert stat.S_IMODE(folder.stat().st_mode) & 0o2070 == 0o2070, oct(folder.stat().st_mode)  # g+rwx, setgid
        for f in folder.iterdir():
            assert stat.S_IMODE(f.stat().st_mode) & 0o040, oct(f.stat().st_mode)  # the group reads it
