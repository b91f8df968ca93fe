#!/usr/bin/env bash
# Two follow-ups on one fresh 2 x H200 host, one per GPU, at once:
#   GPU 0: vLLM 0.26.0 with host A's warm-run artefact (../h200-bake), JIT refused: #46514's and #48804's rows,
#          each from a wiped root, to see the row itself name what its first request still traces
#          (torch.compile's Dynamo trace after ready, now part of the JIT record)
#   GPU 1: vLLM 0.29.0 from empty caches, JIT allowed: #48407's row, then #46514's, with the first-layer MLA
#          probe that now also watches DeepSeek-V3.2's own sparse path (0.29's _sparse_indexer_and_attn)
# Staged as ../h200-rowtest (0.26.0 under /root/stage, the artefact parts under art2/) and
# ../../.gpu-stage-029/STAGE.md (0.29.0 under /root/stage029). Stop it with SIGTERM (`timeout -s TERM N run.sh`):
# what finished comes back in $OUT.
set -u
cd "$(dirname "$0")/../.."
export CUDA_HOME=/usr/local/cuda VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-index --no-deps --target /tmp/pydeps .pydeps/*.whl 2>/dev/null
R=/root/res-follow
mkdir -p "$R" /root/art2/x
for f in art2/x/*.part00; do cat "${f%00}"?? > "/root/art2/x/$(basename "${f%.part00}")"; done
V026="/root/stage/site:/root/stage/extra:/tmp/pydeps"
V029="/root/stage029/torch213:/root/stage029/site:/root/stage029/extra:/root/stage029/extra/nvidia_cutlass_dsl/dsl_packages:/tmp/pydeps"
pack() { rm -rf "$R"/*/logs/*.result.json; tar -C /root -czf "$OUT/follow.tar.gz" res-follow; }

baked() {  # GPU 0: vLLM 0.26.0, the artefact installed into a wiped root, JIT refused
  for sr in "sparse_mla 46514.cuda-sm90.tiny-deepseek-v32-mtp.6873e57f" "spec_decode 48804.cuda-sm90.tiny-llama-eagle.54aa101d"; do
    set -- $sr; local t0=$SECONDS; rm -rf /root/rt-c-x
    env PYTHONPATH="$V026" CUDA_VISIBLE_DEVICES=0 STACKGATE_RUNTIME_CACHES=/root/rt-c-x STACKGATE_REFUSE_JIT=1 \
      python3 -m ci run cuda-sm90 "$1" --host --rows "$2" --out "$R/c-$2" --caches /root/art2/x/*.tar.gz > "$R/c-$2.log" 2>&1
    echo "0.26.0 c $2: exit $? in $((SECONDS - t0)) s"
  done
}
newer() {  # GPU 1: vLLM 0.29.0, empty caches, JIT allowed
  for sr in "sparse_mla 48407.cuda-sm90.tiny-deepseek-v32-mtp.14e52503" "sparse_mla 46514.cuda-sm90.tiny-deepseek-v32-mtp.6873e57f"; do
    set -- $sr; local t0=$SECONDS
    env PYTHONPATH="$V029" CUDA_VISIBLE_DEVICES=1 STACKGATE_RUNTIME_CACHES=/root/rt-029/$2 STACKGATE_REFUSE_JIT=0 \
      LD_LIBRARY_PATH=/root/stage029/torch213/nvidia/nccl/lib PYTORCH_SKIP_CUDNN_COMPATIBILITY_CHECK=1 \
      python3 -m ci run cuda-sm90 "$1" --host --unbaked --rows "$2" --out "$R/v029-$2" > "$R/v029-$2.log" 2>&1
    echo "0.29.0 $2: exit $? in $((SECONDS - t0)) s"
  done
}
summary() {
  PYTHONPATH=/tmp/pydeps python3 - "$R" <<'PY'
import glob, json, sys
from junitparser.xunit2 import JUnitXml
for f in sorted(glob.glob(f"{sys.argv[1]}/*/junit-*.xml")):
    for s in JUnitXml.fromfile(f):
        for c in s:
            if "[" not in c.name: continue
            p = {x.name: x.value for x in c.properties()}
            m = {k.split(".")[2]: json.loads(v).get("samples", [None])[:3] for k, v in p.items() if k.startswith("stackgate.metric.")}
            print(f.split("/")[-2], "|", (c.result[0].message or "")[:900] if c.result else "pass")
            print("   ", {k: v for k, v in m.items() if k in ("cold_first_request_ms", "warm_request_ms", "attn_output_rel_err",
                  "eager_decode_steps", "indexer_scoring_calls_first_request")}, p.get("stackgate.mixed_step"))
PY
}
baked & a=$!
newer & b=$!
trap 'kill -TERM $a $b 2>/dev/null; pkill -TERM -f "ci run cuda-sm90"; wait; pack; summary; exit 143' TERM INT
( while kill -0 $a 2>/dev/null || kill -0 $b 2>/dev/null; do sleep 20; pack 2>/dev/null; done ) &
wait $a $b
pack; summary; ls -la "$OUT"
