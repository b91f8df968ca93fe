# shellcheck shell=bash disable=SC2154
# (log, steps and pack come from the script that sources this)
# What the detached protocols (protocol.sh, matrix-sm90/protocol.sh) share, sourced after each defines `log` (its
# command's output), `steps` (the lines of it worth printing, the last N) and `pack` (what is done, under $OUT).

# wait_steps S: waits up to S seconds for the protocol to end (an "exit N" line in $log), printing each step as it
# comes, then packs what is done so far under $OUT where set, so that a machine given back between calls loses at
# most the runs since the last call. A machine without $log came back bare: said at once, exit 3.
wait_steps() {
  [ -f "$log" ] || { echo "no $log: nothing was started on this machine (a fresh one after the last was given back?)"; exit 3; }
  local end=$((SECONDS + ${1:-540})) seen=0 n
  while [ $SECONDS -lt $end ]; do
    n=$(steps 100000 | wc -l)
    [ "$n" -gt "$seen" ] && { steps 100000 | tail -n +$((seen + 1)) | sed "s/^/[${SECONDS}s] /"; seen=$n; }
    grep -q "^exit " "$log" && break
    sleep 5
  done
  grep -q "^exit " "$log" && echo FINISHED || echo "RUNNING (waited ${1:-540} s)"
  if [ -n "${OUT:-}" ]; then pack; fi
}
