"""level1/col_mean: mean over the first axis."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Column mean. Input x: float32 [512, 1024]. Output: float32 [1024],
out[j] = (1 / 512) * sum_i x[i, j]."""
ATOL = 1e-5
RTOL = 1e-5
N, D = 512, 1024
BLOCK_D = 64


def make_inputs(key):
  return _blocks.normals(key, ((N, D), 1.0))


def reference(x):
  return jnp.mean(x, axis=0)


def _col_mean_kernel(x_ref, o_ref):
  o_ref[...] = jnp.mean(x_ref[...], axis=0)


def solution(x):
  n, d = x.shape
  # Each program owns a strip of BLOCK_D whole columns (all n rows), so the
  # reduction over axis 0 stays inside one program.
  return pl.pallas_call(
      _col_mean_kernel,
      out_shape=jax.ShapeDtypeStruct((d,), x.dtype),
      grid=(d // BLOCK_D,),
      in_specs=[pl.BlockSpec((n, BLOCK_D), lambda j: (0, j))],
      out_specs=pl.BlockSpec((BLOCK_D,), lambda j: (j,)),
  )(x)
