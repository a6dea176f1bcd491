"""level1/row_min: min over the last axis."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Row min. Input x: float32 [2048, 256]. Output: float32 [2048],
out[i] = min_j x[i, j]."""
ATOL = 1e-6
RTOL = 1e-6
N, D = 2048, 256
BLOCK_N = 64


def make_inputs(key):
  return _blocks.normals(key, ((N, D), 1.0))


def reference(x):
  return jnp.min(x, axis=1)


def _row_min_kernel(x_ref, o_ref):
  o_ref[...] = jnp.min(x_ref[...], axis=1)


def solution(x):
  n, d = x.shape
  # Each program holds BLOCK_N whole rows, so a row reduces in one step.
  return pl.pallas_call(
      _row_min_kernel,
      out_shape=jax.ShapeDtypeStruct((n,), x.dtype),
      grid=(n // BLOCK_N,),
      in_specs=[pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))],
      out_specs=pl.BlockSpec((BLOCK_N,), lambda i: (i,)),
  )(x)
