"""level1/col_sum: sum over the first axis."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Column sum. Input x: float32 [1024, 512]. Output: float32 [512],
out[j] = sum_i x[i, j]."""
ATOL = 1e-4
RTOL = 1e-5
N, D = 1024, 512
BLOCK_N, BLOCK_D = 64, 64


def make_inputs(key):
  return _blocks.normals(key, ((N, D), 1.0))


def reference(x):
  return jnp.sum(x, axis=0)


def _col_sum_kernel(x_ref, o_ref):
  # Each program owns a strip of columns and walks down it in row chunks.
  def body(r, acc):
    chunk = x_ref[pl.ds(r * BLOCK_N, BLOCK_N), :]
    return acc + jnp.sum(chunk, axis=0)

  init = jnp.zeros((BLOCK_D,), jnp.float32)
  o_ref[...] = jax.lax.fori_loop(0, x_ref.shape[0] // BLOCK_N, body, init)


def solution(x):
  n, d = x.shape
  return pl.pallas_call(
      _col_sum_kernel,
      out_shape=jax.ShapeDtypeStruct((d,), x.dtype),
      grid=(d // BLOCK_D,),
      in_specs=[pl.BlockSpec((n, BLOCK_D), lambda j: (0, j))],
      out_specs=pl.BlockSpec((BLOCK_D,), lambda j: (j,)),
  )(x)
