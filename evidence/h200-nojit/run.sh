#!/usr/bin/env bash
# The no-JIT A/B on H200s (two GPUs per host, one stream of rows per GPU): one row of each track under
# three conditions of the JIT caches, with JIT refused (STACKGATE_REFUSE_JIT=1) throughout.
#   (a) empty:    ci run --host --unbaked, a fresh caches root per row
#   (b) aot:      ci run --host --caches <the AOT bake alone: ci bake --host --aot-only, no GPU used>
#   (c) artefact: ci run --host --caches <ci bake --host, warm-run artefact made on an EARLIER host>
# Host 1: stage, then `run.sh a`, then `run.sh bake` (the artefacts come back here). Host 2 (fresh): stage
# with the artefacts, then `run.sh c 1 2`, then `run.sh c 3` and `run.sh profile` in one call (the second
# cut off at 60 s when the device time ran out: #46514's profile did not finish). vLLM 0.26.0 is staged
# as ../../../shared/gpu/README.md says.
set -u
export PYTHONPATH=/root/stage/site:/root/stage/extra:/tmp/pydeps CUDA_HOME=/usr/local/cuda VLLM_USE_FLASHINFER_SAMPLER=0
export VLLM_NO_USAGE_STATS=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 STACKGATE_REFUSE_JIT=1
python3 -m pip install -q --no-index --no-deps --target /tmp/pydeps .pydeps/*.whl 2>/dev/null
SPEC="48804.cuda-sm90.tiny-llama-eagle.54aa101d 46849.cuda-sm90.tiny-llama-eagle.cf3fb5bf"
SPARSE="46514.cuda-sm90.tiny-deepseek-v32-mtp.6873e57f 48407.cuda-sm90.tiny-deepseek-v32-mtp.14e52503"
R=/root/res
mkdir -p $R /root/art

row() {  # row GPU SUITE ROW OUTNAME [ci run flags...]: one row, one fresh process tree
  local gpu=$1 suite=$2 id=$3 name=$4; shift 4
  local t0=$SECONDS
  CUDA_VISIBLE_DEVICES=$gpu python3 -m ci run cuda-sm90 "$suite" --host --rows "$id" --out "$R/$name" "$@" \
    > "$R/$name.log" 2>&1
  echo "$name exit $? in $((SECONDS - t0)) s"
}
summary() {
  python3 - "$@" <<'PY'
import sys, glob, json
from junitparser.xunit2 import JUnitXml
for d in sys.argv[1:]:
    for f in sorted(glob.glob(f"{d}/junit-*.xml")):
        for s in JUnitXml.fromfile(f):
            for c in s:
                if "[" not in c.name: continue
                p = {x.name: x.value for x in c.properties()}
                m = {k.split(".")[2]: v for k, v in p.items() if k.startswith("stackgate.metric.")}
                msg = (c.result[0].message or "")[:160] if c.result else "pass"
                print(d.split("/")[-1], {k: m.get(k) for k in ("engine_ready_s", "cold_first_request_ms",
                      "warm_request_ms", "cold_warm_ratio", "compiles_after_ready")}, msg)
PY
}

pack() {  # this host's results so far, back as one file
  rm -rf $R/*/logs/*.result.json
  tar -C /root -czf "$OUT/res-$1.tar.gz" res && ls -la "$OUT/res-$1.tar.gz"
}

case "$1" in
  a)  # (a) empty caches, each row from its own empty root; the (b) artefacts baked meanwhile without a GPU
    for s in spec sparse; do
      ( STACKGATE_RUNTIME_CACHES=/root/rt-b-$s CUDA_VISIBLE_DEVICES= python3 -m ci bake cuda-sm90 --host --aot-only \
          --out /root/art/b-$s > $R/bake-b-$s.log 2>&1; echo "aot bake $s exit $?" ) &
    done
    ( for id in $SPEC; do STACKGATE_RUNTIME_CACHES=/root/rt-a/$id row 0 spec_decode $id a-$id --unbaked; done ) &
    ( for id in $SPARSE; do STACKGATE_RUNTIME_CACHES=/root/rt-a/$id row 1 sparse_mla $id a-$id --unbaked; done ) &
    wait; summary $R/a-*; tail -n 2 $R/bake-b-*.log; pack a ;;
  bake)  # the warm-run artefacts (one per GPU stream: the caches root is part of the key), then (b)
    ( t0=$SECONDS; STACKGATE_RUNTIME_CACHES=/root/rt-c-spec CUDA_VISIBLE_DEVICES=0 python3 -m ci bake cuda-sm90 --host \
        --rows "${SPEC// /,}" --out /root/art/c-spec > $R/bake-c-spec.log 2>&1; echo "bake spec exit $? in $((SECONDS-t0)) s"
      id=${SPEC%% *}; rm -rf /root/rt-b-spec; STACKGATE_RUNTIME_CACHES=/root/rt-b-spec row 0 spec_decode $id b-$id --caches /root/art/b-spec/*.tar.gz ) &
    ( t0=$SECONDS; STACKGATE_RUNTIME_CACHES=/root/rt-c-sparse CUDA_VISIBLE_DEVICES=1 python3 -m ci bake cuda-sm90 --host \
        --rows "${SPARSE// /,}" --out /root/art/c-sparse > $R/bake-c-sparse.log 2>&1; echo "bake sparse exit $? in $((SECONDS-t0)) s"
      id=${SPARSE%% *}; rm -rf /root/rt-b-sparse; STACKGATE_RUNTIME_CACHES=/root/rt-b-sparse row 1 sparse_mla $id b-$id --caches /root/art/b-sparse/*.tar.gz ) &
    wait; summary $R/b-*; tail -n 3 $R/bake-c-*.log; ls -la /root/art/*/
    for s in spec sparse; do  # back in parts of at most 15 MiB (one file back is at most 16 MiB)
      mkdir -p "$OUT/$s"; ( cd /root/art/c-$s && for f in *.tar.gz; do split -b 15M -d "$f" "$OUT/$s/$f.part"; done )
    done; pack bake; ls -la "$OUT"/* ;;
  c)  # (c) on a fresh host: each repeat from a wiped root with the artefact installed
    shift
    for s in spec sparse; do  # the artefacts came in parts (art/<stream>/<name>.partNN): joined once
      mkdir -p /root/art/$s; for f in art/$s/*.part00; do
        [ -f "/root/art/$s/$(basename "${f%.part00}")" ] || cat "${f%00}"?? > "/root/art/$s/$(basename "${f%.part00}")"; done
    done; ls -la /root/art/*/
    for rep in "$@"; do
      ( for id in $SPEC; do rm -rf /root/rt-c-spec; STACKGATE_RUNTIME_CACHES=/root/rt-c-spec \
          row 0 spec_decode $id c$rep-$id --caches /root/art/spec/*.tar.gz; done ) &
      ( for id in $SPARSE; do rm -rf /root/rt-c-sparse; STACKGATE_RUNTIME_CACHES=/root/rt-c-sparse \
          row 1 sparse_mla $id c$rep-$id --caches /root/art/sparse/*.tar.gz; done ) &
      wait
    done
    summary $R/c*-*; pack "c$(echo $* | tr -d " ")" ;;
  profile)  # what the first request still pays for with the artefact: cold vs warm under the profilers
    ( id=${SPEC%% *}; rm -rf /root/rt-c-spec; STACKGATE_RUNTIME_CACHES=/root/rt-c-spec STACKGATE_PROFILE_DIR=$R/profile \
        row 0 spec_decode $id p-$id --caches /root/art/spec/*.tar.gz ) &
    ( id=${SPARSE%% *}; rm -rf /root/rt-c-sparse; STACKGATE_RUNTIME_CACHES=/root/rt-c-sparse STACKGATE_PROFILE_DIR=$R/profile \
        row 1 sparse_mla $id p-$id --caches /root/art/sparse/*.tar.gz ) &
    wait; head -60 $R/profile/*/first-only.txt; pack profile ;;
esac
