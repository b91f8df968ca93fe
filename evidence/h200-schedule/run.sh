#!/usr/bin/env bash
# The scheduler on one H200 (bare host, no docker): six tiny spec_decode rows of cuda-sm90, one per model and
# change, from empty JIT caches (--unbaked, JIT allowed), run twice with ci run alone:
#   one         --one-session: one harness session, one row after another (the control)
#   scheduled   the default on a GPU host: every row its own session, packed on the GPU by memory budget
# vLLM 0.26.0 staged under /root/stage as ../../../shared/gpu/README.md says; the project's wheels the host lacks
# travel in .pydeps. No scheduling here: this script sets the environment, calls ci run and packs the results.
# usage: run.sh one|scheduled   -> $OUT/schedule-<mode>.tar.gz and one summary line per row
set -u
cd "$(dirname "$0")/../.."
mode=${1:?one or scheduled}
python3 -m pip install -q --no-index --no-deps --target /tmp/pydeps .pydeps/*.whl 2>/dev/null
export PYTHONPATH=/root/stage/site:/root/stage/extra:/tmp/pydeps CUDA_HOME=/usr/local/cuda VLLM_USE_FLASHINFER_SAMPLER=0
export VLLM_NO_USAGE_STATS=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 STACKGATE_REFUSE_JIT=0 TORCHINDUCTOR_COMPILE_THREADS=2
export STACKGATE_RUNTIME_CACHES=/root/rt-$mode  # each mode from its own empty caches
ROWS=46849.cuda-sm90.tiny-llama-eagle.ee476cde,46849.cuda-sm90.tiny-llama-eagle3.a99fffa4,46849.cuda-sm90.tiny-deepseek-v3-mtp.0468931a,48804.cuda-sm90.tiny-llama-eagle.54aa101d,48804.cuda-sm90.tiny-llama-eagle3.6e3b537b,48804.cuda-sm90.tiny-qwen3-dflash.9ddd48a5
R=/root/res-schedule
extra=(); [ "$mode" = one ] && extra=(--one-session)
mkdir -p "$R"
t0=$(date +%s)
python3 -m ci run cuda-sm90 spec_decode --host --unbaked --rows "$ROWS" --timeout 540 "${extra[@]}" --out "$R/$mode" \
  > "$R/$mode.log" 2>&1
rc=$?
t1=$(date +%s)
echo "$mode: ci run exit $rc, wall $((t1 - t0)) s, 6 rows, 1 GPU"
grep -E '^\[|rows:|scheduling|testcases' "$R/$mode.log" | cut -c1-200
rm -rf "$R"/*/logs/*.result.json
tar -C /root -czf "$OUT/schedule-$mode.tar.gz" "res-schedule/$mode" "res-schedule/$mode.log"
