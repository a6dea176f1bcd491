"""level1/col_softmax: softmax over the first axis."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Softmax over axis 0 (each column sums to 1). Input x: float32 [256, 1024].
Output: float32 [256, 1024], out[i, j] = exp(x[i, j]) / sum_k exp(x[k, j]).
Columns carry offsets of up to +-100: subtract each column's max first."""
ATOL = 1e-6
RTOL = 1e-5
N, D = 256, 1024
BLOCK_D = 64


def make_inputs(key):
  # Offsets per column (row_offsets shifts rows, so build them transposed).
  return (_blocks.row_offsets(key, (D, N), 4.0, 100.0).T,)


def reference(x):
  e = jnp.exp(x - jnp.max(x, axis=0, keepdims=True))
  return e / jnp.sum(e, axis=0, keepdims=True)


def _col_softmax_kernel(x_ref, o_ref):
  # One program holds whole columns: all rows of BLOCK_D columns.
  x = x_ref[...]
  e = jnp.exp(x - jnp.max(x, axis=0, keepdims=True))
  o_ref[...] = e / jnp.sum(e, axis=0, keepdims=True)


def solution(x):
  n, d = x.shape
  spec = pl.BlockSpec((n, BLOCK_D), lambda j: (0, j))
  return pl.pallas_call(
      _col_softmax_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(d // BLOCK_D,),
      in_specs=[spec],
      out_specs=spec,
  )(x)
