"""A fork made from scratch by git, for the tests of the fork as the subject: upstream's main with the release v0.26.0
tagged, then #48407, its follow-up fix #52512, #46514 (three files) and #46849 squash-merged; the fork (branch `fork`,
off v0.26.0) merged upstream up to #48407 (converged, without the follow-up), carries #46514's main file alone with
its very edit (partially ported), and lacks #46849 and #48804 (absent). Its base, v0.26.0, is the release the cuda
targets' lock installs. The stack's change files name this upstream's commits, as a maintainer's stack would."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ci.upstream.checkout import Checkout
from support.git_repos import Repo, set_change

BASE = {
    "vllm/__init__.py": "__version__ = '0.26.0'\n",
    "vllm/attention.py": "DENSE = False\n",
    "vllm/indexer.py": "TOPK = -1\n",
    "vllm/spec.py": "STEPS = 1\n",
    "vllm/mla/flashmla.py": "DCP = 1\n",
    "vllm/mla/flashmla_sparse.py": "MTP = False\n",
}
SUBJECT = {
    "48407": "[Attention] Skip sparse indexer scoring for dense short prefills (#48407)",
    "52512": "[Bugfix] GLM-5.2: no repeated tokens from an all -1 top-k buffer (#52512)",
    "46514": "[Attention][MLA] FlashMLA sparse: DCP on the fp8_ds_mla mixed-batch path + MTP (#46514)",
    "46849": "[MRV2][Spec] Fuse AR speculator multi-step decodes back into one CUDA graph (#46849)",
}
STATES = {"48407": "converged", "46514": "partially ported", "46849": "absent", "48804": "absent"}


@dataclass(frozen=True)
class World:
    repo: Repo
    ids: dict[str, str]
    stack: Path

    @property
    def path(self) -> Path:
        return self.repo.path


def make(root: Path, stack: Path) -> World:
    r = Repo(root / "vllm-fork")
    ids = {"base": r.commit("vLLM 0.26.0", BASE)}
    r.git("tag", "v0.26.0")
    ids["48407"] = r.commit(SUBJECT["48407"], {"vllm/attention.py": "DENSE = True\n"})
    ids["52512"] = r.commit(SUBJECT["52512"], {"vllm/indexer.py": "TOPK = 0\n"})
    ids["46514"] = r.commit(SUBJECT["46514"], {"vllm/mla/flashmla.py": "DCP = 8\n",
                                               "vllm/mla/flashmla_sparse.py": "MTP = True\nDCP = True\n",
                                               "tests/test_sparse_mla.py": "def test(): pass\n"})  # fmt: skip
    ids["46849"] = r.commit(SUBJECT["46849"], {"vllm/spec.py": "STEPS = 3\n"})
    r.upstream()
    r.git("checkout", "-q", "-b", "fork", "v0.26.0")
    r.git("merge", "-q", "--no-ff", "-m", "Merge upstream up to #48407", ids["48407"])
    ids["part"] = r.commit("fork: FlashMLA sparse MTP", {"vllm/mla/flashmla_sparse.py": "MTP = True\nDCP = True\n"})
    ids["head"] = ids["part"]
    co = Checkout.open(r.path)
    for change in ("48407", "46514", "46849"):
        merge = ids[change]
        set_change(stack, change, upstream={
            "merge_commit": merge[:12], "commits": None, "merged_on": "2023-11-15", "first_release": None,
            "patch_id": co.patch_ids(merge, walk=False)[merge], "file_ids": co.file_ids([merge])[merge]})  # fmt: skip
    follow = {"ref": "vllm-project/vllm#52512", "what": "GLM-5.2 repeated tokens read from an all -1 top-k buffer",
              "regression_test": True, "merge_commit": ids["52512"][:12], "merged_on": "2023-11-14"}  # fmt: skip
    set_change(stack, "48407", upstream={"follow_ups": [follow]})
    (stack / "fork.yaml").unlink()  # the stack's own demo fork is not this one
    return World(r, ids, stack)
