"""Small real Triton kernels for the cpu image and the bake's self-test.

`containers/kernels/selftest.yaml` lists the first three; `relu_kernel` is deliberately left out of
every list so a test can show that compiling it at run time is caught by the JIT sentinel.
The bake hashes each kernel's source and starting line: editing this file rebuilds the AOT layer.
"""

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def fused_add_rmsnorm_kernel(x_ptr, residual_ptr, weight_ptr, out_ptr, n_cols, eps, BLOCK: tl.constexpr):
    """out = rmsnorm(x + residual) * weight, one row per program; residual is updated in place."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    x += tl.load(residual_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(residual_ptr + row * n_cols + cols, x.to(residual_ptr.dtype.element_ty), mask=mask)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * n_cols + cols, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def scale_int_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    """out = x * factor with an int32 runtime scalar (its value class is part of the JIT key)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * factor, mask=mask)


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)
