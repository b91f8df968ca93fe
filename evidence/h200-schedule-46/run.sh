#!/usr/bin/env bash
# Every tiny-model spec_decode row of cuda-sm90 (46 rows: #46849's and #48804's, random weights) on one H200 by
# `ci run` alone: the scheduler packs them on the GPU by memory budget, keeps each model and change's rows one after
# another, prints a line per row with an ETA, and stops starting rows in time to write every JUnit before
# --deadline; `--resume` runs what is left. From empty JIT caches (--unbaked), JIT allowed.
# vLLM 0.26.0 staged under /root/stage as ../../../shared/gpu/README.md says; the project's wheels the host lacks
# travel in .pydeps. No scheduling here: this script picks the rows, sets the environment, calls ci run, packs.
# usage: [DEADLINE=s] run.sh first|resume   -> $OUT/s46-<mode>.tar.gz and the run's row lines
set -u
cd "$(dirname "$0")/../.."
mode=${1:?first or resume}
python3 -m pip install -q --no-index --no-deps --target /tmp/pydeps .pydeps/*.whl 2>/dev/null
export PYTHONPATH=/root/stage/site:/root/stage/extra:/tmp/pydeps CUDA_HOME=/usr/local/cuda VLLM_USE_FLASHINFER_SAMPLER=0
export VLLM_NO_USAGE_STATS=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 STACKGATE_REFUSE_JIT=0 TORCHINDUCTOR_COMPILE_THREADS=2
export STACKGATE_RUNTIME_CACHES=/root/rt-s46
R=/root/res-s46
mkdir -p "$R"
rows=$(python3 -m ci plan --target cuda-sm90 --suite spec_decode --format json | python3 -c '
import json, sys
print(",".join(r["id"] for r in json.load(sys.stdin)["rows"] if r["model"].startswith("tiny-") and r["gpus"] == 1))')
extra=(--deadline "${DEADLINE:-480}"); [ "$mode" = resume ] && extra+=(--resume --keep-caches)
t0=$(date +%s)
python3 -m ci run cuda-sm90 spec_decode --host --unbaked --rows "$rows" --timeout 300 "${extra[@]}" --out "$R/run" \
  > "$R/$mode.log" 2>&1
rc=$?
echo "$mode: ci run exit $rc, wall $(($(date +%s) - t0)) s, $(tr ',' '\n' <<< "$rows" | wc -l) rows asked, 1 GPU"
grep -E '^\[|rows:|scheduling|--resume|deadline|error' "$R/$mode.log" | cut -c1-170
rm -rf "$R"/run/logs/*.result.json
tar -C /root -czf "$OUT/s46-$mode.tar.gz" res-s46
