"""level1/row_max: maximum over the last axis."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Row max. Input x: float32 [2048, 256]. Output: float32 [2048],
out[i] = max_j x[i, j]."""
ATOL = 1e-6
RTOL = 1e-6
N, D = 2048, 256
BLOCK_N, BLOCK_D = 64, 64


def make_inputs(key):
  return _blocks.normals(key, ((N, D), 1.0))


def reference(x):
  return jnp.max(x, axis=-1)


def _row_max_kernel(x_ref, o_ref):
  # Walk the row in column chunks, keeping a running max per row.
  def body(c, running):
    chunk = x_ref[:, pl.ds(c * BLOCK_D, BLOCK_D)]
    return jnp.maximum(running, jnp.max(chunk, axis=1))

  init = jnp.full((BLOCK_N,), -jnp.inf, jnp.float32)
  o_ref[...] = jax.lax.fori_loop(0, x_ref.shape[1] // BLOCK_D, body, init)


def solution(x):
  n, d = x.shape
  return pl.pallas_call(
      _row_max_kernel,
      out_shape=jax.ShapeDtypeStruct((n,), x.dtype),
      grid=(n // BLOCK_N,),
      in_specs=[pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))],
      out_specs=pl.BlockSpec((BLOCK_N,), lambda i: (i,)),
  )(x)
