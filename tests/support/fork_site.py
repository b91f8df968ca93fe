"""A small fork made by git (a base release tree, port commits for three changes, a later commit that builds on one
of them), the stack that names it, and a base "wheel install" with a dist-info RECORD and a compiled part."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

from support.git_repos import Repo, record_fork

BASE_FILES = {
    "vllm/__init__.py": "__version__ = '0.26.0'\n",
    "vllm/_version.py": "commit_id = 'gffd46bfab'\n",
    "vllm/attention.py": "def attend(q):\n    return q\n\n\nDENSE = False\n",
    "vllm/spec.py": "STEPS = 1\n",
    "vllm/old.py": "GONE = True\n",
    "csrc/kernel.cu": "// base kernel\n",
}


def make_fork(path: Path) -> tuple[Repo, dict[str, str]]:
    """The fork at `path`, and the commit of each of its changes (tests take it as the `fork_repo` fixture)."""
    repo = Repo(path)
    ids = {"base": repo.commit("vLLM 0.26.0", BASE_FILES)}
    repo.git("tag", "v0.26.0")
    ids["48407"] = repo.commit(
        "[Attention] dense short prefills (#48407)",
        {"vllm/attention.py": BASE_FILES["vllm/attention.py"].replace("False", "True")},
    )
    ids["46849"] = repo.commit("[Spec] fuse draft decodes (#46849)", {"vllm/spec.py": "STEPS = 3\n"})
    (repo.path / "vllm" / "old.py").unlink()
    ids["46514"] = repo.commit("[MLA] fp8_ds_mla mixed batch (#46514)", {"vllm/mla.py": "LSE = True\n"})
    # builds on #48407's own line: dropping #48407 alone would leave this commit's edit without its base
    ids["52512"] = repo.commit(
        "Do not use dense MHA for GLM (#52512)",
        {"vllm/attention.py": BASE_FILES["vllm/attention.py"].replace("False", "True  # GLM off")},
    )
    return repo, ids


def stack_for_fork(stack_copy: Path, repo: Repo, ids: dict[str, str], ref: str = "main") -> Path:
    """stack/fork.yaml names this repository, its base, and the commits that carry three changes (their upstream
    facts are vLLM's real ones, which no synthetic history matches: the fork's records say where they are)."""
    base = {"version": "0.26.0", "ref": "v0.26.0", "commit": "ffd46bfab"}
    record_fork(stack_copy, repo.path, {c: [ids[c]] for c in ("48407", "46849", "46514")}, ref=ref, base=base)
    return stack_copy


def make_base_site(root: Path) -> Path:
    """A base "wheel install": the base tree, a compiled part, and a RECORD naming every file's sha256."""
    site_dir = root / "base-site"
    files = {k: v.encode() for k, v in BASE_FILES.items() if k.startswith("vllm/")}
    files["vllm/_C.abi3.so"] = b"\x7fELF" + bytes(4096)
    record = []
    for name, data in files.items():
        (site_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (site_dir / name).write_bytes(data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    info = site_dir / "vllm-0.26.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.26.0\n")
    (info / "RECORD").write_text("\n".join(record) + "\n")
    return site_dir
