# task: level1/row_max
# Source: reduction idiom of jax/experimental/pallas/ops/gpu/decode_attention.py
# (running max seeded with jnp/np finfo(float32).min; JAX authors,
# Apache-2.0): a fori_loop over column chunks of a row block, the initial
# value from numpy's finfo.
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu

NEG_BIG = float(np.finfo(np.float32).min)


def _row_max_kernel(x_ref, o_ref, *, block_cols: int):
  rows, cols = x_ref.shape

  def body(j, acc):
    chunk = x_ref[:, pl.ds(j * block_cols, block_cols)]
    return jnp.maximum(acc, jnp.max(chunk, axis=1))

  acc = jax.lax.fori_loop(0, cols // block_cols, body,
                          jnp.full((rows,), NEG_BIG, jnp.float32))
  o_ref[...] = acc


def kernel(x):
  n, d = x.shape
  block_rows = 32
  return pl.pallas_call(
      functools.partial(_row_max_kernel, block_cols=64),
      out_shape=jax.ShapeDtypeStruct((n,), x.dtype),
      grid=(pl.cdiv(n, block_rows),),
      in_specs=[pl.BlockSpec((block_rows, d), lambda i: (i, 0))],
      out_specs=pl.BlockSpec((block_rows,), lambda i: (i,)),
      compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=2),
  )(x)
