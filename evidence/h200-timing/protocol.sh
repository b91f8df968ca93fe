#!/usr/bin/env bash
# The timing protocol for #46849 as ported on the demo fork, on a bare H200 host (no docker): run from the repository
# root after shared/gpu/README.md's staging (/root/stage), with the two bundles `ci fork bundle` made where the fork
# is (.gpu-bundles/fork.tar.gz, .gpu-bundles/without-46849.tar.gz) and the project's wheels the host lacks (.pydeps).
# One command does the protocol: both builds laid over the staged vLLM 0.26.0, each warmed once untimed, then
# fork / fork without #46849 / fork again (A/A), five times over, every run a fresh engine process alone on the GPU.
# It runs detached (setsid): `status` prints its progress; its output folder is /root/work/p46849.
set -u
cd "$(dirname "$0")/../.."
out=/root/work/p46849
case "${1:-start}" in
  start)
    mkdir -p /root/work
    setsid nohup bash evidence/h200-env.sh python3 -m ci main --host --target cuda-sm90 \
      --rows 46849.cuda-sm90.tiny-llama-eagle.cf3fb5bf --compare-without 46849 --runs 5 --aa --unbaked \
      --bundles .gpu-bundles --base-site /root/stage/site --out "$out" > /root/work/protocol.log 2>&1 < /dev/null &
    echo "started: $!" ;;
  status)
    grep -E "^== |\] (pass|failure|error|skipped|missing)|wrote report|error:" /root/work/protocol.log | tail -40
    pgrep -f "compare-without 46849" > /dev/null && echo RUNNING || echo FINISHED ;;
esac
