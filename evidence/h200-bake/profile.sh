#!/usr/bin/env bash
# The first request profiled against a warm one (harness.profile: cProfile + torch profiler, and the frames
# torch.compile traced; profile/<row>/first-only.txt), each row from a wiped root with host A's artefact
# installed (art2/<stream>/*.part00.., joined here), JIT refused, $STACKGATE_PROFILE_DIR set.
#   run.sh            #46849's and #48407's rows (stream y), one after the other: the two whose first request
#                     compiles and traces nothing, where what it still pays is to be named
#   run.sh all        the four rows, stream x on GPU 0 and stream y on GPU 1 (host B's run, an earlier session)
# vLLM 0.26.0 staged as ../../../shared/gpu/README.md says; results packed into $OUT/prof.tar.gz.
export PYTHONPATH=/root/stage/site:/root/stage/extra:/tmp/pydeps CUDA_HOME=/usr/local/cuda VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 STACKGATE_REFUSE_JIT=1
cd "$(dirname "$0")/../.."
python3 -m pip install -q --no-index --no-deps --target /tmp/pydeps .pydeps/*.whl 2>/dev/null
for s in x y; do  # the artefacts come in parts (art2/<stream>/<name>.partNN): joined once
  mkdir -p /root/art2/$s; for f in art2/$s/*.part00; do [ -f "$f" ] || continue
    [ -f "/root/art2/$s/$(basename "${f%.part00}")" ] || cat "${f%00}"?? > "/root/art2/$s/$(basename "${f%.part00}")"; done
done
p() {  # p STREAM GPU ROW SUITE: one row, profiled, from a wiped root at the path the artefact was made at (its
  local root=/root/rt-c-$1; rm -rf "$root"  # key holds the root: compiled code embeds it), so a stream's rows take turns
  STACKGATE_RUNTIME_CACHES=$root STACKGATE_PROFILE_DIR=/root/prof/$3 CUDA_VISIBLE_DEVICES=$2 timeout 250 \
    python3 -m ci run cuda-sm90 $4 --host --rows $3 --out /root/prof/run-$3 --caches /root/art2/$1/*.tar.gz \
    > /root/prof/$3.log 2>&1
  echo "$3 exit $?"
}
mkdir -p /root/prof
if [ "${1:-}" = all ]; then
  ( p x 0 46514.cuda-sm90.tiny-deepseek-v32-mtp.6873e57f sparse_mla; p x 0 48804.cuda-sm90.tiny-llama-eagle.54aa101d spec_decode ) &
  ( p y 1 48407.cuda-sm90.tiny-deepseek-v32-mtp.14e52503 sparse_mla; p y 1 46849.cuda-sm90.tiny-llama-eagle.cf3fb5bf spec_decode ) &
else
  ( p y 0 46849.cuda-sm90.tiny-llama-eagle.cf3fb5bf spec_decode; p y 1 48407.cuda-sm90.tiny-deepseek-v32-mtp.14e52503 sparse_mla ) &
fi
wait
for f in /root/prof/*/first-only.txt; do echo "== $f"; head -n 45 "$f"; done
rm -rf /root/prof/run-*/logs/*.result.json; tar -C /root -czf "$OUT/prof.tar.gz" prof; ls -la "$OUT"
