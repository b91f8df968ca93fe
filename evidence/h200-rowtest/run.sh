#!/usr/bin/env bash
# The no-JIT A/B, second round: the warm-run artefact now made by running each row's own test
# (harness.warmup.run_row_test), its compiles logged with their key parts beside the caches
# (warm-bake-jit.jsonl), so that a row the artefact does not serve names the part of the key that moved.
#   host A (fresh): stage, `run.sh bake` (the artefacts come back here, in parts)
#   host B (fresh): stage with the artefacts under art2/, `run.sh c 1 2 3`: (c) three times, each repeat
#                   from a wiped root with the host-A artefact installed, JIT refused
#   then `run.sh guard`: #48407's row once more with its top-k buffer broken on purpose (the #52512 guard must fail)
# Two H200s per host, one stream of rows per GPU (x: #46514's and #48804's rows, y: #48407's and #46849's, so
# that both take about as long); on a one-GPU host the streams run one after the other on GPU 0.
# STREAMS="y" limits a run to stream y (one row per suite: #48407's sparse_mla row, #46849's spec_decode row).
# vLLM 0.26.0 staged as ../../../shared/gpu/README.md says.
set -u
STREAMS=${STREAMS:-x y}
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
gpu_of() { [ "$NGPU" -ge 2 ] && [ "$1" = y ] && echo 1 || echo 0; }  # stream -> GPU
# each stream in the background on a host with a GPU per stream, else one after the other
bg() { if [ "$NGPU" -ge 2 ]; then "$@" & else "$@"; fi; }
export PYTHONPATH=/root/stage/site:/root/stage/extra:/tmp/pydeps CUDA_HOME=/usr/local/cuda VLLM_USE_FLASHINFER_SAMPLER=0
export VLLM_NO_USAGE_STATS=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 STACKGATE_REFUSE_JIT=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-index --no-deps --target /tmp/pydeps .pydeps/*.whl 2>/dev/null
# two streams of about equal length, one per GPU, each with its own caches root (the root is in the key)
X="sparse_mla:46514.cuda-sm90.tiny-deepseek-v32-mtp.6873e57f spec_decode:48804.cuda-sm90.tiny-llama-eagle.54aa101d"
Y="sparse_mla:48407.cuda-sm90.tiny-deepseek-v32-mtp.14e52503 spec_decode:46849.cuda-sm90.tiny-llama-eagle.cf3fb5bf"
ids() { local out=; for sr in $1; do out+="${sr#*:},"; done; echo "${out%,}"; }
R=/root/res2
mkdir -p $R /root/art2

row() {  # row GPU SUITE ROW OUTNAME [ci run flags...]: one row, one fresh process tree
  local gpu=$1 suite=$2 id=$3 name=$4; shift 4
  local t0=$SECONDS
  CUDA_VISIBLE_DEVICES=$gpu python3 -m ci run cuda-sm90 "$suite" --host --rows "$id" --out "$R/$name" "$@" \
    > "$R/$name.log" 2>&1
  echo "$name exit $? in $((SECONDS - t0)) s"
}
summary() {  # one line per run: the timing metrics, then the verdict or refusal (with the key diff, if any)
  python3 - "$@" <<'PY'
import sys, glob, json
from junitparser.xunit2 import JUnitXml
for d in sys.argv[1:]:
    for f in sorted(glob.glob(f"{d}/junit-*.xml")):
        for s in JUnitXml.fromfile(f):
            for c in s:
                if "[" not in c.name: continue
                p = {x.name: x.value for x in c.properties()}
                m = {k.split(".")[2]: json.loads(v).get("samples", [None])[:3] for k, v in p.items()
                     if k.startswith("stackgate.metric.") and k.split(".")[2] in
                     ("engine_ready_s", "cold_first_request_ms", "warm_request_ms")}
                msg = (c.result[0].message or "") if c.result else "pass"
                i = msg.find("JIT refused")
                print(d.split("/")[-1], m, "compiles", p.get("stackgate.jit.compiles"), "new", p.get("stackgate.jit.cache_new_files"),
                      "| first request only:", p.get("stackgate.first_request_only"))
                print("   ", msg[i:i + 900] if i >= 0 else msg[:200])
PY
}
pack() {  # this host's results so far, back as one file
  rm -rf $R/*/logs/*.result.json
  tar -C /root -czf "$OUT/res2-$1.tar.gz" res2 && ls -la "$OUT/res2-$1.tar.gz"
}

case "$1" in
  bake)  # host A: the warm-run artefacts, one per GPU stream
    bake_one() {  # bake_one STREAM: its rows' artefact, on the stream's GPU and caches root
      local s=$1 t0=$SECONDS rows; rows=$([ "$1" = x ] && echo "$X" || echo "$Y")
      STACKGATE_RUNTIME_CACHES=/root/rt-c-$s CUDA_VISIBLE_DEVICES=$(gpu_of "$s") python3 -m ci bake cuda-sm90 --host \
        --rows "$(ids "$rows")" --out /root/art2/$s > $R/bake-$s.log 2>&1
      echo "bake $s exit $? in $((SECONDS - t0)) s"
    }
    for s in $STREAMS; do bg bake_one $s; done
    wait; tail -n 4 $R/bake-*.log; ls -la /root/art2/*/
    for s in $STREAMS; do  # back in parts of at most 15 MiB (one file back is at most 16 MiB)
      mkdir -p "$OUT/$s"; ( cd /root/art2/$s && for f in *.tar.gz; do split -b 15M -d "$f" "$OUT/$s/$f.part"; done )
    done; pack bake; ls -la "$OUT"/* ;;
  c)  # host B: (c) from a wiped root with the artefact installed, JIT refused; once per repeat given
    shift; reps="$*"
    for s in $STREAMS; do  # the artefacts came in parts (art2/<stream>/<name>.partNN): joined once
      mkdir -p /root/art2/$s; for f in art2/$s/*.part00; do
        [ -f "/root/art2/$s/$(basename "${f%.part00}")" ] || cat "${f%00}"?? > "/root/art2/$s/$(basename "${f%.part00}")"; done
    done; ls -la /root/art2/*/
    for rep in "$@"; do
      for s in $STREAMS; do
        gpu=$(gpu_of $s) rows=$([ $s = x ] && echo "$X" || echo "$Y")
        stream_c() { for sr in $rows; do rm -rf /root/rt-c-$s; STACKGATE_RUNTIME_CACHES=/root/rt-c-$s \
            row $gpu "${sr%%:*}" "${sr#*:}" c$rep-${sr#*:} --caches /root/art2/$s/*.tar.gz; done; }
        bg stream_c
      done
      wait
    done
    summary $R/c*-*; pack "c${reps// /}" ;;
  guard)  # after `c`: the #52512 guard's positive control, #48407's row with its top-k buffer broken on purpose
    # (STACKGATE_BREAK_TOPK=1: FlashMLA-sparse reads a buffer of all -1): the row must fail naming the reads
    sr=${Y%% *}; rm -rf /root/rt-c-y
    STACKGATE_BREAK_TOPK=1 STACKGATE_RUNTIME_CACHES=/root/rt-c-y row 0 "${sr%%:*}" "${sr#*:}" guard-${sr#*:} \
      --caches /root/art2/y/*.tar.gz
    summary $R/guard-*; grep -h -o "#52512[^;]*" $R/guard-*/junit-*.xml | head -n 3; pack guard ;;
esac
