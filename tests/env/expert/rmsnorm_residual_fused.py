# task: level2/rmsnorm_residual
# Source: adapted from jax/experimental/pallas/ops/gpu/rms_norm.py
# (rms_norm_forward_kernel; JAX authors, Apache-2.0) with the residual add
# fused; block rows via BlockSpecs instead of vmap.
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

EPS = 1e-6
BLOCK_ROWS = 32


def rms_norm_residual_kernel(x_ref, r_ref, w_ref, o_ref):
  h = x_ref[...].astype(jnp.float32) + r_ref[...].astype(jnp.float32)
  var = jnp.mean(h * h, axis=1, keepdims=True)
  rstd = 1 / jnp.sqrt(var + EPS)
  o_ref[...] = (h * rstd * w_ref[...][None, :]).astype(o_ref.dtype)


def kernel(x, residual, weight):
  n, d = x.shape
  row = pl.BlockSpec((BLOCK_ROWS, d), lambda i: (i, 0))
  return pl.pallas_call(
      rms_norm_residual_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(pl.cdiv(n, BLOCK_ROWS),),
      in_specs=[row, row, pl.BlockSpec((d,), lambda i: (0,))],
      out_specs=row,
      compiler_params=plgpu.CompilerParams(num_warps=4),
  )(x, residual, weight)
