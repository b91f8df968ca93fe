"""`stackgate.vllm_build` names every byte Python imports and nothing else, and a fork's bundle holds git's own bytes
of the fork: attributes change none, and what an overlay cannot hold is refused by name."""

from __future__ import annotations

import gzip
import io
import json
import os
import py_compile
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from support.fork_site import make_base_site, stack_for_fork
from support.paths import SUITES

from ci import cli
from ci.common.errors import UsageError
from ci.fork import bundle, site, source
from ci.stack import loader

vb = site.vllm_build()


def _fork(stack_copy: Path, repo, ids):
    return source.open_fork(loader.load(stack_for_fork(stack_copy, repo, ids)))


def _built(stack_copy: Path, fork_repo, tmp_path: Path) -> Path:
    repo, ids = fork_repo
    fork = _fork(stack_copy, repo, ids)
    made = bundle.write(fork, bundle.overlay(fork, fork.commit), tmp_path / "f.tar.gz")
    site.build(made, make_base_site(tmp_path), tmp_path / "site")
    return tmp_path / "site" / "vllm"


def _describe(package: Path) -> dict:
    suites = SUITES
    probe = [sys.executable, "-m", "harness.vllm_build", str(package)]
    return json.loads(subprocess.run(probe, cwd=suites, capture_output=True, text=True, check=True).stdout)


def test_a_compiled_part_replaced_by_another_of_the_same_size_is_another_build(
    stack_copy: Path,
    fork_repo,
    tmp_path: Path,
) -> None:
    """The case seen: the `.so` was named by the wheel's RECORD hash while its size matched."""
    package = _built(stack_copy, fork_repo, tmp_path)
    so = package / "_C.abi3.so"
    before = vb.tree_id(package)
    so.unlink()  # a new inode, as an install would leave it
    so.write_bytes(b"\x7fELF" + b"\x01" * 4096)
    assert vb.tree_id(package) != before
    assert "is not the build" in _describe(package)["mismatch"]


def _plant(package: Path, module: str, code: str, mode: py_compile.PycInvalidationMode) -> Path:
    """Bytecode for vllm/<module>.py compiled from `code`, not from the file's own source, where Python loads it."""
    fake = package.parent / f"planted-{module}.py"
    fake.write_text(code)
    cached = py_compile.compile(str(fake), cfile=None, doraise=True, invalidation_mode=mode)
    fake.unlink()
    dest = package / "__pycache__" / f"{module}.{sys.implementation.cache_tag}.pyc"
    dest.parent.mkdir(exist_ok=True)
    data = Path(cached).read_bytes()
    if mode is py_compile.PycInvalidationMode.TIMESTAMP:  # the header of the real source: Python takes it as its own
        st = (package / f"{module}.py").stat()
        data = (
            data[:8]
            + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
            + st.st_size.to_bytes(4, "little")
            + data[16:]
        )
    dest.write_bytes(data)
    return dest


MODES = py_compile.PycInvalidationMode


@pytest.mark.parametrize("mode", [MODES.UNCHECKED_HASH, MODES.TIMESTAMP], ids=["unchecked-hash", "timestamp"])
def test_planted_bytecode_python_would_load_changes_the_id_and_is_a_mismatch(
    stack_copy: Path,
    fork_repo,
    tmp_path: Path,
    mode: py_compile.PycInvalidationMode,
) -> None:
    package = _built(stack_copy, fork_repo, tmp_path)
    before = vb.tree_id(package)
    _plant(package, "spec", "STEPS = 666\n", mode)
    env = {**os.environ, "PYTHONPATH": str(package.parent)}
    ran = subprocess.run([sys.executable, "-c", "import vllm.spec; print(vllm.spec.STEPS)"], cwd=package.parent,
                         capture_output=True, text=True, env=env)  # fmt: skip
    assert ran.stdout.strip() == "666"  # what the build must name: this bytecode runs, not spec.py
    assert vb.tree_id(package) != before
    assert "is not the build" in _describe(package)["mismatch"]


def test_bytecode_compiled_from_the_sources_leaves_the_id_as_it_was(
    stack_copy: Path,
    fork_repo,
    tmp_path: Path,
) -> None:
    """Caches the interpreter, or compileall, writes as it goes follow their source: the id does not move."""
    package = _built(stack_copy, fork_repo, tmp_path)
    before = vb.tree_id(package)
    subprocess.run([sys.executable, "-m", "compileall", "-q", "--invalidation-mode", "checked-hash", str(package)],
                   check=True)  # fmt: skip
    subprocess.run([sys.executable, "-c", "import vllm.spec, vllm.attention"], cwd=package.parent, check=True,
                   env={**os.environ, "PYTHONPATH": str(package.parent)})  # fmt: skip
    (package / "__pycache__" / "spec.cpython-39.pyc").write_bytes(b"another interpreter's, never loaded here")
    assert vb.tree_id(package) == before and "mismatch" not in _describe(package)


def test_sourceless_bytecode_beside_the_sources_is_part_of_the_id(
    stack_copy: Path,
    fork_repo,
    tmp_path: Path,
) -> None:
    package = _built(stack_copy, fork_repo, tmp_path)
    before = vb.tree_id(package)
    compiled = py_compile.compile(str(package / "spec.py"), cfile=str(package / "extra.pyc"), doraise=True)
    assert Path(compiled).is_file()
    assert vb.tree_id(package) != before  # `import vllm.extra` loads it: it is imported bytes


