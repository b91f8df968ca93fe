#!/bin/sh
# Builds libsaxpy.so with nvcc for the arch list the source-build stage passes ($NVCC_GENCODE, made from the
# target's TORCH_CUDA_ARCH_LIST by ci/images/source_build.py); g++ is nvcc's host compiler. No GPU needed.
set -eu
: "${NVCC_GENCODE:?set by containers/source/Dockerfile from TORCH_CUDA_ARCH_LIST}"
# shellcheck disable=SC2086  # one flag per word
nvcc -O2 -shared -Xcompiler -fPIC $NVCC_GENCODE -o libsaxpy.so saxpy.cu
