"""level1/abs: absolute value."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Absolute value. Input x: float32 [2048, 256]. Output: float32
[2048, 256], out = |x|."""
ATOL = 1e-5
RTOL = 1e-5
N, D = 2048, 256
BLOCK_N = 128


def make_inputs(key):
  return _blocks.normals(key, ((N, D), 1.0))


def reference(x):
  return jnp.abs(x)


def _abs_kernel(x_ref, o_ref):
  o_ref[...] = jnp.abs(x_ref[...])


def solution(x):
  n, d = x.shape
  # Elementwise: each program maps one strip of whole rows.
  spec = pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))
  return pl.pallas_call(
      _abs_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(n // BLOCK_N,),
      in_specs=[spec],
      out_specs=spec,
  )(x)
