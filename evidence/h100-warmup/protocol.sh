#!/usr/bin/env bash
# #53/#60's protocol: ../protocol.sh for #49903, cold (empty caches, JIT allowed), the rows of rows.txt unless ROWS_FILE
# names others (the tiny EAGLE, EAGLE3 and MTP rows of #49903 at batch 1). The campaigns in README.md ran it when it
# stood here whole, its work folder /root/work53 (now /root/work-49903); the command is the same.
#   protocol.sh start | wait S | collect
here=$(dirname "$0")
CHANGE=49903 ROWS_FILE=${ROWS_FILE:-$here/rows.txt} MODE=--cold exec bash "$here/../protocol.sh" "$@"
