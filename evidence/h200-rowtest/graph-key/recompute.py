"""Recompute vLLM 0.26.0's compiled-graph folder names (vllm/compilation/backends.py: the first 10 hex of
sha256(str([env_hash, config_hash, code_hash, compiler_hash])), env_hash = sha256 of the sorted JSON of the
env factors) from host A's bake factors (`<folder>.json`, copied from the artefact), once as baked and once
with the one switch the runs on host B had and the bake did not. The second names are the folders host B
wrote, all seven of them (its row logs under ../artefact/c*-*/logs: 0a5c149084 for #48804, 87dea2512c and
beec314798 for #46514, 14fce2fac0 and 0ef795a71e for #46849, 9b3c8c3f87 and 05b50d3a63 for #48407)."""

import hashlib
import json
import sys
from pathlib import Path

here = Path(__file__).parent
for path in sorted(here.glob("*.json")):
    factors = json.loads(path.read_text())
    names = []
    for value in ("auto", "trtllm"):
        env = {**factors["env"], "VLLM_FLASHINFER_ALLREDUCE_BACKEND": value}
        env_hash = hashlib.sha256(json.dumps(env, sort_keys=True).encode()).hexdigest()
        key = [env_hash, factors["config_hash"], factors["code_hash"], factors["compiler_hash"]]
        names.append(hashlib.sha256(str(key).encode()).hexdigest()[:10])
    print(f"{path.stem}: as baked -> {names[0]}; with VLLM_FLASHINFER_ALLREDUCE_BACKEND=trtllm -> {names[1]}")
    if names[0] != path.stem:
        sys.exit(f"{path.name}: the recomputed name {names[0]} is not the folder's own")
