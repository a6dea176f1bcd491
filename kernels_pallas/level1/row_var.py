"""level1/row_var: biased variance over the last axis."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Row variance (biased). Input x: float32 [1024, 512]. Output: float32
[1024], out[i] = mean_j (x[i, j] - mean_j x[i, j])**2 (divide by 512, not
511). Rows have means far from zero."""
ATOL = 1e-4
RTOL = 1e-4
N, D = 1024, 512
BLOCK_N = 32


def make_inputs(key):
  return (_blocks.row_offsets(key, (N, D), 2.0, 20.0),)


def reference(x):
  mean = jnp.mean(x, axis=1, keepdims=True)
  return jnp.mean((x - mean) ** 2, axis=1)


def _row_var_kernel(x_ref, o_ref):
  x = x_ref[...]
  # Center first: E[x^2] - E[x]^2 cancels badly when the mean is large.
  centered = x - jnp.mean(x, axis=1, keepdims=True)
  o_ref[...] = jnp.mean(centered * centered, axis=1)


def solution(x):
  n, d = x.shape
  # Each program holds BLOCK_N whole rows, so a row reduces in one step.
  return pl.pallas_call(
      _row_var_kernel,
      out_shape=jax.ShapeDtypeStruct((n,), x.dtype),
      grid=(n // BLOCK_N,),
      in_specs=[pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))],
      out_specs=pl.BlockSpec((BLOCK_N,), lambda i: (i,)),
  )(x)
