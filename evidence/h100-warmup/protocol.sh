#!/usr/bin/env bash
# #53 on a bare H200 host (no docker): the demo fork's `warmup` branch (#47451 cherry-picked, #49903 backported:
# ../fork-demo/README.md) against itself without #49903, cold, as a user without a bake meets it: every run from an
# empty caches root of its own, JIT allowed, each row alone on the GPU, the arms interleaved, n runs a side and
# the A/A arm (the fork again). Here, where the demo fork's checkout is, first make both builds' bundles (the host has no checkout):
#   python -m ci fork bundle --ref warmup --out .gpu-bundles/fork.tar.gz
#   python -m ci fork bundle --ref warmup --without 49903 --out .gpu-bundles/without-49903.tar.gz
# then stage vLLM 0.26.0 (../../../shared/gpu/README.md) and run this from the repository root there, carrying
# .gpu-bundles and .pydeps:
#   protocol.sh start      copies the tree to /root/sg53 (a later call's copy of the tree never touches a run going)
#                          and starts the one ci main command detached (setsid)
#   protocol.sh wait S     waits up to S seconds for it to end, printing each step as it comes
#   protocol.sh collect    packs what it wrote (no caches) into $OUT/p49903.tar.xz beside protocol.log; partial
#                          runs too, so the report can be rendered from the JUnit that came back
# RUNS (default 4, the fewest the allowed-regression criterion can judge) runs a side; ROWS_FILE: the rows (default
# rows.txt: the tiny EAGLE, EAGLE3 and MTP rows of #49903
# at batch 1); the A/A arm too, unless AA=0, in AA_RUNS of the rounds (default: every one).
set -u
here=evidence/h100-warmup
work=/root/work53
log=$work/protocol.log
steps() { grep -E "^== |\] (pass|failure|error|skipped|missing) |^site |wrote report|error:|^exit " "$log" | tail -"${1:-40}"; }
case "${1:-}" in
  start)
    cd "$(dirname "$0")/../.."
    rm -rf /root/sg53 && mkdir -p "$work" && cp -a . /root/sg53 && cd /root/sg53 || exit 1
    rows=$(paste -sd, "${ROWS_FILE:-$here/rows.txt}")
    aa=(--aa); [ "${AA:-1}" = 0 ] && aa=(); [ -n "${AA_RUNS:-}" ] && aa+=(--aa-runs "$AA_RUNS")
    # shellcheck disable=SC2016
    # a cold start as a user meets it: inductor compiles on as many threads as torch gives it by default
    export TORCHINDUCTOR_COMPILE_THREADS=$(($(nproc) < 32 ? $(nproc) : 32))
    setsid nohup bash -c 'bash evidence/h200-env.sh python3 -m ci "$@"; echo "exit $?"' ci main --host \
      --target cuda-sm90 --rows "$rows" --compare-without 49903 --runs "${RUNS:-4}" "${aa[@]}" --cold \
      --bundles .gpu-bundles --base-site /root/stage/site --timeout 600 --out "$work/p49903" \
      > "$log" 2>&1 < /dev/null &
    echo "started (pid $!): ci main --rows $rows --compare-without 49903 --runs ${RUNS:-4} ${aa[*]} --cold" ;;
  wait)
    end=$((SECONDS + ${2:-540})); seen=0
    while [ $SECONDS -lt $end ]; do
      n=$(steps 1000 | wc -l)
      [ "$n" -gt "$seen" ] && { steps 1000 | tail -n +$((seen + 1)) | sed "s/^/[${SECONDS}s] /"; seen=$n; }
      grep -q "^exit " "$log" && break
      sleep 5
    done
    grep -q "^exit " "$log" && echo FINISHED || echo "RUNNING (waited ${2:-540} s)" ;;
  collect)
    cp "$log" "$OUT/protocol.log"
    (cd "$work" && tar -cJf "$OUT/p49903.tar.xz" --exclude='caches' --exclude='builds/*/site' p49903)
    steps 60 ;;
  *) echo "usage: protocol.sh start | wait SECONDS | collect"; exit 2 ;;
esac
