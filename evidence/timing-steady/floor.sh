#!/usr/bin/env bash
# The A/A floor of one row on one build, alone: the fork's build warmed once (untimed), then RUNS pairs of timed runs
# of the same build (arm "fork", arm "aa"), interleaved, each a fresh process alone on the GPU, under whatever
# timing conditions the environment sets (STACKGATE_TIMING_CPUS: engine.steady). The floor the report would compute
# for a --compare-without protocol's A/A arm comes from these two arms (ci.results.runs.floor_pct); summarize.py
# prints it per metric. Detached, like ../protocol.sh (start, then wait S / collect), from the repository root there:
#   ROW=46849.cuda-sm90.tiny-llama-eagle.cf3fb5bf RUNS=4 BUNDLE=.gpu-bundles-46849/fork.tar.gz \
#     STACKGATE_TIMING_CPUS=2-9 bash evidence/timing-steady/floor.sh start
# TARGET and SUITE (default cuda-sm90, spec_decode); for a rehearsal on a host without a GPU: TARGET=cpu SUITE=selftest
# with a cpu row, E= (no staged vLLM's environment) and BUNDLE= (no fork site: the host's Python as it is).
set -u
work=/root/work-floor
log=$work/protocol.log
pack() {
  cp "$log" "$work/nvidia-smi.csv" "$OUT/" 2>/dev/null
  [ -d "$work/arms" ] || { echo "nothing written under $work/arms yet"; return 0; }
  (cd "$work" && tar -cJf "$OUT/floor.tar.xz" arms warm-up) && echo "packed what is done so far into \$OUT/floor.tar.xz"
}
steps() { grep -E "^== |\] (pass|failure|error|skipped|missing) |^exit |error:" "$log" | tail -"${1:-40}"; }
# shellcheck source=evidence/detached.sh
source "$(dirname "$0")/../detached.sh"
case "${1:-}" in
  start)
    cd "$(dirname "$0")/../.." || exit 1
    rm -rf /root/sg-floor "$work" && mkdir -p "$work" && cp -a . /root/sg-floor && cd /root/sg-floor || exit 1
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$work/nvidia-smi.csv" 2>&1
    export TORCHINDUCTOR_COMPILE_THREADS=$(($(nproc) < 32 ? $(nproc) : 32)) W=$work ROW=${ROW:?the row to time} \
      RUNS=${RUNS:-4} BUNDLE=${BUNDLE-.gpu-bundles-46849/fork.tar.gz} TARGET=${TARGET:-cuda-sm90} \
      SUITE=${SUITE:-spec_decode} E=${E-bash evidence/h200-env.sh}
    # shellcheck disable=SC2016
    setsid nohup bash -c '
      read -r -a env <<< "$E"
      if [ -n "$BUNDLE" ]; then
        "${env[@]}" python3 -m ci fork build --host --bundle "$BUNDLE" --base-site /root/stage/site --site "$W/site" ||
          { echo "exit 3"; exit 3; }
        export FORK_SITE=$W/site
      fi
      run() { STACKGATE_RUNTIME_CACHES=$W/caches "${env[@]}" python3 -m ci run "$TARGET" "$SUITE" \
                --host --unbaked --keep-caches --alone --rows "$ROW" --timeout 600 --out "$1"; }
      echo "== warm-up (untimed: its first engine compiles)"; run "$W/warm-up"
      for i in $(seq "$RUNS"); do
        for arm in fork aa; do echo "== run $i of $RUNS: $arm"; run "$W/arms/$arm/run-$i"; done
      done
      echo "exit 0"' > "$log" 2>&1 < /dev/null &
    echo "started (pid $!): $RUNS runs a side of $ROW" ;;
  wait) wait_steps "${2:-540}" ;;
  collect) pack; steps 60 ;;
  *) echo "usage: ROW=ID RUNS=n BUNDLE=F protocol: floor.sh start | wait S | collect"; exit 2 ;;
esac
