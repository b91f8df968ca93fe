#!/usr/bin/env bash
# One timing protocol of `ci main --compare-without CHANGE` on a bare GPU host (no docker), detached, so that a lease's
# calls only start, watch and collect it. Where the fork's checkout is, first make both builds' bundles (the host has
# no checkout), e.g. for CHANGE=46849:
#   python -m ci fork bundle --out .gpu-bundles/fork.tar.gz
#   python -m ci fork bundle --without 46849 --out .gpu-bundles/without-46849.tar.gz
# then stage vLLM 0.26.0 (../../shared/gpu/README.md) and run this from the repository root there, carrying
# .gpu-bundles and .pydeps in the call that starts it:
#   protocol.sh start      copies the tree to /root/sg-CHANGE (a later call's copy of the tree never touches a run
#                          going) and starts the one ci main command detached (setsid)
#   protocol.sh wait S     waits up to S seconds for it to end, printing each step as it comes, then packs what is
#                          done so far as collect does (a machine given back between calls comes back bare: wait
#                          then says so at once, exit 3)
#   protocol.sh collect    packs what it wrote (no caches) into $OUT/pCHANGE.tar.xz beside protocol.log; partial runs
#                          too, so the report can be rendered from the JUnit that came back
# CHANGE: the change timed as ported (default 49903); ROWS_FILE: its rows, one per line; RUNS (default 4, the fewest
# the allowed-regression criterion can judge) runs a side; the A/A arm too, unless AA=0, in AA_RUNS of the rounds
# (default: every one); MODE: --cold (default: every run from an empty caches root, JIT allowed, as a user without a
# bake meets it) or --unbaked (each build warmed once, untimed; its runs start from what that compiled); BUNDLES:
# the folder holding the two bundles (default .gpu-bundles).
set -u
change=${CHANGE:-49903}
work=/root/work-$change
tree=/root/sg-$change
log=$work/protocol.log
# what the protocol wrote so far (no caches), packed under $OUT: every wait ends with it (detached.sh)
pack() {
  cp "$log" "$work/nvidia-smi.csv" "$OUT/" 2>/dev/null
  [ -d "$work/p$change" ] || { echo "nothing written under $work/p$change yet"; return 0; }
  (cd "$work" && tar -cJf "$OUT/p$change.tar.xz" --exclude='caches' --exclude='builds/*/site' "p$change") &&
    echo "packed what is done so far into \$OUT/p$change.tar.xz"
}
steps() { grep -E "^== |\] (pass|failure|error|skipped|missing) |^site |wrote report|error:|^exit |runs done" "$log" | tail -"${1:-40}"; }
# shellcheck source=evidence/detached.sh
source "$(dirname "$0")/detached.sh"
case "${1:-}" in
  start)
    [ -n "${ROWS_FILE:-}" ] || { echo "ROWS_FILE: the rows to time, one per line"; exit 2; }
    rows=$(paste -sd, "$ROWS_FILE")
    cd "$(dirname "$0")/.." || exit 1
    rm -rf "$tree" && mkdir -p "$work" && cp -a . "$tree" && cd "$tree" || exit 1
    aa=(--aa); [ "${AA:-1}" = 0 ] && aa=(); [ -n "${AA_RUNS:-}" ] && aa+=(--aa-runs "$AA_RUNS")
    # inductor compiles on as many threads as torch gives it by default, as a user's cold start does
    export TORCHINDUCTOR_COMPILE_THREADS=$(($(nproc) < 32 ? $(nproc) : 32))
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$work/nvidia-smi.csv" 2>&1
    # shellcheck disable=SC2016
    setsid nohup bash -c 'bash evidence/h200-env.sh python3 -m ci "$@"; echo "exit $?"' ci main --host \
      --target cuda-sm90 --rows "$rows" --compare-without "$change" --runs "${RUNS:-4}" "${aa[@]}" "${MODE:---cold}" \
      --bundles "${BUNDLES:-.gpu-bundles}" --base-site /root/stage/site --timeout 600 --out "$work/p$change" \
      > "$log" 2>&1 < /dev/null &
    echo "started (pid $!): ci main --rows $rows --compare-without $change --runs ${RUNS:-4} ${aa[*]} ${MODE:---cold}" ;;
  wait)
    wait_steps "${2:-540}" ;;
  collect)
    pack
    steps 60 ;;
  *) echo "usage: [CHANGE=N ROWS_FILE=F RUNS=n AA=0|1 AA_RUNS=k MODE=--cold|--unbaked] protocol.sh start | wait S | collect"
     exit 2 ;;
esac
