#!/usr/bin/env bash
# The #52512 guard on the bug it guards against: #48407's fp8_ds_mla rows of GLM-5.2 (shrunk) and DeepSeek-V3.2
# (tiny) on vLLM 0.28.0, which holds #51298's short-prefill skip in the DeepSeek-V3.2/GLM-5.2 layer of
# vllm/models/deepseek_v32/ and not #52512, and on the same build with #52512's vllm/ diff applied over it, side by
# side on one H200, each side in one `ci run` from its own empty caches root (JIT allowed: this is about the guard,
# not JIT). 0.28.0 builds both models from deepseek_v2.py by default: the rows ask for that layer through vLLM's
# model_class_overrides ($STACKGATE_MODEL_CLASS_OVERRIDES), which needs an fp8 KV cache (fp8_ds_mla on FLASHMLA_SPARSE).
# vLLM 0.28.0 with torch 2.13 staged under /root/stage as the staging notes say; #52512's diff travels as
# .gpu-stage-028/52512.patch; the project's wheels travel in .pydeps. No scheduling here: ci run does that.
# usage: DEADLINE=s run.sh MODE [--resume]   -> $OUT/MODE.tar.gz, one line per row on stdout; MODE is
#   layer:   the fp8_ds_mla rows without MTP, on vllm/models/deepseek_v32/ (model_class_overrides)
#   mtp:     the fp8_ds_mla rows with the MTP drafter on, on that layer
#   default: GLM-5.2's batch-1 rows with vLLM's default KV, on the model class 0.28.0 picks itself (deepseek_v2.py)
# Modes may run side by side (each ci run then holds its --gpu-memory share of the H200).
set -u
cd "$(dirname "$0")/../.."
python3 -m pip install -q --no-index --no-deps --target /tmp/pydeps .pydeps/*.whl 2>/dev/null
if [ ! -d /root/stage52512/vllm ]; then  # the fix side: the same tree, #52512 applied
  mkdir -p /root/stage52512 && cp -a /root/stage/site/vllm /root/stage52512/ \
    && patch -s -p1 -d /root/stage52512 < .gpu-stage-028/52512.patch || { echo "52512.patch does not apply"; exit 1; }
fi
export CUDA_HOME=/usr/local/cuda VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 HF_HUB_OFFLINE=1
export PYTHONUNBUFFERED=1 STACKGATE_REFUSE_JIT=0 TORCHINDUCTOR_COMPILE_THREADS=4 PATH="$PATH:/tmp/pydeps/bin"
export LD_LIBRARY_PATH=/root/stage/site/nvidia/nccl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}  # torch 2.13's NCCL 2.29
export PYTORCH_SKIP_CUDNN_COMPATIBILITY_CHECK=1  # torch 2.13 wants cuDNN 9.20, the host has 9.19; no row convolves
MODE=${1:?layer, mtp or default}; shift
V32=vllm.models.deepseek_v32.nvidia.model:DeepseekV32ForCausalLM
[ "$MODE" = default ] || export STACKGATE_MODEL_CLASS_OVERRIDES="{\"GlmMoeDsaForCausalLM\": \"$V32\", \"DeepseekV32ForCausalLM\": \"$V32\"}"
BASE=/root/stage/site:/root/stage/extra:/tmp/pydeps:/root/stage/site/nvidia_cutlass_dsl/dsl_packages
declare -A PP=([bug]=$BASE [fix]=/root/stage52512:$BASE)
ROWS=$(PYTHONPATH=/tmp/pydeps python3 -m ci plan --target cuda-sm90 --suite sparse_mla --change 48407 --format json \
  | python3 -c 'import json, sys
mode = sys.argv[1]
def wanted(r):
    if mode == "default":
        return r["model"] == "glm-5.2-shrunk" and r["kv_cache_dtype"] == "auto" and r["batch"] == 1
    return (r["model"] in ("glm-5.2-shrunk", "tiny-deepseek-v32-mtp") and r["kv_cache_dtype"] == "fp8_ds_mla"
            and bool(r["spec_method"]) == (mode == "mtp"))
print(",".join(r["id"] for r in json.load(sys.stdin)["rows"] if wanted(r)))' "$MODE")
echo "$MODE rows: $ROWS"
R=/root/res-52512; mkdir -p "$R"
for side in bug fix; do
  (
    t0=$(date +%s)
    PYTHONPATH=${PP[$side]} STACKGATE_RUNTIME_CACHES=/root/rt-$MODE-$side python3 -m ci run cuda-sm90 sparse_mla --host \
      --unbaked --keep-caches --rows "$ROWS" --gpu-memory "${GIB:-66}" --deadline "${DEADLINE:-520}" --timeout 600 \
      "$@" --out "$R/$MODE-$side" >> "$R/$MODE-$side.log" 2>&1
    echo "$MODE $side: ci run exit $?, wall $(($(date +%s) - t0)) s"
  ) &
done
wait
PYTHONPATH=/tmp/pydeps python3 - "$R" "$MODE" <<'PY'  # one line per row: side, row, outcome, the start of its message
import glob, sys
from junitparser.xunit2 import JUnitXml
for f in sorted(glob.glob(f"{sys.argv[1]}/{sys.argv[2]}-*/junit-*.xml")):
    for suite in JUnitXml.fromfile(f):
        for case in suite:
            res = case.result[0] if case.result else None
            what = type(res).__name__.lower() if res is not None else "pass"
            print(f.split("/")[-2], case.name.split("[")[-1].rstrip("]")[-28:], what, (res.message or "")[:400] if res is not None else "")
PY
tail -n 3 "$R/$MODE"-*.log | cut -c1-300
rm -f "$R"/*/logs/*.result.json
(cd /root && tar -czf "$OUT/$MODE.tar.gz" res-52512/"$MODE"-*) && ls -la "$OUT/$MODE.tar.gz"
