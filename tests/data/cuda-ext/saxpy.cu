// A one-kernel CUDA library for the source-build route's tests (ci/images/source_build.py): no torch, a plain
// shared object with a C entry point, so nvcc and g++ alone build it and cuobjdump can read its device code.
#include <cuda_runtime.h>

__global__ void saxpy_kernel(int n, float a, const float *x, float *y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// y = a * x + y on device pointers; returns the cudaError_t of the launch (no GPU here: only linked, never run).
extern "C" int saxpy(int n, float a, const float *x, float *y) {
  saxpy_kernel<<<(n + 255) / 256, 256>>>(n, a, x, y);
  return static_cast<int>(cudaGetLastError());
}
