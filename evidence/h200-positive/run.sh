#!/usr/bin/env bash
# The positive control: the tiny rows of the three merged changes on a vLLM release that contains them all (0.29.0:
# #48407 arrives in 0.27.0, #46849 in 0.28.0, #46514 in 0.29.0, by their presence probes; stack/changes/*.yaml,
# first_release) beside the same rows on stock 0.26.0, one vLLM per GPU, at once.
#   GPU 0: vLLM 0.26.0 (torch 2.11, the host's), staged under /root/stage as ../../../shared/gpu/README.md says
#   GPU 1: vLLM 0.29.0 (torch 2.13.0, triton 3.7.1, NCCL 2.29.7 beside the host's torch), staged under /root/stage029
# Each row from empty caches of its own (--unbaked), JIT allowed: this is about the change being present, not JIT.
# usage: run.sh KEY...   keys: 46514 46849 48407 (the rows below); stop it with SIGTERM before a time limit
#        (`timeout 560 run.sh 46514 48407`): what finished comes back in $OUT. Then, here:
#   python -m ci report v0.26.0 --compare v0.29.0 --label "vLLM 0.26.0" --label "vLLM 0.29.0" --out report
set -u
cd "$(dirname "$0")/../.."
export CUDA_HOME=/usr/local/cuda VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
export STACKGATE_REFUSE_JIT=0
python3 -m pip install -q --no-index --no-deps --target /tmp/pydeps .pydeps/*.whl 2>/dev/null
declare -A ROW=(
  [46514]="sparse_mla 46514.cuda-sm90.tiny-deepseek-v32-mtp.6873e57f"   # fp8_ds_mla mixed batch + MTP
  [46849]="spec_decode 46849.cuda-sm90.tiny-llama-eagle.cf3fb5bf"       # fused AR speculator graph
  [48407]="sparse_mla 48407.cuda-sm90.tiny-deepseek-v32-mtp.14e52503"   # indexer skip for short dense prefills
)
V026="/root/stage/site:/root/stage/extra:/tmp/pydeps"
# cutlass (DeepSeek-V3.2 attention imports it in 0.29.0) puts itself on the path by a .pth, which PYTHONPATH skips
V029="/root/stage029/torch213:/root/stage029/site:/root/stage029/extra:/root/stage029/extra/nvidia_cutlass_dsl/dsl_packages:/tmp/pydeps"
R=/root/res-positive
mkdir -p "$R"
pack() { rm -rf "$R"/*/*/logs/*.result.json; tar -C /root -czf "$OUT/positive-$(IFS=-; echo "$*").tar.gz" res-positive; }

stream() {  # stream GPU VERSION PYTHONPATH KEY...: the rows one after another, each from its own empty root
  local gpu=$1 v=$2 path=$3; shift 3
  for key in "$@"; do
    set -- ${ROW[$key]}; local suite=$1 id=$2 t0=$SECONDS
    env PYTHONPATH="$path" CUDA_VISIBLE_DEVICES=$gpu STACKGATE_RUNTIME_CACHES=/root/rt-positive/$v/$key \
      LD_LIBRARY_PATH=$([ "$v" = v0.29.0 ] && echo /root/stage029/torch213/nvidia/nccl/lib) \
      PYTORCH_SKIP_CUDNN_COMPATIBILITY_CHECK=1 \
      python3 -m ci run cuda-sm90 "$suite" --host --unbaked --rows "$id" --out "$R/$v/$key" > "$R/$v-$key.log" 2>&1
    echo "$v $key: exit $? in $((SECONDS - t0)) s"
  done
}

for key in "$@"; do [ -n "${ROW[$key]:-}" ] || { echo "unknown key $key: one of ${!ROW[*]}" >&2; exit 2; }; done
stream 0 v0.26.0 "$V026" "$@" & a=$!
stream 1 v0.29.0 "$V029" "$@" & b=$!
trap 'kill -TERM $a $b 2>/dev/null; pkill -TERM -f "ci run cuda-sm90"; wait; pack "$@"; exit 143' TERM INT
( while kill -0 $a 2>/dev/null || kill -0 $b 2>/dev/null; do sleep 30; pack "$@" 2>/dev/null; done ) &
wait $a $b
python3 - "$R" <<'PY'
import glob, json, sys
from junitparser.xunit2 import JUnitXml
for f in sorted(glob.glob(f"{sys.argv[1]}/*/*/junit-*.xml")):
    for s in JUnitXml.fromfile(f):
        for c in s:
            if "[" not in c.name: continue
            p = {x.name: x.value for x in c.properties()}
            m = {k.split(".")[2]: json.loads(v).get("samples", [None])[:3] for k, v in p.items() if k.startswith("stackgate.metric.")}
            msg = (c.result[0].message or "")[:300] if c.result else "pass"
            print(f.split("/")[-3], p.get("stackgate.vllm_version"), c.name.split("[")[1][:-1], msg)
            print("   ", {k: v for k, v in m.items() if k in ("engine_ready_s", "cold_first_request_ms", "warm_request_ms",
                  "decode_tok_s", "draft_graph_replays_per_step", "indexer_calls_skipped", "greedy_token_mismatches")})
PY
pack "$@"; ls -la "$OUT"
