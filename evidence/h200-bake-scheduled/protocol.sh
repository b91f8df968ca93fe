#!/usr/bin/env bash
# #52 on a bare H200 host (no docker), from the repository root after ../../../shared/gpu/README.md's staging
# (/root/stage): the scheduled host bake of the target's tiny random-weight rows (rows.txt) from empty caches, then the
# run of every row the bake finished, on a fresh caches root holding only the artefact, JIT refused. Each phase's
# output, JUnit, costs and summary go to $OUT as they end (a lease cut short keeps what finished).
#   BAKE_S, RUN_S: the phases' --deadline; TARGET, ROWS_FILE: another target's rows (the CPU rehearsal: cpu).
set -u
cd "$(dirname "$0")/../.."
here=evidence/h200-bake-scheduled
E=${E-"bash evidence/h200-env.sh"}
TARGET=${TARGET:-cuda-sm90}
ROWS=$(paste -sd, "${ROWS_FILE:-$here/rows.txt}")
W=${WORK:-/root/work52}
OUT=${OUT:-$W/out}
mkdir -p "$W" "$OUT"
export STACKGATE_RUNTIME_CACHES=$W/rt STACKGATE_COSTS=$W/costs.json PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/host.txt" 2>&1
t0=$(date +%s)
$E python3 -m ci bake "$TARGET" --host --rows "$ROWS" --out "$W/art" --timeout 300 --deadline "${BAKE_S:-200}" \
  > "$OUT/bake.log" 2>&1
echo "bake exit $? wall $(( $(date +%s) - t0 )) s" | tee -a "$OUT/bake.log"
bake_wall=$(( $(date +%s) - t0 ))
art=$(ls -t "$W"/art/caches-"$TARGET"-warm-*.tar.gz | head -1)
baked=$(python3 $here/summarize.py --baked "$W/art/bake-results")
(cd "$W/art" && tar -cJf "$OUT/bake-results.tar.xz" bake-results)
rm -rf "$STACKGATE_RUNTIME_CACHES"  # a fresh root: the artefact alone serves the run
t1=$(date +%s)
STACKGATE_REFUSE_JIT=1 $E python3 -m ci main --host --target "$TARGET" --rows "$baked" --caches "$art" \
  --timeout 300 --deadline "${RUN_S:-100}" --out "$W/run" > "$OUT/run.log" 2>&1
echo "run exit $? wall $(( $(date +%s) - t1 )) s" | tee -a "$OUT/run.log"
run_wall=$(( $(date +%s) - t1 ))
cp "$STACKGATE_COSTS" "$OUT/costs.json"
python3 $here/summarize.py "$W/art/bake-results" "$bake_wall" "$W/run" "$run_wall" | tee "$OUT/summary.txt"
(cd "$W" && tar -cJf "$OUT/run.tar.xz" --exclude='*.tar.gz' run)
ls -la "$art" >> "$OUT/summary.txt"
