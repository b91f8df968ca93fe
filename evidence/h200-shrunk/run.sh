#!/usr/bin/env bash
# Every shrunk model's rows (the seven named models' own architectures, shrunk, random weights) and the DSpark /
# DFlash drafters' rows of cuda-sm90, one stream of rows per GPU of the host (two H200s: two streams of about equal
# length; one H200: one stream).
# Batch-1 rows come first (every model and track once per backend), then the larger batches.
# Each stream runs its rows in plan order, one `ci run --host --unbaked --keep-caches` call per row, every call of
# a GPU's stream on one JIT caches root (no AOT bake; what an earlier call compiled is reused); JIT allowed: this
# is about each architecture running its tracks, not JIT. A crash is the row's outcome, with its cause.
# usage: run.sh [one|b1|all]   (default b1); stop it with SIGTERM before a time limit (`timeout 560 run.sh`):
#        what finished comes back in $OUT; run it again to go on (rows with a result are skipped; a row the stop
#        interrupted runs again).
#        one: one batch-1 row per model, suite and change (FLASH_ATTN / MTP rows first); GLM-5.2's #48407 row
#             first, then the #52512 guard's positive control: the same row again with its top-k buffer broken
#             on purpose (STACKGATE_BREAK_TOPK=1), which must fail naming the all -1 reads; then the models
#             whose fixes have not run yet, one row each, before their second change.
# vLLM 0.26.0 staged as ../../../shared/gpu/README.md says.
set -u
cd "$(dirname "$0")/../.."
export PYTHONPATH=/root/stage/site:/root/stage/extra:/tmp/pydeps CUDA_HOME=/usr/local/cuda VLLM_USE_FLASHINFER_SAMPLER=0
export VLLM_NO_USAGE_STATS=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 STACKGATE_REFUSE_JIT=0
# JIT allowed (STACKGATE_REFUSE_JIT=0) lets FlashInfer's JIT run too: ci run leaves cuda-sm90's FLASHINFER_DISABLE_JIT
# unset, as no FlashInfer module is prebuilt here, while vLLM 0.26.0's default path for a block-FP8 linear on SM90 is
# FlashInfer's fp8_blockscale_gemm_90 (GLM-5.2, Hy3: FINDINGS.md). Building it needs nvcc ($CUDA_HOME) and ninja
# (a ninja wheel among .pydeps puts one in /tmp/pydeps/bin); the sources ship in flashinfer/data/csrc.
export PATH="$PATH:/tmp/pydeps/bin"
python3 -m pip install -q --no-index --no-deps --target /tmp/pydeps .pydeps/*.whl 2>/dev/null
echo "FlashInfer JIT: nvcc $(command -v "$CUDA_HOME/bin/nvcc" || echo missing), ninja $(command -v ninja || echo missing)"
WHICH=${1:-b1}
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l); [ "$NGPU" -ge 1 ] || NGPU=1
R=/root/res-shrunk
mkdir -p "$R"
pack() { rm -rf "$R"/*/logs/*.result.json; tar -C /root -czf "$OUT/shrunk-$WHICH.tar.gz" res-shrunk; }

# the plan: "stream suite row" lines, rows already run skipped, balanced over two streams in plan order
python3 - "$WHICH" "$R" "$NGPU" > "$R/plan-$WHICH.txt" <<'PY'
import glob, json, subprocess, sys
which, res, streams = sys.argv[1], sys.argv[2], min(int(sys.argv[3]), 2)
rows = json.loads(subprocess.run([sys.executable, "-m", "ci", "plan", "--target", "cuda-sm90", "--format", "json"],
                                 capture_output=True, text=True, check=True).stdout)["rows"]
from junitparser.xunit2 import JUnitXml


def finished(pattern):  # row ids with a result in these JUnit files; a row stopped by SIGTERM runs again
    out = set()
    for f in glob.glob(pattern):
        for suite in JUnitXml.fromfile(f):
            for case in suite:
                res = case.result[0] if case.result else None
                if not (res is not None and (res.message or "").startswith("interrupted by SIG")):
                    out.add(case.name.split("[")[-1].rstrip("]"))
    return out


done = finished(f"{res}/gpu?-s*/junit-*.xml")
mine = [r for r in rows if r["model"].endswith("-shrunk") or r["model"] in ("tiny-qwen3-dspark", "tiny-qwen3-dflash")]
mine = [r for r in mine if which == "all" or int(r["batch"]) == 1]
prefer = ("FLASH_ATTN", "FLASHMLA_SPARSE")
# one GPU per stream: a row on one GPU before one that needs two (tp or dcp 2), which the stream would skip
mine.sort(key=lambda r: (int(r["batch"]), r["suite"], r["model"], r["change"], int(r["gpus"]) > 1,
                         r["spec_method"] is None, r["backend"] not in prefer, r["id"]))
