"""level1/cumsum_cols: inclusive prefix sum along the first axis, chunked."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Inclusive cumulative sum along axis 0. Input x: float32 [1024, 256].
Output: float32 [1024, 256], out[i, j] = sum_{k <= i} x[k, j]."""
ATOL = 1e-3
RTOL = 1e-5
N, D = 1024, 256
BLOCK_N, BLOCK_D = 64, 32


def make_inputs(key):
  (x,) = _blocks.normals(key, ((N, D), 1.0))
  return (x + 0.5,)


def reference(x):
  return jnp.cumsum(x, axis=0)


def _cumsum_cols_kernel(x_ref, o_ref):
  # A program owns BLOCK_D whole columns and scans them in BLOCK_N-row
  # chunks: each chunk's local scan plus the running total of all chunks
  # above it.
  def body(r, carry):
    start = pl.multiple_of(r * BLOCK_N, BLOCK_N)
    chunk = x_ref[pl.ds(start, BLOCK_N), :]
    o_ref[pl.ds(start, BLOCK_N), :] = jnp.cumsum(chunk, axis=0) + carry[None, :]
    return carry + jnp.sum(chunk, axis=0)

  jax.lax.fori_loop(0, x_ref.shape[0] // BLOCK_N, body,
                    jnp.zeros((x_ref.shape[1],), jnp.float32))


def solution(x):
  n, d = x.shape
  spec = pl.BlockSpec((n, BLOCK_D), lambda j: (0, j))
  return pl.pallas_call(
      _cumsum_cols_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(d // BLOCK_D,),
      in_specs=[spec],
      out_specs=spec,
  )(x)