def _bundle_files(stack_copy: Path, repo, ids) -> dict[str, bytes]:
    fork = _fork(stack_copy, repo, ids)
    return bundle.overlay(fork, fork.commit).files


def test_the_bundle_holds_the_forks_blobs_whatever_its_attributes_say(stack_copy: Path, fork_repo) -> None:
    """The cases seen: `export-ignore` kept the base's file while the build listed the change; `export-subst` and
    `core.autocrlf=true` gave one commit two ids."""
    repo, ids = fork_repo
    repo.commit("attributes", {".gitattributes": "vllm/spec.py export-ignore\nvllm/ver.py export-subst\n",
                               "vllm/ver.py": "REFS = '$Format:%D$'\nLINE = 'a'\n"})  # fmt: skip
    files = _bundle_files(stack_copy, repo, ids)
    assert files["vllm/spec.py"] == b"STEPS = 3\n"  # the fork's, not left out
    assert files["vllm/ver.py"] == b"REFS = '$Format:%D$'\nLINE = 'a'\n"  # as committed, never substituted
    repo.git("branch", "another-branch")  # what %D would print changes
    repo.git("config", "core.autocrlf", "true")
    assert _bundle_files(stack_copy, repo, ids) == files


def test_a_symlink_or_submodule_under_vllm_is_refused_by_name(stack_copy: Path, fork_repo) -> None:
    repo, ids = fork_repo
    (repo.path / "vllm" / "link.py").symlink_to("spec.py")
    repo.git("add", "-A")
    repo.git("update-index", "--add", "--cacheinfo", f"160000,{ids['base']},vllm/third_party")
    repo.git("commit", "-q", "-m", "a symlink and a submodule")
    with pytest.raises(UsageError) as err:
        _bundle_files(stack_copy, repo, ids)
    assert "vllm/link.py (a symlink)" in err.value.message and "vllm/third_party (a submodule)" in err.value.message


@pytest.mark.parametrize("name", ["csrc2/kernel.cxx", "vllm/ops/gemm.hh", "vllm/ops/attn.CU", "vllm/ops/tile.inl"])
def test_compiled_sources_are_refused_whatever_their_suffix_case(stack_copy: Path, fork_repo, name: str) -> None:
    repo, ids = fork_repo
    repo.commit("compiled", {name: "// code\n"})
    with pytest.raises(bundle.CompiledSources) as err:
        _bundle_files(stack_copy, repo, ids)
    assert name in err.value.message


def test_a_file_name_that_is_not_utf8_is_refused_by_name(stack_copy: Path, fork_repo) -> None:
    repo, ids = fork_repo
    with open(os.path.join(os.fsencode(repo.path), b"vllm", b"caf\xe9.py"), "w") as fh:
        fh.write("X = 1\n")
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", "latin-1 name")
    with pytest.raises(UsageError) as err:
        _bundle_files(stack_copy, repo, ids)
    assert "are not UTF-8" in err.value.message and "vllm/caf\\udce9.py" in err.value.message


def _tar(members: dict[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue())


MANIFEST = {"schema": 1, "fork": {"name": "f", "ref": "main"}, "base": {"version": "0.26.0"}, "changes": [],
            "without": None, "deleted": [], "files": {"vllm/spec.py": "0" * 64}}  # fmt: skip


@pytest.mark.parametrize(
    ("made", "said"),
    [
        (lambda good: b"not a bundle at all", "not a fork bundle (ci fork bundle), or a damaged one"),
        (lambda good: good[: len(good) // 2], "a damaged fork bundle"),
        (lambda good: _tar({"overlay/vllm/spec.py": b"x"}), "no stackgate-fork.json"),
        (lambda good: _tar({"stackgate-fork.json": json.dumps({**MANIFEST, "files": []}).encode()}),
         "stackgate-fork.json: files: should be an object, not a list"),
        (lambda good: _tar({"stackgate-fork.json": json.dumps(MANIFEST).encode(), "overlay/vllm/spec.py": b"x"}),
         "overlay/vllm/spec.py does not match the bundle's manifest"),
        (lambda good: _tar({"stackgate-fork.json": json.dumps(MANIFEST).encode()}),
         "vllm/spec.py is in the bundle or its manifest but not both"),
    ],
    ids=["not-gzip", "cut-short", "no-manifest", "manifest-shape", "member-differs", "member-missing"],
)  # fmt: skip
def test_a_malformed_bundle_is_exit_2_naming_the_member(
    stack_copy: Path,
    fork_repo,
    tmp_path: Path,
    capsys,
    made,
    said: str,
) -> None:
    repo, ids = fork_repo
    fork = _fork(stack_copy, repo, ids)
    good = bundle.write(fork, bundle.overlay(fork, fork.commit), tmp_path / "good.tar.gz").read_bytes()
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(made(good))
    argv = ["fork", "build", "--host", "--bundle", str(bad), "--base-site", str(make_base_site(tmp_path)), "--site",
            str(tmp_path / "site"), "--stack", str(stack_copy)]  # fmt: skip
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err
    assert not (tmp_path / "site").exists()
