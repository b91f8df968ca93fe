"""Nothing is written through a symlink someone planted beside an output: files are made new, exclusively, beside
their target and renamed over it."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from support.fork_site import make_base_site, stack_for_fork
from support.paths import REPO

from ci import cli
from ci.common import files
from ci.fork import bundle, site, source
from ci.run import guard
from ci.stack import loader

VICTIM = "another user's file\n"


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_text(VICTIM)
    return victim


def test_fork_bundle_out_never_writes_through_a_planted_temporary_symlink(
    stack_copy: Path,
    fork_repo,
    tmp_path: Path,
) -> None:
    """The case seen: `ci fork bundle --out X` wrote the bundle into whatever `.X.tmp` pointed at, and left X a
    symlink to it."""
    repo, ids = fork_repo
    path = stack_for_fork(stack_copy, repo, ids)
    victim = _victim(tmp_path)
    out = tmp_path / "fork.tar.gz"
    (tmp_path / f".{out.name}.tmp").symlink_to(victim)
    assert cli.main(["fork", "bundle", "--stack", str(path), "--out", str(out)]) == 0
    assert victim.read_text() == VICTIM
    assert out.is_file() and not out.is_symlink()
    assert bundle.MANIFEST in __import__("tarfile").open(out).getnames()


def test_a_symlink_at_the_output_itself_is_replaced_not_written_through(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    out = tmp_path / "report.json"
    out.symlink_to(victim)
    files.replace(out, "{}\n")
    assert victim.read_text() == VICTIM and not out.is_symlink() and out.read_text() == "{}\n"


def test_the_site_a_bundle_builds_never_writes_through_planted_names(
    stack_copy: Path,
    fork_repo,
    tmp_path: Path,
) -> None:
    """`ci fork build --host` made `.SITE.building` by name, and the harness wrote each file through
    `.<file>.stackgate-tmp` beside it."""
    repo, ids = fork_repo
    st = loader.load(stack_for_fork(stack_copy, repo, ids))
    fork = source.open_fork(st)
    made = bundle.write(fork, bundle.overlay(fork, fork.commit), tmp_path / "f.tar.gz")
    victim_dir = tmp_path / "victim-dir"
    victim_dir.mkdir()
    (victim_dir / "kept.txt").write_text(VICTIM)
    out = tmp_path / "site"
    (tmp_path / f".{out.name}.building").symlink_to(victim_dir)
    base = make_base_site(tmp_path)
    victim = _victim(tmp_path)
    (base / "vllm" / ".spec.py.stackgate-tmp").symlink_to(victim)  # copied into the new site with the tree
    built = site.build(made, base, out)
    assert (out / "vllm" / "spec.py").read_text() == "STEPS = 3\n" and built["changes"]
    assert victim.read_text() == VICTIM
    assert [p.name for p in victim_dir.iterdir()] == ["kept.txt"] and (victim_dir / "kept.txt").read_text() == VICTIM


def test_a_symlink_at_the_run_lock_is_refused_and_its_target_left_alone(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    out.mkdir()
    victim = _victim(tmp_path)
    (out / guard.LOCK).symlink_to(victim)
    assert cli.main(["run", "cpu", "selftest", "--host", "--out", str(out)]) == 4
    assert victim.read_text() == VICTIM
    assert f"{guard.LOCK} there is a symlink" in capsys.readouterr().err


# a temporary name fixed by the target's name: whoever can write the folder can plant a symlink under it first
FIXED_TEMPORARY = re.compile(
    r"""with_suffix\(\s*["']\.(tmp|partial|building)["']\s*\)|with_name\(\s*f["']\.\{[^}]+\}\.[\w-]+["']\s*\)"""
)


@pytest.mark.parametrize(
    "path",
    sorted([*(REPO / "ci").rglob("*.py"), *(REPO / "suites" / "harness").rglob("*.py")]),
    ids=lambda p: str(p.relative_to(REPO)),
)
def test_no_module_writes_through_a_temporary_name_fixed_in_advance(path: Path) -> None:
    assert not FIXED_TEMPORARY.findall(path.read_text())


STOP_MID_WRITE = """
import os, signal, sys
from ci import cli
from ci.common import files
real = os.replace
def replace(src, dst):  # the stop comes once the bundle's temporary file is written, before it is renamed
    if str(dst).endswith(".tar.gz"):
        os.kill(os.getpid(), signal.SIGTERM)
    return real(src, dst)
files.os.replace = replace
sys.exit(cli.main(["fork", "bundle", "--stack", sys.argv[1], "--out", sys.argv[2]]))
"""


def test_a_stop_while_writing_a_fork_bundle_keeps_the_previous_and_leaves_no_temporary_file(
    stack_copy: Path,
    fork_repo,
    tmp_path: Path,
) -> None:
    """SIGTERM's default would end the process between the temporary file and its rename: the half-made bundle's
    `.fork.tar.gz.*.tmp` stayed beside the previous bundle, unsaid."""
    import subprocess
    import sys

    repo, ids = fork_repo
    path = stack_for_fork(stack_copy, repo, ids)
    out = tmp_path / "out" / "fork.tar.gz"
    out.parent.mkdir()
    out.write_bytes(b"the previous bundle")
    done = subprocess.run([sys.executable, "-c", STOP_MID_WRITE, str(path), str(out)], cwd=REPO, text=True,
                          capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)  # fmt: skip
    assert done.returncode == 143, done.stderr
    assert "stopped by SIGTERM while writing the bundle" in done.stderr and "holds what it held before" in done.stderr
    assert "Traceback" not in done.stderr
    assert out.read_bytes() == b"the previous bundle"
    assert [p.name for p in out.parent.iterdir()] == [out.name]  # no temporary file


def test_a_full_disk_while_writing_a_fork_bundle_is_exit_3_naming_it(
    stack_copy: Path,
    fork_repo,
    tmp_path: Path,
    monkeypatch,
    capsys,
) -> None:
    import errno
    import io

    repo, ids = fork_repo
    path = stack_for_fork(stack_copy, repo, ids)
    out = tmp_path / "out" / "fork.tar.gz"

    class Full(io.FileIO):  # the disk fills while the bundle's bytes are written
        def write(self, data) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    real = os.fdopen
    monkeypatch.setattr(files.os, "fdopen", lambda fd, mode, *a: Full(fd, "w") if "w" in mode else real(fd, mode, *a))
    assert cli.main(["fork", "bundle", "--stack", str(path), "--out", str(out)]) == 3
    err = capsys.readouterr().err
    assert "the bundle could not be written to" in err and "(ENOSPC)" in err and "no file was written" in err
    assert "fix: free space there or pass another --out" in err
    assert list(out.parent.iterdir()) == []
