"""level1/cumsum_rows: inclusive prefix sum along the last axis."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Inclusive cumulative sum along the last axis. Input x: float32 [512, 256].
Output: float32 [512, 256], out[i, j] = sum_{k <= j} x[i, k]."""
ATOL = 1e-4
RTOL = 1e-5
N, D = 512, 256
BLOCK_N = 32


def make_inputs(key):
  # A positive drift makes prefix sums grow along the row, so a reversed,
  # exclusive or blockwise-restarted scan is far off.
  (x,) = _blocks.normals(key, ((N, D), 1.0))
  return (x + 0.5,)


def reference(x):
  return jnp.cumsum(x, axis=1)


def _cumsum_rows_kernel(x_ref, o_ref):
  # Whole rows sit in one program, so the scan needs no carry between them.
  o_ref[...] = jnp.cumsum(x_ref[...], axis=1)


def solution(x):
  n, d = x.shape
  spec = pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))
  return pl.pallas_call(
      _cumsum_rows_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(n // BLOCK_N,),
      in_specs=[spec],
      out_specs=spec,
  )(x)
