"""level1/row_argmax: index of the max over the last axis."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Row argmax. Input x: float32 [2048, 256] (no ties within a row).
Output: int32 [2048], out[i] = the j that maximizes x[i, j]."""
ATOL = 0
RTOL = 0
N, D = 2048, 256
BLOCK_N = 64


def make_inputs(key):
  return _blocks.normals(key, ((N, D), 1.0))


def reference(x):
  return jnp.argmax(x, axis=1).astype(jnp.int32)


def _row_argmax_kernel(x_ref, o_ref):
  o_ref[...] = jnp.argmax(x_ref[...], axis=1).astype(jnp.int32)


def solution(x):
  n, d = x.shape
  # Each program holds BLOCK_N whole rows, so a row reduces in one step.
  return pl.pallas_call(
      _row_argmax_kernel,
      out_shape=jax.ShapeDtypeStruct((n,), jnp.int32),
      grid=(n // BLOCK_N,),
      in_specs=[pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))],
      out_specs=pl.BlockSpec((BLOCK_N,), lambda i: (i,)),
  )(x)
