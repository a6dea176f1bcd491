"""level1/row_mean: mean over the last axis."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Row mean. Input x: float32 [1024, 512]. Output: float32 [1024],
out[i] = (1 / 512) * sum_j x[i, j]."""
ATOL = 1e-5
RTOL = 1e-5
N, D = 1024, 512
BLOCK_N = 32


def make_inputs(key):
  return _blocks.normals(key, ((N, D), 1.0))


def reference(x):
  return jnp.mean(x, axis=1)


def _row_mean_kernel(x_ref, o_ref):
  o_ref[...] = jnp.mean(x_ref[...], axis=1)


def solution(x):
  n, d = x.shape
  # Each program holds BLOCK_N whole rows, so a row reduces in one step.
  return pl.pallas_call(
      _row_mean_kernel,
      out_shape=jax.ShapeDtypeStruct((n,), x.dtype),
      grid=(n // BLOCK_N,),
      in_specs=[pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))],
      out_specs=pl.BlockSpec((BLOCK_N,), lambda i: (i,)),
  )(x)
