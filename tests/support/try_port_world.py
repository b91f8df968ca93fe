"""An upstream and a fork made from scratch by git for `--try-port`, and a stack whose two imported changes run their
rows on the cpu target (the harness self-test's track, one row each).

Upstream's main, after the release v0.26.0: #61000 adds vllm/knobs.py; #61001 turns it on and starts vLLM fast (its
import no longer sleeps: vllm/startup.py's DELAY 1.0 -> 0); #61002 changes line 3 of vllm/own.py. The fork (branch
`fork`, off v0.26.0, checked out, with a staged edit, an unstaged one and an untracked file of the user's) changed
that same line its own way. So #61001 ports cleanly after one prerequisite (#61000 brings the file it changes), and
#61002 conflicts with the fork's own edit. #61001's rows time the build's `import vllm` (the self-test's record of a
fork build, suites/selftest): its effect is real, an import a second faster (a second, so that the run-to-run spread
of a loaded machine, its A/A floor, stays well inside the bounds)."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from pathlib import Path

import yaml

from ci.upstream.checkout import Checkout
from support.git_repos import Repo

OWN = "".join(f"O{i} = {i}\n" for i in range(1, 11))
BASE = {
    "vllm/__init__.py": "import time\n\nfrom vllm.startup import DELAY\n\ntime.sleep(DELAY)\n__version__ = '0.26.0'\n",
    "vllm/startup.py": "DELAY = 1.0\n",
    "vllm/own.py": OWN,
}
SUBJECT = {
    "61000": "[Core] A module of knobs (#61000)",
    "61001": "[Core] Start fast (#61001)",
    "61002": "[Core] Raise the block size (#61002)",
    "61003": "[Core] A module of extras (#61003)",
}
WAIVED = {t: "the test stack's change runs on the cpu self-test only" for t in ("cuda-sm121a", "rocm-gfx1151")}


@dataclass(frozen=True)
class World:
    repo: Repo
    ids: dict[str, str]
    stack: Path
    base_site: Path

    @property
    def path(self) -> Path:
        return self.repo.path


def make(root: Path, stack: Path, *, tolerance: float = 1.0e-6, extra: bool = False) -> World:
    """The world; `tolerance`: #61001's numerical bound on its rows (0 makes every row of it fail that criterion);
    `extra`: a third change, #61003 (a new file: clean as it is), tracked too."""
    r = Repo(root / "vllm-fork")
    ids = {"base": r.commit("vLLM 0.26.0", BASE)}
    r.git("tag", "v0.26.0")
    ids["61000"] = r.commit(SUBJECT["61000"], {"vllm/knobs.py": "FAST = False\n"})
    ids["61001"] = r.commit(SUBJECT["61001"], {"vllm/knobs.py": "FAST = True\n", "vllm/startup.py": "DELAY = 0.0\n"})
    ids["61002"] = r.commit(SUBJECT["61002"], {"vllm/own.py": OWN.replace("O3 = 3\n", "O3 = 30\n")})
    if extra:
        ids["61003"] = r.commit(SUBJECT["61003"], {"vllm/extra.py": "EXTRA = True\n"})
    r.upstream()
    r.git("checkout", "-q", "-b", "fork", "v0.26.0")
    ids["own"] = r.commit("fork: our block size", {"vllm/own.py": OWN.replace("O3 = 3\n", "O3 = 4096\n")})
    ids["head"] = ids["own"]
    # the user's work in progress: staged, unstaged, untracked
    (r.path / "vllm" / "startup.py").write_text("DELAY = 0.1\n")
    r.git("add", "vllm/startup.py")
    (r.path / "vllm" / "own.py").write_text(OWN.replace("O3 = 3\n", "O3 = 2048\n"))
    (r.path / "notes.txt").write_text("what to port next\n")
    co = Checkout.open(r.path)
    for change in ("61001", "61002", *(("61003",) if extra else ())):
        _change_file(stack, change, ids[change], co, tolerance if change == "61001" else 1.0e-6)
    (stack / "fork.yaml").unlink()  # the stack's own demo fork is not this one
    return World(r, ids, stack, _base_site(root))


def _change_file(stack: Path, change: str, merge: str, co: Checkout, tolerance: float) -> None:
    doc = {
        "id": change,
        "title": SUBJECT[change].split("] ", 1)[1].rsplit(" (#", 1)[0],
        "track": "harness-selftest",
        "probe": "eagle-spec-decode-warmup",  # the self-test suite probes nothing; an imported change names a probe
        "upstream": {
            "repo": "vllm-project/vllm",
            "pr": int(change),
            "title": SUBJECT[change].rsplit(" (#", 1)[0],
            "state": "merged",
            "as_of": "2023-11-20",
            "merged_on": "2023-11-15",
            "merge_commit": merge[:12],
            "patch_id": co.patch_ids(merge, walk=False)[merge],
            "file_ids": co.file_ids([merge])[merge],
        },
        "models": ["cpu-selftest"],
        "matrix": {"context": [4096], "batch": [1], "speculative": [False]},
        "acceptance": {
            "regression": {
                "tests": ["suites/selftest/test_harness.py"],
                "benchmark": "the fork build's vLLM imported cold, in a fresh interpreter",
            },
            "tolerance": {
                "metric": "max_abs_err",
                "max": tolerance,
                "unit": "abs",
                "reference": {"backend": "row", "variant": "float64 reference computed in the same process"},
            },
            "graph_replay": {
                "metric": "baked_kernel_compiles",
                "min": 0,
                "max": 0,
                "description": "no CUDA graphs on the cpu target: loading every baked kernel compiles nothing",
            },
            "effect": [{"metric": "vllm_import_ms", "better": "lower", "min_gain_pct": 50}],
            "allowed_regression": {"metric": "vllm_import_ms", "better": "lower", "max_pct": 25},
            "measurements": {"cold": ["cold_workload_ms", "vllm_import_ms"], "warm": ["warm_workload_ms"]},
        },
        "waived_targets": WAIVED,
    }
    (stack / "changes" / f"{change}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


def _base_site(root: Path) -> Path:
    """The base release's "wheel install": its vllm/ tree and a dist-info with a RECORD."""
    site = root / "base-site"
    record = []
    for name, text in BASE.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    info = site / "vllm-0.26.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.26.0\n")
    (info / "RECORD").write_text("\n".join(record) + "\n")
    return site
