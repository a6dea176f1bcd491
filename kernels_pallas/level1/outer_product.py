"""level1/outer_product: outer product of two vectors."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Outer product. Inputs: x float32 [1024], y float32 [512]. Output: float32
[1024, 512], out[i, j] = x[i] * y[j]."""
ATOL = 1e-6
RTOL = 1e-6
M, N = 1024, 512
BLOCK_M = 64


def make_inputs(key):
  return _blocks.normals(key, ((M,), 1.0), ((N,), 1.0))


def reference(x, y):
  return x[:, None] * y[None, :]


def _outer_kernel(x_ref, y_ref, o_ref):
  # A rank-1 product is a broadcast multiply; a dot with K = 1 would be
  # both wasteful and too thin for the tensor cores.
  o_ref[...] = x_ref[...][:, None] * y_ref[...][None, :]


def solution(x, y):
  m, n = x.shape[0], y.shape[0]
  return pl.pallas_call(
      _outer_kernel,
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
      grid=(m // BLOCK_M,),
      in_specs=[pl.BlockSpec((BLOCK_M,), lambda i: (i,)),
                pl.BlockSpec((n,), lambda i: (0,))],
      out_specs=pl.BlockSpec((BLOCK_M, n), lambda i: (i, 0)),
  )(x, y)
