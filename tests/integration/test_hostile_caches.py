"""A cache runs no code another user could have put there, and its key names one set of files only."""

from __future__ import annotations

import hashlib
import marshal
import os
import pickle
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
from support.paths import REPO
from support.report_helpers import rows, write_rows

from ci.stack import cache

OTHER_UID = 65534  # nobody


class _Payload:
    """Unpickled, it writes `marker`: what a planted cache file would do as the user who reads it."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _plant(folder: Path, stack: Path, marker: Path) -> None:
    """A stack pickle under the name and key `ci plan` reads, and the report template's compiled code, both running
    `touch marker` as they load."""
    env = {**os.environ, "STACKGATE_CACHE": str(folder)}
    old = os.environ.copy()
    os.environ.update(env)
    try:
        path, key = cache._file(stack), cache.key(stack)
    finally:
        os.environ.clear()
        os.environ.update(old)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(key + pickle.dumps(_Payload(marker)))
    # Jinja's bytecode file: its magic, the pickled checksum of the source, then the marshalled module code
    templates = REPO / "ci" / "report" / "templates"
    name = "report.html.j2"
    bcc = jinja2.FileSystemBytecodeCache(str(folder / "jinja"))
    key_j = bcc.get_cache_key(name, str(templates / name))
    source = (templates / name).read_text()
    (folder / "jinja").mkdir(parents=True, exist_ok=True)
    code = compile(f"import os; os.system('touch {marker}')", "planted", "exec")
    (folder / "jinja" / (bcc.pattern % key_j)).write_bytes(
        jinja2.bccache.bc_magic + pickle.dumps(bcc.get_source_checksum(source), 2) + marshal.dumps(code)
    )


def _chown_tree(path: Path, uid: int) -> None:
    for p in [path, *path.rglob("*")]:
        os.lchown(p, uid, uid)


def _world_writable(tmp: Path) -> Path:
    folder = tmp / "shared"
    folder.mkdir()
    os.chmod(folder, 0o777)
    return folder


def _other_users_symlink(tmp: Path) -> Path:
    real = tmp / "real"
    real.mkdir(mode=0o700)
    link = tmp / "link"
    link.symlink_to(real)
    os.lchown(link, OTHER_UID, OTHER_UID)
    return link


def _run(*args: str, cache_dir: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STACKGATE_CACHE": str(cache_dir), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "ci", *args], env=env, cwd=cwd, capture_output=True, text=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="planting files as another user takes root")
@pytest.mark.parametrize(
    ("where", "said"),
    [
        ("a-0777-folder-of-another-user", f"is owned by uid {OTHER_UID}"),
        ("a-0777-folder-of-ones-own", "is writable by others (mode 0777)"),
        ("another-users-symlink", f"is a symlink owned by uid {OTHER_UID}"),
    ],
)
def test_a_planted_stack_pickle_or_compiled_template_never_runs(
    tmp_path: Path, stack_copy: Path, where: str, said: str
) -> None:
    marker = tmp_path / "ran"
    if where.startswith("a-0777"):
        folder = _world_writable(tmp_path)
        _plant(folder, stack_copy, marker)
        if "another-user" in where:
            _chown_tree(folder, OTHER_UID)
    else:
        folder = _other_users_symlink(tmp_path)
        _plant(folder, stack_copy, marker)  # the folder itself is root's, mode 0700: only the symlink is not
    plan = _run("--stack", str(stack_copy), "plan", "--change", "selftest", cache_dir=folder, cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    [junit] = write_rows(tmp_path / "j", rows("selftest"))
    report = _run("--stack", str(stack_copy), "report", str(junit), "--out", str(tmp_path / "r"), cache_dir=folder,
                  cwd=tmp_path)  # fmt: skip
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "r" / "report.html").is_file()
    assert not marker.exists()
    for done in (plan, report):  # said once a command, naming the folder and why
        assert done.stderr.count("warning:") == 1, done.stderr
        assert said in done.stderr


def test_a_cache_folder_of_ones_own_is_used_and_says_nothing(tmp_path: Path, stack_copy: Path) -> None:
    folder = tmp_path / "mine"
    for _ in range(2):
        done = _run("--stack", str(stack_copy), "plan", "--change", "selftest", cache_dir=folder, cwd=tmp_path)
        assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    assert len(list((folder / "stack").glob("*.pickle"))) == 1
    assert oct(folder.stat().st_mode & 0o777) == "0o700"


def test_the_cache_key_frames_names_and_contents_so_no_two_file_sets_share_it(tmp_path: Path) -> None:
    """With NUL between a name and its bytes, {a: "x\\0b\\0y"} and {a: "x", b: "y"} were one key."""
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    (one / "a").write_bytes(b"x\0b\0y")
    (two / "a").write_bytes(b"x")
    (two / "b").write_bytes(b"y")
    assert cache._files(hashlib.sha256(), one, "*").digest() != cache._files(hashlib.sha256(), two, "*").digest()


def test_a_stack_whose_files_differ_is_never_served_a_kept_one(tmp_path: Path, stack_copy: Path, monkeypatch) -> None:
    """The case seen: two consecutive files of a valid stack, kept, then joined into the first (NUL, the second's name,
    NUL, its bytes) and the second removed: the old framing made the same key, and `ci plan` read the valid stack
    back; loaded anew, the joined file is refused."""
    from ci.common.errors import StackError
    from ci.stack import loader

    monkeypatch.setenv("STACKGATE_CACHE", str(tmp_path / "c"))
    loader.load(stack_copy)
    files = sorted(p for p in stack_copy.glob("**/*") if p.is_file())
    first, second = files[-2], files[-1]
    joined = b"\0" + str(second.relative_to(stack_copy)).encode() + b"\0" + second.read_bytes()
    first.write_bytes(first.read_bytes() + joined)
    second.unlink()
    with pytest.raises(StackError):
        loader.load(stack_copy)
