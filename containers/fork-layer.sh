#!/bin/sh
# The fork under test, laid over the base wheel's vLLM in the image's venv (`ci build TARGET --fork`): the bundle
# `ci fork bundle` made from the fork's checkout, applied by suites/harness/vllm_build.py (the same code as on a bare
# host), which writes stackgate-vllm-build.json with the tree's content id beside the package. Without a bundle the
# image keeps the stock release and this layer changes nothing.
# usage: fork-layer.sh FOLDER BUNDLE_NAME VLLM_BUILD_PY   (an empty BUNDLE_NAME: no fork)
set -eu
folder=$1 name=$2 tool=$3
[ -n "$name" ] || exit 0
site=$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
python "$tool" apply "$folder/$name" "$site"
# the overlaid sources' bytecode, checked by hash like the rest of the venv's (a .pyc depends on its source only)
python -m compileall -q --invalidation-mode checked-hash "$site/vllm" > /dev/null
