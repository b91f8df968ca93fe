#!/usr/bin/env bash
# Every shrunk model's rows (the seven named models' own architectures, shrunk, random weights) and the DSpark /
# DFlash drafters' rows of cuda-sm90, on a host with two H200s: two streams, one per GPU, of about equal length.
# Batch-1 rows come first (every model and track once per backend), then the larger batches.
# Each stream runs its rows through `ci run --host --unbaked` calls of one suite each, every call from an empty
# JIT caches root of its own (the rows after the first reuse what it compiled); JIT allowed: this is about each
# architecture running its tracks, not JIT. A crash is the row's outcome, with its cause.
# usage: run.sh [b1|all]   (default b1); stop it with SIGTERM before a time limit (`timeout 560 run.sh`):
#        what finished comes back in $OUT; run it again to go on (rows with a JUnit already are skipped).
# vLLM 0.26.0 staged as ../../../shared/gpu/README.md says.
set -u
cd "$(dirname "$0")/../.."
export PYTHONPATH=/root/stage/site:/root/stage/extra:/tmp/pydeps CUDA_HOME=/usr/local/cuda VLLM_USE_FLASHINFER_SAMPLER=0
export VLLM_NO_USAGE_STATS=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 STACKGATE_REFUSE_JIT=0
python3 -m pip install -q --no-index --no-deps --target /tmp/pydeps .pydeps/*.whl 2>/dev/null
WHICH=${1:-b1}
R=/root/res-shrunk
mkdir -p "$R"
pack() { rm -rf "$R"/*/logs/*.result.json; tar -C /root -czf "$OUT/shrunk-$WHICH.tar.gz" res-shrunk; }

# the plan: "stream suite row" lines, rows already run skipped, balanced over two streams in plan order
python3 - "$WHICH" "$R" > "$R/plan-$WHICH.txt" <<'PY'
import glob, json, subprocess, sys
which, res = sys.argv[1], sys.argv[2]
rows = json.loads(subprocess.run([sys.executable, "-m", "ci", "plan", "--target", "cuda-sm90", "--format", "json"],
                                 capture_output=True, text=True, check=True).stdout)["rows"]
done = {f.split("/")[-1].split("[")[-1] for f in glob.glob(f"{res}/*/logs/*.log")}
mine = [r for r in rows if r["model"].endswith("-shrunk") or r["model"] in ("tiny-qwen3-dspark", "tiny-qwen3-dflash")]
mine = [r for r in mine if (which == "all" or int(r["batch"]) == 1) and not any(r["id"] in d for d in done)]
mine.sort(key=lambda r: (int(r["batch"]), r["suite"], r["model"], r["change"], r["id"]))
for n, r in enumerate(mine):
    print(n % 2, r["suite"], r["id"])
PY
echo "$(wc -l < "$R/plan-$WHICH.txt") rows to run"

stream() {  # stream GPU: its rows, in calls of one suite each
  local gpu=$1 n=0 suite ids
  for suite in spec_decode sparse_mla; do
    ids=$(awk -v g="$gpu" -v s="$suite" '$1 == g && $2 == s {print $3}' "$R/plan-$WHICH.txt" | paste -sd, -)
    [ -n "$ids" ] || continue
    n=$((n + 1)); local t0=$SECONDS name="gpu$gpu-$suite-$WHICH"
    rm -rf "/root/rt-shrunk/$name"
    STACKGATE_RUNTIME_CACHES=/root/rt-shrunk/$name CUDA_VISIBLE_DEVICES=$gpu python3 -m ci run cuda-sm90 "$suite" \
      --host --unbaked --rows "$ids" --timeout 300 --shard "$gpu" --out "$R/$name" > "$R/$name.log" 2>&1
    echo "$name: exit $? in $((SECONDS - t0)) s"
  done
}
stream 0 & a=$!
stream 1 & b=$!
trap 'kill -TERM $a $b 2>/dev/null; pkill -TERM -f "ci run cuda-sm90"; wait; pack; exit 143' TERM INT
( while kill -0 $a 2>/dev/null || kill -0 $b 2>/dev/null; do sleep 30; pack 2>/dev/null; done ) &
wait $a $b
python3 -m ci report "$R"/*/junit-*.xml --out "$R/report" > "$R/report.log" 2>&1; tail -n 1 "$R/report.log"
grep -h "shrunk\|dspark\|dflash" "$R"/*.log | grep -E "passed|failed|error|skipped" | tail -n 40
pack; ls -la "$OUT"
