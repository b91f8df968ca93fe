#!/usr/bin/env bash
# The H200 run behind this folder: tiny-model rows of all four tracks on stock vLLM 0.26.0 (staged as
# ../shared/gpu/README.md says), on this host's Python with the JIT sentinel in every process; then the
# kernel list recorded from what they compiled, and the report. Usage: run.sh spec|sparse|finish
set -u
export PYTHONPATH=/root/stage/site:/root/stage/extra:/tmp/pydeps CUDA_HOME=/usr/local/cuda VLLM_USE_FLASHINFER_SAMPLER=0
export VLLM_CACHE_ROOT=/root/cache/vllm TORCHINDUCTOR_CACHE_DIR=/root/cache/inductor VLLM_NO_USAGE_STATS=1 HF_HUB_OFFLINE=1
export STACKGATE_HOST_AOT=/root/cache/host-aot PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --target /tmp/pydeps .pydeps/*.whl 2>/dev/null
R=/root/${RES:-res}  # RES=res-b: the second run, with the recorded list baked on this host first
mkdir -p "$R"
case "$1" in
  spec)
    python3 -m ci run cuda-sm90 spec_decode --host --out "$R/spec" \
      --rows 48804.cuda-sm90.tiny-llama-eagle.54aa101d,46849.cuda-sm90.tiny-llama-eagle.cf3fb5bf > "$R/spec.log" 2>&1
    echo "spec exit $?" ;;
  sparse)
    python3 -m ci run cuda-sm90 sparse_mla --host --out "$R/sparse" \
      --rows 46514.cuda-sm90.tiny-deepseek-v32-mtp.6873e57f,48407.cuda-sm90.tiny-deepseek-v32-mtp.14e52503 \
      > "$R/sparse.log" 2>&1
    echo "sparse exit $?" ;;
  finish)
    python3 -m ci kernels record "$R" --out "$R/vllm-recorded.yaml"
    cp -r "${STACKGATE_HOST_AOT}/cuda-sm90/manifest.json" "$R/host-aot-manifest.json" 2>/dev/null
    python3 -m ci report "$R" --out "$R/report" --target cuda-sm90
    grep -h "PASS\|FAIL\|ERROR\|SKIP" "$R"/*.log | grep "::" | cut -c1-300
    python3 -c "import json,collections; e=[json.loads(l) for f in __import__('glob').glob('$R/*/jit-events.jsonl') for l in open(f)]; print(len(e), 'compiles'); print(collections.Counter(x['kernel'] for x in e).most_common(30))"
    rm -rf "$R"/*/logs/*.result.json
    tar -C /root -czf "$OUT/h200-${RES:-res}.tar.gz" "${RES:-res}" && ls -la "$OUT" ;;
esac
