# task: level1/log_softmax
# Source: adapted from jax/experimental/pallas/ops/gpu/softmax.py
# (_vmappable_softmax_kernel; JAX authors, Apache-2.0) to log-softmax:
# masked plgpu.load with -inf padding, one program per row, vmapped.
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu


def _log_softmax_kernel(input_ref, out_ref, *, block_row: int):
  row_len = input_ref.shape[-1]
  mask = jnp.arange(block_row) < row_len
  row = plgpu.load(input_ref.at[pl.ds(0, block_row)], mask=mask,
                   other=-float("inf"))
  shifted = row - jnp.max(row, axis=0)
  lse = jnp.log(jnp.sum(jnp.exp(shifted), axis=0))
  plgpu.store(out_ref.at[pl.ds(0, block_row)],
              (shifted - lse).astype(out_ref.dtype), mask=mask)


def kernel(x):
  row_len = x.shape[-1]
  block_row = pl.next_power_of_2(row_len)
  f = pl.pallas_call(
      functools.partial(_log_softmax_kernel, block_row=block_row),
      compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=1),
      grid=(),
      out_shape=jax.ShapeDtypeStruct((row_len,), x.dtype),
  )
  return jax.vmap(f)(x)
