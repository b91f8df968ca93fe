#!/usr/bin/env bash
# The first request profiled against a warm one, on host B after its (c) runs (the command run there, verbatim):
# each row from a wiped root with host A's artefact installed, JIT refused, $STACKGATE_PROFILE_DIR set
# (harness.profile: cProfile + torch profiler, and the frames torch.compile traced; profile/<row>/first-only.txt).
export PYTHONPATH=/root/stage/site:/root/stage/extra:/tmp/pydeps CUDA_HOME=/usr/local/cuda VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 STACKGATE_REFUSE_JIT=1
p() { rm -rf /root/rt-c-$1; STACKGATE_RUNTIME_CACHES=/root/rt-c-$1 STACKGATE_PROFILE_DIR=/root/prof/$3 CUDA_VISIBLE_DEVICES=$2 timeout 250 python3 -m ci run cuda-sm90 $4 --host --rows $3 --out /root/prof/run-$3 --caches /root/art2/$1/*.tar.gz > /root/prof/$3.log 2>&1; echo "$3 exit $?"; }
mkdir -p /root/prof
( p x 0 46514.cuda-sm90.tiny-deepseek-v32-mtp.6873e57f sparse_mla; p x 0 48804.cuda-sm90.tiny-llama-eagle.54aa101d spec_decode ) &
( p y 1 48407.cuda-sm90.tiny-deepseek-v32-mtp.14e52503 sparse_mla; p y 1 46849.cuda-sm90.tiny-llama-eagle.cf3fb5bf spec_decode ) &
wait; find /root/prof -maxdepth 2 | head -40; du -sh /root/prof; rm -rf /root/prof/run-*/logs/*.result.json; tar -C /root -czf $OUT/prof.tar.gz prof; ls -la $OUT
