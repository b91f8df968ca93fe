#!/usr/bin/env bash
# Timing protocols (evidence/protocol.sh) one after another on one lease, detached, from one copy of the tree: each
# QUEUE entry CHANGE:ROWS_FILE:RUNS:AA_RUNS:MODE starts once the one before it wrote its "exit N" line, with its
# bundles in .gpu-bundles-CHANGE. Its environment goes to every run (STACKGATE_TIMING_CPUS, for one).
#   QUEUE="46849:evidence/x/rows-46849.txt:5:3:--unbaked 48407:evidence/x/rows-48407.txt:5:3:--unbaked" \
#     bash evidence/protocol-queue.sh start
# then each protocol's own calls: CHANGE=46849 bash evidence/protocol.sh wait 540 (or collect), and so on; the
# queue's own log is /root/protocol-queue.log (which protocol started when).
set -u
queue_log=/root/protocol-queue.log
case "${1:-}" in
  start)
    [ -n "${QUEUE:-}" ] || { echo "QUEUE: CHANGE:ROWS_FILE:RUNS:AA_RUNS:MODE entries, space-separated"; exit 2; }
    cd "$(dirname "$0")/.." || exit 1
    rm -rf /root/sg-queue && cp -a . /root/sg-queue && cd /root/sg-queue || exit 1
    # shellcheck disable=SC2016
    setsid nohup bash -c '
      for entry in $QUEUE; do
        IFS=: read -r change rows runs aa_runs mode <<< "$entry"
        echo "$(date -u +%FT%TZ) start $change ($rows, $runs runs a side, $aa_runs A/A, $mode)"
        CHANGE=$change ROWS_FILE=$rows RUNS=$runs AA_RUNS=$aa_runs MODE=$mode BUNDLES=.gpu-bundles-$change \
          bash evidence/protocol.sh start
        until grep -q "^exit " "/root/work-$change/protocol.log" 2>/dev/null; do sleep 5; done
        echo "$(date -u +%FT%TZ) ended $change: $(grep "^exit " "/root/work-$change/protocol.log")"
      done' > "$queue_log" 2>&1 < /dev/null &
    echo "queue started (pid $!): $QUEUE" ;;
  log) cat "$queue_log" ;;
  *) echo "usage: QUEUE='CHANGE:ROWS_FILE:RUNS:AA_RUNS:MODE ...' protocol-queue.sh start | log"; exit 2 ;;
esac
