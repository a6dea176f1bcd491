# task: level2/scale_softmax
# Source: adapted from jax/experimental/pallas/ops/gpu/softmax.py (JAX
# authors, Apache-2.0) with the logit scale fused before the max; the
# per-row program is vmapped, the scale bound with functools.partial.
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu


def _scaled_softmax_kernel(input_ref, probs_ref, *, block_row: int,
                           scale: float):
  row_len = input_ref.shape[-1]
  mask = jnp.arange(block_row) < row_len
  row = plgpu.load(input_ref.at[pl.ds(0, block_row)], mask=mask,
                   other=-float("inf")) * scale
  numerator = jnp.exp(row - jnp.max(row, axis=0))
  plgpu.store(probs_ref.at[pl.ds(0, block_row)],
              numerator / jnp.sum(numerator, axis=0), mask=mask)


def kernel(x):
  row_len = x.shape[-1]
  f = pl.pallas_call(
      functools.partial(_scaled_softmax_kernel,
                        block_row=pl.next_power_of_2(row_len), scale=0.125),
      compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=1),
      grid=(),
      out_shape=jax.ShapeDtypeStruct((row_len,), x.dtype),
  )
  return jax.vmap(f)(x)
