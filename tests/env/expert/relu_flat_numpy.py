# task: level1/relu
# Source: Triton-style elementwise idiom (as in jax/experimental/pallas/ops/gpu
# and the Triton tutorials): flatten with a static element count computed by
# numpy (np.prod of the shape), one 1-D masked block per program.
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu


def _relu_kernel(x_ref, o_ref, *, n: int, block: int):
  start = pl.program_id(0) * block
  idx = start + jnp.arange(block)
  mask = idx < n
  x = plgpu.load(x_ref.at[pl.ds(start, block)], mask=mask, other=0.0)
  plgpu.store(o_ref.at[pl.ds(start, block)], jnp.maximum(x, 0.0), mask=mask)


def kernel(x):
  n = int(np.prod(x.shape))
  block = 2048
  flat = x.reshape(n)
  out = pl.pallas_call(
      functools.partial(_relu_kernel, n=n, block=block),
      out_shape=jax.ShapeDtypeStruct((n,), x.dtype),
      grid=(pl.cdiv(n, block),),
      compiler_params=plgpu.CompilerParams(num_warps=8, num_stages=1),
  )(flat)
  return out.reshape(x.shape)
