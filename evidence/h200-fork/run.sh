#!/usr/bin/env bash
# The fork under test on one H200 (bare host, no docker): the demo fork (../fork-demo, stack/fork.yaml) and the
# same fork without each imported change, each laid over stock vLLM 0.26.0 (staged under /root/stage as
# ../../../shared/gpu/README.md says) by `ci fork build --host`. Every side's rows are baked on their own caches
# root (`ci bake --host`), the root is wiped, and the rows run once from that artefact, JIT refused in both
# (`ci run --host --caches`). The bundles were made here, on the machine holding the fork's checkout:
#   for w in "" 48407 46514 46849; do python -m ci fork bundle --out .fork-stage/${w:+without-$w}${w:-fork}.tar.gz ${w:+--without $w}; done
# and travel as the ignored folder .fork-stage (they hold vLLM's code: never committed).
# usage: run.sh start   build the four sites, then start the streams in their own session (they outlive the call)
#        run.sh wait    until every stream ended (or the call's limit), then pack $OUT/fork-runs.tar.gz
# Then, here: python -m ci report results/fork --compare results/without-48407 ... (README.md beside this file).
set -u
cd "$(dirname "$0")/../.."
export CUDA_HOME=/usr/local/cuda VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
R=/root/res-fork
BASE=/root/stage/site
# side  suite  rows (one stream each: one model and change, its own caches root), longest first
STREAMS="
fork sparse_mla 48407.cuda-sm90.glm-5.2-shrunk.46edfb76
without-48407 sparse_mla 48407.cuda-sm90.glm-5.2-shrunk.46edfb76
fork spec_decode 46849.cuda-sm90.qwen3.6-shrunk.06d7a479
without-46849 spec_decode 46849.cuda-sm90.qwen3.6-shrunk.06d7a479
fork sparse_mla 46514.cuda-sm90.tiny-deepseek-v32-mtp.6873e57f,46514.cuda-sm90.tiny-deepseek-v32-mtp.13e84d39
without-46514 sparse_mla 46514.cuda-sm90.tiny-deepseek-v32-mtp.6873e57f,46514.cuda-sm90.tiny-deepseek-v32-mtp.13e84d39
fork sparse_mla 48407.cuda-sm90.tiny-deepseek-v32-mtp.14e52503
without-48407 sparse_mla 48407.cuda-sm90.tiny-deepseek-v32-mtp.14e52503
fork spec_decode 46849.cuda-sm90.tiny-llama-eagle.cf3fb5bf
without-46849 spec_decode 46849.cuda-sm90.tiny-llama-eagle.cf3fb5bf
"
PARALLEL=${PARALLEL:-8}  # engines at once on the GPU: each random-weight row asks for a fixed 12 GiB KV budget

pack() {
  rm -rf "$R"/*/*/logs/*.result.json
  tar -C /root -czf "$OUT/fork-runs.tar.gz" res-fork
  ls -la "$OUT"
}

stream() {  # stream SIDE SUITE ROWS: bake the rows on their own root, wipe it, run them from the artefact
  local side=$1 suite=$2 rows=$3 t0=$SECONDS key
  key="$side-$(echo "$rows" | cut -d. -f1,3 | tr . -)"
  local root=/root/rt/$key art=/root/art/$key out=$R/$side/$(echo "$rows" | cut -d. -f1,3 | tr . -)
  export PYTHONPATH=/root/sites/$side:$BASE:/root/stage/extra:/tmp/pydeps STACKGATE_RUNTIME_CACHES=$root
  export TORCHINDUCTOR_COMPILE_THREADS=2
  mkdir -p "$out"; [ -f /root/sites/$side/stackgate-vllm-build.json ] || { echo "$key: no site /root/sites/$side"; return 1; }
  STACKGATE_REFUSE_JIT=1 python3 -m ci bake cuda-sm90 --host --rows "$rows" --out "$art" > "$out/bake.log" 2>&1
  echo "$key bake exit $? in $((SECONDS - t0)) s"
  rm -rf "$root"
  STACKGATE_REFUSE_JIT=1 python3 -m ci run cuda-sm90 "$suite" --host --caches "$art"/*.tar.gz --rows "$rows" \
    --out "$out" > "$out/run.log" 2>&1
  echo "$key run exit $? in $((SECONDS - t0)) s"
}
export -f stream
export R BASE

case "${1:-}" in
  start)
    python3 -m pip install -q --no-index --no-deps --target /tmp/pydeps .pydeps/*.whl 2>/dev/null
    export PYTHONPATH=/tmp/pydeps:$BASE
    mkdir -p "$R"
    for side in fork without-48407 without-46514 without-46849; do
      python3 -m ci fork build --host --bundle ".fork-stage/$side.tar.gz" --base-site "$BASE" --site "/root/sites/$side" \
        | head -n 1 | tee "$R/site-$side.txt"
    done
    echo "$STREAMS" | grep . | grep -E -- "${ONLY:-.}" > "$R/streams.txt"  # ONLY=tiny: those streams alone
    setsid bash -c "xargs -P $PARALLEL -L 1 bash -c 'stream \"\$@\"' _ < $R/streams.txt > $R/streams.log 2>&1; touch $R/done" \
      < /dev/null > /dev/null 2>&1 &
    echo "started $(wc -l < "$R/streams.txt") streams, $PARALLEL at a time"
    ;;
  wait)
    limit=${WAIT_S:-540}
    while [ ! -e "$R/done" ] && [ $SECONDS -lt "$limit" ]; do sleep 10; done
    cat "$R/streams.log"; [ -e "$R/done" ] && echo "all streams ended" || echo "still running after ${limit} s"
    nvidia-smi --query-gpu=memory.used --format=csv,noheader
    pack
    ;;
  *) echo "usage: run.sh start|wait" >&2; exit 2 ;;
esac
