#!/usr/bin/env bash
# The same 34 tiny rows of cuda-sm90 (both suites, random weights) run twice on one H200 by `ci run` alone: every row
# in a process of its own (--isolate), then the rows of one model and change in one process sharing its imports and
# engines (the default). Both from the same AOT bake (ci bake --host --aot-only, installed afresh before each run),
# JIT allowed; each suite's run holds its share of the GPU (--gpu-memory) and the two suites run side by side.
# vLLM 0.26.0 staged under /root/stage (../../../shared/gpu/README.md); the project's wheels travel in .pydeps.
# No scheduling here: the script picks the rows, sets the environment, calls ci bake and ci run, packs.
# usage: DEADLINE=s run.sh bake | isolate [--resume] | shared [--resume]   -> $OUT/<mode>.tar.gz, lines on stdout
set -u
cd "$(dirname "$0")/../.."
mode=${1:?bake, isolate or shared}; shift
python3 -m pip install -q --no-index --no-deps --target /tmp/pydeps .pydeps/*.whl 2>/dev/null
export PYTHONPATH=/root/stage/site:/root/stage/extra:/tmp/pydeps CUDA_HOME=/usr/local/cuda VLLM_USE_FLASHINFER_SAMPLER=0
export VLLM_NO_USAGE_STATS=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 STACKGATE_REFUSE_JIT=0 TORCHINDUCTOR_COMPILE_THREADS=2
R=/root/res-ab; mkdir -p "$R" /root/art
declare -A MEM=([spec_decode]=72 [sparse_mla]=67)  # GiB of the H200's 139 for each suite's run
declare -A PICK=([spec_decode]="tiny-llama-eagle/48804 tiny-deepseek-v3-mtp/48804 tiny-llama-eagle3/48804 tiny-llama-eagle3/46849"
                   [sparse_mla]="tiny-deepseek-v32-mtp/46514 tiny-deepseek-v32-mtp/48407")
rows() {  # the suite's rows of those model/change groups, by ci plan
  python3 -m ci plan --target cuda-sm90 --suite "$1" --format json | python3 -c '
import json, sys
want = set(sys.argv[1].split())
print(",".join(r["id"] for r in json.load(sys.stdin)["rows"] if r["model"] + "/" + r["change"] in want and r["gpus"] == 1))' "${PICK[$1]}"
}
case "$mode" in
  bake)  # one AOT artefact per suite's caches root (the root is part of its key); no GPU used
    for s in spec_decode sparse_mla; do
      ( STACKGATE_RUNTIME_CACHES=/root/rt-$s CUDA_VISIBLE_DEVICES= python3 -m ci bake cuda-sm90 --host --aot-only \
          --out /root/art/$s > "$R/bake-$s.log" 2>&1; echo "bake $s exit $?: $(tail -n 1 "$R/bake-$s.log")" ) &
    done; wait ;;
  isolate|shared)
    flag=(); [ "$mode" = isolate ] && flag=(--isolate)
    for s in spec_decode sparse_mla; do
      (
        resume=0; for a in "$@"; do [ "$a" = --resume ] && resume=1; done
        if [ $resume = 0 ]; then rm -rf /root/rt-$s; fi  # the bake alone, installed afresh: no earlier run's compiles
        t0=$(date +%s)
        STACKGATE_RUNTIME_CACHES=/root/rt-$s python3 -m ci run cuda-sm90 $s --host --caches /root/art/$s/*.tar.gz \
          --rows "$(rows $s)" --gpu-memory ${MEM[$s]} --deadline "${DEADLINE:-500}" --timeout 300 "${flag[@]}" "$@" \
          --out "$R/$mode-$s" >> "$R/$mode-$s.log" 2>&1
        echo "$mode $s: ci run exit $?, wall $(($(date +%s) - t0)) s"
      ) &
    done; wait
    grep -hE '^\[|rows:|scheduling|--resume|deadline|error' "$R/$mode"-*.log | cut -c1-160 ;;
esac
rm -f "$R"/*/logs/*.result.json
tar -C /root -czf "$OUT/$mode.tar.gz" res-ab && ls -la "$OUT/$mode.tar.gz"
