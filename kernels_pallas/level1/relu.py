"""level1/relu: elementwise max(x, 0) over a 2-D array."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
ReLU. Input x: float32 [1024, 1024]. Output: float32 [1024, 1024],
out[i, j] = max(x[i, j], 0)."""
ATOL = 1e-6
RTOL = 1e-6
N, D = 1024, 1024
BLOCK_N, BLOCK_D = 64, 256


def make_inputs(key):
  # Zero-mean normals: half the entries are negative, so ReLU matters.
  return _blocks.normals(key, ((N, D), 1.0))


def reference(x):
  return jnp.maximum(x, 0.0)


def _relu_kernel(x_ref, o_ref):
  o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def solution(x):
  n, d = x.shape
  spec = pl.BlockSpec((BLOCK_N, BLOCK_D), lambda i, j: (i, j))
  return pl.pallas_call(
      _relu_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(n // BLOCK_N, d // BLOCK_D),
      in_specs=[spec],
      out_specs=spec,
  )(x)