if which == "one":  # the first of each model, suite and change
    firsts = {}
    for r in mine:
        firsts.setdefault((r["suite"], r["model"], r["change"]), r)
    mine = list(firsts.values())
    glm = firsts[("sparse_mla", "glm-5.2-shrunk", "48407")]
    # each model's first row before any model's second: one row per model shows whether its fix holds
    seen = {glm["model"]}
    mine = sorted(mine, key=lambda r: (r is not glm, r["model"] in seen or seen.add(r["model"]) or False))
todo = [r for r in mine if not any(r["id"] in d for d in done)]
lines = [(r["suite"], r["id"]) for r in todo]
if which == "one" and not finished(f"{res}/gpu?-break-*/junit-*.xml"):
    lines.insert(1 if lines and lines[0][1] == glm["id"] else 0, ("break", glm["id"]))
for n, (suite, rid) in enumerate(lines):
    print(n % streams, suite, rid)
PY
echo "$(wc -l < "$R/plan-$WHICH.txt") rows to run"

stream() {  # stream GPU: its rows in plan order, one ci run each, on the GPU's own caches root
  local gpu=$1 suite id run broken t0 name root="/root/rt-shrunk/gpu$1"
  while read -r g suite id; do
    [ "$g" = "$gpu" ] || continue
    t0=$SECONDS name="gpu$gpu-$suite-${id%%.*}-${id#*.cuda-sm90.}" broken=0 run=$suite
    [ "$suite" = break ] && broken=1 run=sparse_mla
    STACKGATE_BREAK_TOPK=$broken STACKGATE_RUNTIME_CACHES=$root CUDA_VISIBLE_DEVICES=$gpu python3 -m ci run \
      cuda-sm90 "$run" --host --unbaked --keep-caches --rows "$id" --timeout "${ROW_TIMEOUT:-300}" --out "$R/$name" \
      > "$R/$name.log" 2>&1
    echo "$name: exit $? in $((SECONDS - t0)) s"
  done < "$R/plan-$WHICH.txt"
}
stream 0 & a=$!
b=$a; [ "$NGPU" -ge 2 ] && { stream 1 & b=$!; }
# stopped: each ci run is told (it writes the JUnit of what finished and of the row interrupted), and waited for;
# the streams are subshells, so `wait` alone returned at once and packed before any JUnit was written
trap 'kill -TERM $a $b 2>/dev/null; pkill -TERM -f "ci run cuda-sm90"
      for _ in $(seq 25); do pgrep -f "ci run cuda-sm90" > /dev/null || break; sleep 1; done; pack; exit 143' TERM INT
( while kill -0 $a 2>/dev/null || kill -0 $b 2>/dev/null; do sleep 30; pack 2>/dev/null; done ) &
wait $a $b
# the report of the rows as planned (the broken run stays out of it: its row would be there twice)
python3 -m ci report "$R"/gpu?-sp*/junit-*.xml --out "$R/report" > "$R/report.log" 2>&1; tail -n 1 "$R/report.log"
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
