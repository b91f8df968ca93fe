"""Reproducible images without an engine: the layer rewrite, the config's times, the Debian package lock and
what `ci verify --rebuild` says about two layers that differ. The builds themselves are test_cpu_image_build.py's."""

from __future__ import annotations

import io
import json
import re
import shutil
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest
from support.paths import REPO

from ci.common.errors import BuildError, NotHere
from ci.images import normalize, rebuild
from ci.images.debian import debs
from ci.stack import loader

EPOCH = 1_700_000_000


def _layer(entries: list[tuple[str, bytes | str | None]], *, mtime: int, order: list[int] | None = None) -> bytes:
    """A layer tar: (name, bytes) a file, (name, None) a directory, (name, '->target') a hard link."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for i in order or range(len(entries)):
            name, data = entries[i]
            info = tarfile.TarInfo(name)
            info.mtime, info.uname, info.uid = mtime, "builder", 0
            info.pax_headers = {"atime": str(mtime + 0.5), "SCHILY.xattr.user.kept": "yes"}
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            elif isinstance(data, str):
                info.type, info.linkname = tarfile.LNKTYPE, data.removeprefix("->")
                tar.addfile(info)
            else:
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


ENTRIES = [
    ("opt", None),
    ("opt/z.py", b"print('z')\n"),
    ("opt/b.txt", b"same inode\n"),
    ("opt/a.txt", "->opt/b.txt"),  # a hard link that sorts before the file it names
    ("opt/dir", None),
]


def test_a_layer_is_rewritten_to_the_same_bytes_whatever_its_order_and_times(tmp_path: Path) -> None:
    one, two = tmp_path / "one.tar", tmp_path / "two.tar"
    first = normalize.rewrite_layer(io.BytesIO(_layer(ENTRIES, mtime=EPOCH + 99)), one, EPOCH)
    second = normalize.rewrite_layer(io.BytesIO(_layer(ENTRIES, mtime=EPOCH - 5, order=[4, 2, 3, 1, 0])), two, EPOCH)
    assert first == second and one.read_bytes() == two.read_bytes()
    assert first == __import__("hashlib").sha256(one.read_bytes()).hexdigest()  # the diff id is the tar's hash
    with tarfile.open(one) as tar:
        members = tar.getmembers()
        assert [m.name for m in members] == sorted(m.name for m in members)
        assert {m.mtime for m in members} == {EPOCH} and {m.uname for m in members} == {""}
        assert all("atime" not in m.pax_headers for m in members)
        assert {m.pax_headers.get("SCHILY.xattr.user.kept") for m in members} == {"yes"}
        link = tar.getmember("opt/b.txt")
        assert link.islnk() and link.linkname == "opt/a.txt"  # the group's first name holds the data now
        assert tar.extractfile("opt/a.txt").read() == b"same inode\n"  # type: ignore[union-attr]
    out = tmp_path / "out"
    with tarfile.open(one) as tar:
        tar.extractall(out, filter="tar")
    assert (out / "opt" / "b.txt").read_bytes() == b"same inode\n"
    assert (out / "opt" / "a.txt").stat().st_ino == (out / "opt" / "b.txt").stat().st_ino


def test_the_config_takes_the_commit_time_and_keeps_the_bases_history() -> None:
    config = {
        "created": "2031-01-01T10:00:00.123456789Z",
        "config": {"Labels": {"b": "1", "a": "2"}},
        "history": [
            {"created": "2020-05-05T00:00:00Z", "created_by": "mmdebstrap"},
            {"created": "2031-01-01T09:59:00.5Z", "created_by": "RUN x"},
            {"created": "2019-01-01T00:00:00Z", "created_by": "COPY y", "empty_layer": True},  # from the cache
        ],
        "rootfs": {"type": "layers", "diff_ids": ["sha256:old"]},
    }
    out = json.loads(normalize.config_bytes(config, ["sha256:base", "sha256:new"], EPOCH, base_history=1))
    assert out["created"] == "2023-11-14T22:13:20Z"
    assert [h["created"] for h in out["history"]] == ["2020-05-05T00:00:00Z", *["2023-11-14T22:13:20Z"] * 2]
    assert out["rootfs"]["diff_ids"] == ["sha256:base", "sha256:new"]
    again = dict(config, config={"Labels": {"a": "2", "b": "1"}})  # the same config, keys in another order
    ids = ["sha256:base", "sha256:new"]
    assert normalize.config_bytes(again, ids, EPOCH, base_history=1) == normalize.config_bytes(
        config, ids, EPOCH, base_history=1
    )


@pytest.fixture
def cpu():
    return loader.load().targets["cpu"]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "containers" / "locks").mkdir(parents=True)
    shutil.copy(debs.lock_path(loader.load().targets["cpu"], REPO),
                tmp_path / "containers" / "locks")  # fmt: skip
    return tmp_path


def test_the_committed_base_locks_match_their_recipes() -> None:
    here = REPO
    for target in loader.load().targets.values():
        if target.bootstrap is not None:
            lock = debs.read(target, here)
            names = {name for name, _, _ in lock.packages}
            assert set(target.bootstrap.include) <= names, target.id
            assert {"libc6", "python3.11"} <= names and lock.digest.startswith("sha256:")


def test_a_base_config_is_the_same_for_one_lock_under_any_file_name(cpu, root: Path) -> None:
    """A base is found by its lock's hash: one made from another target's lock file of the same bytes (the cuda
    stand-in copies cuda-sm90's) must have the very id a rebuild from this target's file gets."""
    from ci.images.debian import bootstrap

    lock = debs.read(cpu, root)
    other = replace(lock, path=root / "containers" / "locks" / "cuda-standin.debs.txt")
    diff_id = "sha256:" + "0" * 64
    assert bootstrap.config(cpu, lock, diff_id) == bootstrap.config(cpu, other, diff_id)
    assert lock.digest[:19].encode() in bootstrap.config(cpu, lock, diff_id)
    # a base made by an older config is not found by this one's tag
    older = replace(cpu, platform="linux/arm64")
    assert bootstrap.lock_tag(cpu, lock) == bootstrap.lock_tag(cpu, other) != bootstrap.lock_tag(older, lock)


def test_a_lock_for_another_recipe_or_none_at_all_is_refused(cpu, root: Path) -> None:
    edited = replace(cpu, bootstrap=replace(cpu.bootstrap, include=(*cpu.bootstrap.include, "gcc")))
    with pytest.raises(BuildError, match=r"cpu.debs.txt: resolved for recipe \w+, but stack/targets.yaml") as exc:
        debs.read(edited, root)
    assert exc.value.hint.startswith("python -m ci lock cpu --base")
    with pytest.raises(NotHere, match=r"containers/locks/cuda-sm90.debs.txt: no Debian package lock"):
        debs.read(loader.load().targets["cuda-sm90"], root)
    path = debs.lock_path(cpu, root)
    path.write_text(path.read_text().replace("\nbash=", "\nbash 5.2\nbash="))
    with pytest.raises(BuildError, match=r"cpu.debs.txt:\d+: 'bash 5.2' is not name=version"):
        debs.read(cpu, root)


def test_a_version_gone_from_the_archive_fails_naming_it(cpu, root: Path, tmp_path: Path, monkeypatch) -> None:
    lock = debs.read(cpu, root)
    name, version, line = next(p for p in lock.packages if p[0] == "bash")
    fake = tmp_path / "bin" / "mmdebstrap"
    fake.parent.mkdir()
    # what apt says, through mmdebstrap, for a version the mirror no longer has
    fake.write_text(f"#!/bin/sh\necho \"E: Version '{version}' for '{name}' was not found\" >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:/usr/bin:/bin")
    named = rf"no longer has containers/locks/cpu.debs.txt:{line}: bash={re.escape(version)}\n"
    with pytest.raises(BuildError, match=rf"cannot be made from its lock any more: .* {named}") as exc:
        debs.bootstrap(cpu, lock, tmp_path / "rootfs.tar")
    assert "python -m ci lock cpu --base" in exc.value.hint


def test_a_base_is_bootstrapped_in_one_environment_whoever_runs_it(cpu, root: Path, tmp_path: Path, monkeypatch):
    """A shell (PYTHONDONTWRITEBYTECODE set, a locale) and a CI agent (a bare PATH, its own HOME) gave two bases from
    one lock: the maintainer scripts' imports left timestamped .pyc files in one only. mmdebstrap sees one env."""
    lock = debs.read(cpu, root)
    fake = tmp_path / "bin" / "mmdebstrap"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nfor a; do out=$last; last=$a; done\nenv | grep -v '^HOME=' | sort > $out.env\n")
    fake.chmod(0o755)
    for run, env in (
        ("shell", {"PATH": f"{fake.parent}:/usr/local/bin:/usr/sbin:/usr/bin", "PYTHONDONTWRITEBYTECODE": "1",
                   "LANG": "C.UTF-8", "HOME": "/root", "TERM": "xterm"}),
        ("agent", {"PATH": f"{fake.parent}:/usr/bin:/bin", "HOME": str(tmp_path / "agent")}),
    ):  # fmt: skip
        for key in ("PYTHONDONTWRITEBYTECODE", "LANG", "TERM", "LC_ALL", "TZ", "PYTHONHASHSEED"):
            monkeypatch.delenv(key, raising=False)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        debs.bootstrap(cpu, lock, tmp_path / run)  # the fake writes its environment beside the tar it was given
    shell, agent = ((tmp_path / f"{run}.env").read_text() for run in ("shell", "agent"))
    assert shell == agent
    assert f"SOURCE_DATE_EPOCH={lock.epoch}\n" in shell and "PYTHONDONTWRITEBYTECODE=1\n" in shell
    assert "TERM=" not in shell and "LANG=" not in shell


def test_two_layers_that_differ_are_told_apart_by_file() -> None:
    ours = _layer([("opt", None), ("opt/built-at", b"1700000001\n"), ("opt/same", b"x")], mtime=EPOCH)
    theirs = _layer([("opt", None), ("opt/built-at", b"1700000002\n"), ("opt/same", b"x"), ("opt/new", b"")],
                    mtime=EPOCH)  # fmt: skip
    diffs = rebuild.member_diffs(io.BytesIO(ours), io.BytesIO(theirs))
    assert diffs == ["opt/built-at: content '1700000001\\n' vs '1700000002\\n'", "opt/new: only in the rebuild"]


def test_a_layer_is_named_by_the_step_that_made_it() -> None:
    config = {"history": [
        {"created_by": "mmdebstrap --variant=custom"},
        {"created_by": "ENV A=1", "empty_layer": True},
        {"created_by": "RUN |2 TARGET=cpu KERNEL_LISTS=a b /bin/sh -c date >   /opt/x # buildkit"},
        {"created_by": "COPY suites/ /opt/stackgate/suites/ # buildkit"},
    ]}  # fmt: skip
    steps = ["mmdebstrap --variant=custom", "RUN date > /opt/x", "COPY suites/ /opt/stackgate/suites/"]
    assert rebuild._steps(config) == steps
    assert rebuild.side_tag("stackgate/cpu:latest") == "stackgate/cpu:latest-rebuild"
    assert rebuild.side_tag("localhost:5000/cpu") == "localhost:5000/cpu:rebuild"


def test_a_base_lock_is_refused_where_the_base_is_pulled(capsys) -> None:
    from ci import cli

    assert cli.main(["lock", "rocm-gfx1151", "--base"]) == 6
    err = capsys.readouterr().err
    assert "target rocm-gfx1151 has no bootstrap recipe: its base is pulled, pinned by digest" in err
    assert "fix: python -m ci lock rocm-gfx1151" in err
