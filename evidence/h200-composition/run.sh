#!/usr/bin/env bash
# The seed table's two-GPU composition rows on a host with two H200s, tiny models with random weights, batch 1:
#   EAGLE at TP 2 with FLASH_ATTN, TRITON_ATTN, FLASHINFER         (keys: fa triton flashinfer;   group: tp)
#   EAGLE at DP 2 in FULL_AND_PIECEWISE, PIECEWISE, NONE            (keys: dp-fp dp-pw dp-none;    group: dp)
#   DeepSeek-V3.2-style MTP with FLASHMLA_SPARSE at TP 2 and DCP 2  (keys: mtp-tp mtp-dcp;         group: mtp)
# Each row runs in its own process with the runner's hang timeout (--timeout, $TIMEOUT s, default 300): a crash
# is recorded with its cause (the log's illegal memory access or failed assertion), a timeout as a hang. Every
# row gets its own two GPUs (CUDA_VISIBLE_DEVICES by UUID) and NVLink multicast stays off.
#
# usage: run.sh KEY|GROUP...   e.g. `run.sh tp`, then `run.sh dp`, then `run.sh mtp` (one command each: a group
#        is 2 to 3 rows, each two engine starts, about 3 to 9 minutes); `run.sh all` runs the eight in one go.
#        Every call ends with the seed-table summary of all results so far, and packs them into $OUT.
# Under a time limit, stop it with SIGTERM before the limit (`timeout 560 run.sh tp`): the rows that finished and
# the one interrupted come back in $OUT (a first attempt lost 560 s of results to a kill without this).
# Every call on a host shares one JIT caches root (--unbaked --keep-caches: no AOT bake, JIT allowed, what an
# earlier call compiled reused), so only the host's first row pays the compiles. vLLM 0.26.0 staged as for
# evidence/h200-nojit.
set -u
cd "$(dirname "$0")/../.."
export PYTHONPATH=/root/stage/site:/root/stage/extra:/tmp/pydeps CUDA_HOME=/usr/local/cuda VLLM_USE_FLASHINFER_SAMPLER=0
export VLLM_NO_USAGE_STATS=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # ci run sets them too
export STACKGATE_REFUSE_JIT=0  # JIT allowed: FlashInfer and PTX JIT too (ci run turns their target switches off)
python3 -m pip install -q --no-index --no-deps --target /tmp/pydeps .pydeps/*.whl 2>/dev/null
TIMEOUT=${TIMEOUT:-300}
R=${RESULTS:-/root/res-composition}
OUT=${OUT:-$R/out}
mkdir -p "$R" "$OUT"

declare -A ROW=(
  [fa]=composition.cuda-sm90.tiny-llama-eagle.a5847d68             # EAGLE, TP 2, FLASH_ATTN
  [triton]=composition.cuda-sm90.tiny-llama-eagle.7e689947         # EAGLE, TP 2, TRITON_ATTN (seed: IMA)
  [flashinfer]=composition.cuda-sm90.tiny-llama-eagle.af607890     # EAGLE, TP 2, FLASHINFER (seed: IMA)
  [dp-fp]=composition.cuda-sm90.tiny-llama-eagle.c9fe9121          # EAGLE, DP 2, FULL_AND_PIECEWISE (seed: assert)
  [dp-pw]=composition.cuda-sm90.tiny-llama-eagle.eb0b19d8          # EAGLE, DP 2, PIECEWISE (seed: assert)
  [dp-none]=composition.cuda-sm90.tiny-llama-eagle.35e4753e        # EAGLE, DP 2, NONE (seed: hang)
  [mtp-tp]=composition.cuda-sm90.tiny-deepseek-v32-mtp.eecf0286    # MTP, TP 2, FLASHMLA_SPARSE, auto KV
  [mtp-dcp]=composition.cuda-sm90.tiny-deepseek-v32-mtp.6d924107   # MTP, TP 2 + DCP 2, FLASHMLA_SPARSE, fp8_ds_mla
)
declare -A GROUP=([tp]="fa triton flashinfer" [dp]="dp-fp dp-pw dp-none" [mtp]="mtp-tp mtp-dcp"
                  [all]="fa triton flashinfer dp-fp dp-pw dp-none mtp-tp mtp-dcp")

keys=()
for arg in "$@"; do
  if [ -n "${GROUP[$arg]:-}" ]; then keys+=(${GROUP[$arg]}); elif [ -n "${ROW[$arg]:-}" ]; then keys+=("$arg")
  else echo "unknown key $arg: one of ${!ROW[*]} or a group: ${!GROUP[*]}" >&2; exit 2; fi
done
[ ${#keys[@]} -gt 0 ] || { sed -n '2,16p' "$0"; exit 2; }

nvidia-smi -L
ids=$(for k in "${keys[@]}"; do printf '%s,' "${ROW[$k]}"; done); ids=${ids%,}
name=$(IFS=-; echo "${keys[*]}")
RT="$(dirname "$R")/rt-composition"  # every call's JIT caches root on this host
rm -rf "$R/$name"
t0=$SECONDS
pack() { rm -rf "$R"/*/logs/*.result.json
  tar -C "$(dirname "$R")" --exclude="$(basename "$R")/out" -czf "$OUT/composition-$name.tar.gz" "$(basename "$R")"; }
# Stopped from outside (the device call's limit, `timeout`), ci run is told first: it writes the JUnit of the rows
# that finished and of the one interrupted, and what there is comes back. Meanwhile the logs are packed every 30 s.
STACKGATE_RUNTIME_CACHES=$RT python3 -m ci run cuda-sm90 composition --host --unbaked --keep-caches \
  --rows "$ids" --timeout "$TIMEOUT" --out "$R/$name" > "$R/$name.log" 2>&1 &
run=$!
trap 'kill -TERM $run 2>/dev/null; wait $run; pack; echo "$name: stopped after $((SECONDS - t0)) s"; exit 143' TERM INT
( while kill -0 $run 2>/dev/null; do sleep 30; pack 2>/dev/null; done ) &
wait $run
echo "$name: ci run exit $? in $((SECONDS - t0)) s (exit 1: a row failed, crashed or hung; the table says which)"
tail -n 12 "$R/$name.log"

# The seed table's shape over every result so far: runs / crash (cause) / hang / not run (needs N GPUs)
python3 -m ci report "$R"/*/junit-*.xml --out "$R/report" > "$R/report.log" 2>&1 || cat "$R/report.log"
python3 - "$R/report/report.md" <<'PY'
import sys
md = open(sys.argv[1]).read().replace("\\_", "_")
section = md.split("## Composition: ", 1)[-1].split("\n## ", 1)[0]
print(next((line for line in section.splitlines() if line.startswith("The seed table")), ""))
for line in section.splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if not line.startswith("|") or len(cells) < 16 or cells[0] in ("Row", "") or set(cells[0]) <= set("-: "):
        continue
    row, _, _, gpus, spec, tp, dp, ep, mode, dcp, _, kv, backend, runs, cause, seed = cells[:16]
    if runs == "not run" and ".tiny-" not in row:
        continue  # the real models' rows (no weights here) and the 8-GPU ones stay in report.md
    print(f"{row:52} {gpus}GPU {spec:5} TP{tp} DP{dp} EP{ep} DCP{dcp} {mode:18} {kv:10} {backend:15} "
          f"{runs:14} seed: {seed[:40]:40} {cause[:160]}")
PY
pack && ls -la "$OUT"
