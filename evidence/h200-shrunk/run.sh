#!/usr/bin/env bash
# Every shrunk model's rows (the seven named models' own architectures, shrunk, random weights) and the DSpark /
# DFlash drafters' rows of cuda-sm90, in streams of rows: PER_GPU streams on each GPU of the host (default 1; the
# rows' fixed KV budget, 12 GiB each, lets several share one GPU: up to 7 on an H200). The rows of one model and change stay in one stream, on their
# own JIT caches root; plan.py spreads these groups over the streams by row count.
# Batch-1 rows come first (every model and track once per backend), then the larger batches.
# A stream runs its rows in plan order, one `ci run --host --unbaked --keep-caches` call per row (no AOT bake; what
# an earlier call compiled for the group is reused); JIT allowed: this is about each architecture running its
# tracks, not JIT. A crash is the row's outcome, with its cause. Streams sharing a GPU slow each other down: their
# latency figures show only that the rows ran.
# usage: [PER_GPU=n] [ROW_TIMEOUT=s] [ONLY=model-text] [GROUP=row] run.sh [one|b1|all]   (default b1); stop it with SIGTERM before a time limit
#        (`timeout 560 run.sh`): what finished comes back in $OUT; run it again to go on (rows with a result are
#        skipped; a row the stop interrupted runs again).
#        GLM-5.2's #48407 row runs first in its stream, then the #52512 guard's positive control: the same row again
#        with its top-k buffer broken on purpose (STACKGATE_BREAK_TOPK=1), which must fail naming the all -1 reads.
#        one: one batch-1 row per model, suite and change (FLASH_ATTN / MTP rows first), each model's first row
#             before any model's second.
# vLLM 0.26.0 staged as ../../../shared/gpu/README.md says.
set -u
cd "$(dirname "$0")/../.."
export PYTHONPATH=/root/stage/site:/root/stage/extra:/tmp/pydeps CUDA_HOME=/usr/local/cuda VLLM_USE_FLASHINFER_SAMPLER=0
export VLLM_NO_USAGE_STATS=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 STACKGATE_REFUSE_JIT=0
# JIT allowed (STACKGATE_REFUSE_JIT=0) lets FlashInfer's JIT run too: ci run leaves cuda-sm90's FLASHINFER_DISABLE_JIT
# unset, as no FlashInfer module is prebuilt here (FINDINGS.md). Building one needs nvcc ($CUDA_HOME) and ninja
# (a ninja wheel among .pydeps puts one in /tmp/pydeps/bin); the sources ship in flashinfer/data/csrc.
export PATH="$PATH:/tmp/pydeps/bin"
# DeepSeek-V4 needs two runtime kernel DSLs that vLLM 0.26.0 requires and the image's lock has, but the staging recipe
# leaves out: TileLang for its mHC kernels (tilelang==0.1.9, z3-solver, ml-dtypes, torch-c-dlpack-ext) and the CuTe
# DSL for its KV compressor (nvidia-cutlass-dsl[cu13]==4.6.0, quack-kernels==0.6.3). They travel as wheels in
# /root/stage/wheels, or as those wheels' contents unpacked into /tmp/pydeps before the call (smaller in xz). The CuTe DSL puts `cutlass` on sys.path through a .pth file, which Python reads in
# site-packages only, not in a PYTHONPATH folder: its dsl_packages folder is named on PYTHONPATH instead.
export PYTHONPATH="$PYTHONPATH:/tmp/pydeps/nvidia_cutlass_dsl/dsl_packages"
python3 -m pip install -q --no-index --no-deps --target /tmp/pydeps .pydeps/*.whl /root/stage/wheels/*.whl 2>/dev/null \
  || python3 -m pip install -q --no-index --no-deps --target /tmp/pydeps .pydeps/*.whl 2>/dev/null
python3 -c "import tilelang, cutlass.cute, quack; print('tilelang', tilelang.__version__, 'CuTe DSL', cutlass.__version__)" \
  2>&1 | tail -n 1
echo "FlashInfer JIT: nvcc $(command -v "$CUDA_HOME/bin/nvcc" || echo missing), ninja $(command -v ninja || echo missing)"
WHICH=${1:-b1}
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l); [ "$NGPU" -ge 1 ] || NGPU=1
STREAMS=$((NGPU * ${PER_GPU:-1}))
# Inductor compiles with one worker per core in each engine: streams sharing the host's cores share them out
export TORCHINDUCTOR_COMPILE_THREADS=$(( $(nproc) / STREAMS > 1 ? $(nproc) / STREAMS : 1 ))
R=/root/res-shrunk
mkdir -p "$R"
pack() { rm -rf "$R"/*/logs/*.result.json; tar -C /root -czf "$OUT/shrunk-$WHICH.tar.gz" res-shrunk; }

# the plan: "stream suite row group gpus" lines, rows already run skipped
python3 "evidence/h200-shrunk/plan.py" "$WHICH" "$R" "$STREAMS" > "$R/plan-$WHICH.txt" || exit 1
echo "$(wc -l < "$R/plan-$WHICH.txt") rows to run in $STREAMS streams on $NGPU GPUs"

stream() {  # one stream: its rows in plan order, one ci run each, on its GPU and each group's own caches root
  local n=$1 gpu=$(($1 % NGPU)) s suite id group gpus run broken t0 name vis
  while read -r s suite id group gpus; do
    [ "$s" = "$n" ] || continue
    # a row on several GPUs (tp or dcp 2) sees all of the host's; on a one-GPU host it skips, saying so
    vis=$gpu; [ "${gpus:-1}" -gt 1 ] && vis=$(seq -s, 0 $((NGPU - 1)))
    t0=$SECONDS name="s$n-$suite-${id%%.*}-${id#*.cuda-sm90.}" broken=0 run=$suite
    [ "$suite" = break ] && broken=1 run=sparse_mla
    STACKGATE_BREAK_TOPK=$broken STACKGATE_RUNTIME_CACHES="/root/rt-shrunk/$group" CUDA_VISIBLE_DEVICES=$vis \
      python3 -m ci run cuda-sm90 "$run" --host --unbaked --keep-caches --rows "$id" --timeout "${ROW_TIMEOUT:-300}" \
      --out "$R/$name" > "$R/$name.log" 2>&1
    echo "$name: exit $? in $((SECONDS - t0)) s (GPU $vis)"
  done < "$R/plan-$WHICH.txt"
}
pids=""
for n in $(seq 0 $((STREAMS - 1))); do stream "$n" & pids="$pids $!"; done
# stopped: each ci run is told (it writes the JUnit of what finished and of the row interrupted), and waited for;
# the streams are subshells, so `wait` alone returned at once and packed before any JUnit was written
trap 'kill -TERM $pids $packer 2>/dev/null; pkill -TERM -f "ci run cuda-sm90"
      for _ in $(seq 25); do pgrep -f "ci run cuda-sm90" > /dev/null || break; sleep 1; done; pack; exit 143' TERM INT
( while sleep 30; do pack 2>/dev/null; done ) & packer=$!
wait $pids
kill $packer 2>/dev/null
# the report of the rows as planned (the broken run stays out of it: its row would be there twice)
python3 -m ci report "$R"/s*-sp*/junit-*.xml --out "$R/report" > "$R/report.log" 2>&1; tail -n 1 "$R/report.log"
python3 - "$R" <<'PY'  # one line per row run: outcome and the start of its message
import glob, sys
from junitparser.xunit2 import JUnitXml
for f in sorted(glob.glob(f"{sys.argv[1]}/*/junit-*.xml")):
    for suite in JUnitXml.fromfile(f):
        for case in suite:
            res = case.result[0] if case.result else None
            what = type(res).__name__.lower() if res is not None else "pass"
            print(f.split("/")[-2][:22], case.name.split("[")[-1].rstrip("]")[:44], what, (res.message or "")[:230] if res is not None else "")
PY
pack; ls -la "$OUT"
