#!/usr/bin/env bash
# The whole random-weight matrix of a target on a bare GPU host (no docker), detached, so that a lease's calls only
# start, watch and collect it: the host bake of every row (rows.txt) from empty caches, the run of every row the bake
# finished (the artefact records them: --rows-baked) from its artefact alone on a fresh caches root with JIT refused,
# then ISOLATE_N of the rows that run ran to a result (one model and change after another: summarize.py --pick) again
# from the same artefact, each row a process of its own (--isolate). Where the fork's checkout is, make the
# rows and the fork's bundle first (no checkout on the host):
#   python -m ci fork bundle --out .gpu-bundles/fork.tar.gz
#   (rows.txt: evidence/matrix-sm90/README.md says how it was made)
# then stage vLLM 0.26.0 (../../../shared/gpu/README.md) and, from the repository root there, carrying .gpu-bundles
# and .pydeps in the call that starts it:
#   protocol.sh start      copies the tree to /root/sg-matrix, builds the fork's site over the staged release (BUNDLE)
#                          and starts the phases detached (setsid)
#   protocol.sh wait S     waits up to S seconds, printing each step as it comes, then packs what is done so far
#                          under $OUT (a machine given back between calls comes back bare: wait says so, exit 3)
#   protocol.sh collect    the same packing, and the last steps
#   protocol.sh split      the artefact in parts of 15 MiB; give K then puts parts 4K..4K+3 under $OUT, so that a lease
#                          too short for bake and run brings the artefact back; the next lease carries the parts
#                          (ignored folder, under 60 MiB a call) and starts PHASES=run,isolate with ART_PARTS=that
#                          folder (the artefact records the rows its bake finished)
#                          The artefact names its caches root ($WORK/rt): keep the same WORK (the default) on both.
# PHASES: bake,run,isolate (default: all three, in that order); BAKE_S, RUN_S, ISO_S: each phase's --deadline (exit 9
# with every JUnit written and a partial artefact packed; --resume goes on); ISOLATE_N (default 20); TARGET (default
# cuda-sm90; cpu for a rehearsal on a host without a GPU, with ROWS_FILE, E= and BUNDLE=); ROWS_FILE: other rows
# (default: rows.txt beside this script); BUNDLE: the fork's bundle (default
# .gpu-bundles/fork.tar.gz; empty: the staged release itself is judged); E: the command that sets up the environment
# (default: bash evidence/h200-env.sh).
set -u
work=${WORK:-/root/work-matrix}
tree=/root/sg-matrix
log=$work/protocol.log
steps() { grep -E "^== |^phase |\] (pass|failure|error|skipped|missing) |error:|^exit |rows: |deadline" "$log" | tail -"${1:-40}"; }
pack() {
  cp "$log" "$work"/host.txt "$work"/*.summary.txt "$OUT/" 2>/dev/null
  [ -d "$work/results" ] || { echo "nothing written under $work/results yet"; return 0; }
  (cd "$work" && tar -cJf "$OUT/matrix.tar.xz" --exclude='*.tar.gz' results costs.json 2>/dev/null) &&
    echo "packed what is done so far into \$OUT/matrix.tar.xz"
}
# one phase: its command's output into the log, then its exit status and wall time on a line of their own
phase() {
  local name=$1 t0=$SECONDS; shift
  echo "== phase $name: $*"
  "$@"
  echo "phase $name exit $? wall $((SECONDS - t0)) s"
}
# a phase's wall time in seconds, from its line in the log (0 where it has not run in this log)
wall() { sed -n "s/^phase $1 exit .* wall \([0-9]*\) s$/\1/p" "$log" | tail -1 | grep . || echo 0; }
phases() {
  local here=evidence/matrix-sm90 summarize=evidence/h200-bake-scheduled/summarize.py target=${TARGET:-cuda-sm90}
  local e rows art first
  read -ra e <<< "${E-bash evidence/h200-env.sh}"
  rows=$(paste -sd, "${ROWS_FILE:-$here/rows.txt}")
  export STACKGATE_RUNTIME_CACHES=$work/rt STACKGATE_COSTS=$work/costs.json PYTHONUNBUFFERED=1
  if [[ ,${PHASES:-bake,run,isolate}, == *,bake,* ]]; then
    resume=(); [ -d "$work/results/art/bake-results" ] && resume=(--resume)
    phase bake "${e[@]}" python3 -m ci bake "$target" --host --rows "$rows" --out "$work/results/art" --timeout 600 \
      --deadline "${BAKE_S:-1200}" "${resume[@]}"
  fi
  if [ -n "${ART_PARTS:-}" ]; then  # an earlier lease's artefact, brought back in parts (split, give) and carried here
    mkdir -p "$work/results/art" && art=$work/results/art/$(cat "$ART_PARTS/name.txt")
    cat "$ART_PARTS"/part.* > "$art"
    [ "$(sha256sum < "$art" | cut -d' ' -f1)" = "$(cat "$ART_PARTS/sha256.txt")" ] ||
      { echo "error: $art put together from $ART_PARTS does not match its sha256.txt: a part is missing or cut"; return; }
  fi
  art=$(ls -t "$work"/results/art/caches-"$target"-warm-*.tar.gz 2>/dev/null | head -1)
  [ -n "$art" ] || { echo "error: no artefact under $work/results/art: nothing to run from"; return; }
  if [ -d "$work/results/art/bake-results" ]; then
    python3 $summarize "$work/results/art/bake-results" "$(wall bake)" > "$work/bake.summary.txt" 2>&1
  fi
  if [[ ,${PHASES:-bake,run,isolate}, == *,run,* ]]; then
    rm -rf "$STACKGATE_RUNTIME_CACHES"  # a fresh root: the artefact alone serves the run
    phase run env STACKGATE_REFUSE_JIT=1 "${e[@]}" python3 -m ci main --host --target "$target" --rows "$rows" \
      --caches "$art" --rows-baked --timeout 600 --deadline "${RUN_S:-600}" --out "$work/results/run"
    python3 $summarize --names run "$work/results/run" "$(wall run)" > "$work/run.summary.txt" 2>&1
  fi
  if [[ ,${PHASES:-bake,run,isolate}, == *,isolate,* ]]; then
    first=$(python3 $summarize --pick "${ISOLATE_N:-20}" "$(python3 $summarize --baked "$work/results/run")")
    rm -rf "$STACKGATE_RUNTIME_CACHES"
    phase isolate env STACKGATE_REFUSE_JIT=1 "${e[@]}" python3 -m ci main --host --target "$target" --rows "$first" \
      --caches "$art" --isolate --timeout 600 --deadline "${ISO_S:-600}" --out "$work/results/isolate"
    { python3 $summarize --names isolate "$work/results/isolate" "$(wall isolate)"
      python3 $summarize --compare "$work/results/run" "$work/results/isolate"; } > "$work/isolate.summary.txt" 2>&1
  fi
  ls -la "$art"
}
# shellcheck source=evidence/detached.sh
source "$(dirname "$0")/../detached.sh"
case "${1:-}" in
  start)
    cd "$(dirname "$0")/../.." || exit 1
    rm -rf "$tree" && mkdir -p "$work" && cp -a . "$tree" && cd "$tree" || exit 1
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$work/host.txt" 2>&1
    bundle=${BUNDLE-.gpu-bundles/fork.tar.gz}
    if [ -n "$bundle" ]; then
      rm -rf "$work/fork-site"
      ${E-bash evidence/h200-env.sh} python3 -m ci fork build --host --bundle "$bundle" --base-site /root/stage/site \
        --site "$work/fork-site" > "$log" 2>&1 || { cat "$log"; exit 1; }
      export FORK_SITE=$work/fork-site  # evidence/h200-env.sh puts it before the staged release
    fi
    export -f phase phases wall
    export work log
    setsid nohup bash -c 'phases; echo "exit $?"' >> "$log" 2>&1 < /dev/null &
    echo "started (pid $!): phases ${PHASES:-bake,run,isolate} of $(wc -l < "${ROWS_FILE:-evidence/matrix-sm90/rows.txt}") rows" ;;
  wait)
    wait_steps "${2:-540}" ;;
  collect)
    pack
    steps 60 ;;
  split)  # the newest artefact in parts of 15 MiB under $work/art-parts, for a later lease's run
    art=$(ls -t "$work"/results/art/caches-*-warm-*.tar.gz | head -1)
    rm -rf "$work/art-parts" && mkdir -p "$work/art-parts" && cd "$work/art-parts" || exit 1
    basename "$art" > name.txt && sha256sum < "$art" | cut -d' ' -f1 > sha256.txt && split -b 15M -d -a 2 "$art" part.
    echo "$(ls part.* | wc -l) parts of $art; give 0, give 1, ... bring them back, four a call" ;;
  give)  # parts 4K to 4K+3 of the split artefact, with its name and sha256, into $OUT (8 files of 16 MiB come back)
    cd "$work/art-parts" && cp name.txt sha256.txt "$OUT/" && ls part.* | sed -n "$((4 * ${2:-0} + 1)),$((4 * ${2:-0} + 4))p" |
      xargs -r cp -t "$OUT/" && ls "$OUT" ;;
  *) echo "usage: [PHASES=bake,run,isolate BAKE_S= RUN_S= ISO_S= ISOLATE_N= TARGET= BUNDLE= E= ART_PARTS=]"
     echo "       protocol.sh start | wait S | collect | split | give K"
     exit 2 ;;
esac
