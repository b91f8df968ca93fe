#!/usr/bin/env bash
# The environment every H200 campaign here ran `ci` in, then the command given: stock vLLM staged under /root/stage as
# ../../shared/gpu/README.md says (its payload built by that folder's build_payload.sh), the project's wheels the
# host lacks carried in .pydeps (pydantic and pydantic-core, pyyaml where missing, junitparser, orjson, docker;
# `python -m ci` names any that is missing, with the install command). Run from the repository root:
#   bash evidence/h200-env.sh python3 -m ci main --host --target cuda-sm90 ...
# FORK_SITE: a site folder `ci fork build --host` made over the staged release, put first (the fork judged).
# It picks no rows and no GPUs and holds no order: `ci` does all of that. Inductor's compile threads are 2 (campaigns
# that pack many engines on a GPU) unless TORCHINDUCTOR_COMPILE_THREADS says otherwise.
set -u
python3 -m pip install -q --no-index --no-deps --target /root/pydeps .pydeps/*.whl 2>/dev/null
export PYTHONPATH=${FORK_SITE:+$FORK_SITE:}/root/stage/site:/root/stage/extra:/root/pydeps CUDA_HOME=/usr/local/cuda VLLM_USE_FLASHINFER_SAMPLER=0
export VLLM_NO_USAGE_STATS=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=${TORCHINDUCTOR_COMPILE_THREADS:-2}
export STACKGATE_REFUSE_JIT=${STACKGATE_REFUSE_JIT:-0} STACKGATE_RUNTIME_CACHES=${STACKGATE_RUNTIME_CACHES:-/root/rt}
exec "$@"
