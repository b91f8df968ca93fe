#!/usr/bin/env bash
# #53 on a bare H200 host (no docker), not yet run: the demo fork's `warmup` branch (#47451 cherry-picked, #49903
# backported: ../fork-demo/README.md) against itself without #49903, cold, as a user without a bake meets it: every
# run from an empty caches root of its own, JIT allowed, each row alone on the GPU, the arms interleaved, n runs a side
# and the A/A arm. Here, where the demo fork's checkout is, first make both builds' bundles (the host has no checkout):
#   python -m ci fork bundle --ref warmup --out .gpu-bundles/fork.tar.gz
#   python -m ci fork bundle --ref warmup --without 49903 --out .gpu-bundles/without-49903.tar.gz
# then stage vLLM 0.26.0 (../../../shared/gpu/README.md) and run this from the repository root there, carrying
# .gpu-bundles and .pydeps. RUNS (default 3) runs a side; ROWS: the rows (default: rows.txt, the tiny EAGLE, EAGLE3 and
# MTP rows of #49903 at batch 1, one backend each).
set -u
cd "$(dirname "$0")/../.."
here=evidence/h200-warmup
OUT=${OUT:-/root/work53/out}
mkdir -p "$OUT"
bash evidence/h200-env.sh python3 -m ci main --host --target cuda-sm90 --rows "$(paste -sd, "${ROWS_FILE:-$here/rows.txt}")" \
  --compare-without 49903 --runs "${RUNS:-3}" --aa --cold --bundles .gpu-bundles --base-site /root/stage/site \
  --timeout 600 --out /root/work53/p49903 > "$OUT/protocol.log" 2>&1
echo "exit $?" >> "$OUT/protocol.log"
(cd /root/work53 && tar -cJf "$OUT/p49903.tar.xz" --exclude='caches' p49903)
grep -E "^== |\] (pass|failure|error|skipped|missing)|wrote report|error:" "$OUT/protocol.log" | tail -40
