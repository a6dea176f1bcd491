"""level1/avg_pool1d: average pooling along the last axis, window 4."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
1-D average pooling, window 4, stride 4, along the last axis. Input x:
float32 [512, 1024]. Output: float32 [512, 256],
out[i, j] = (x[i, 4j] + x[i, 4j + 1] + x[i, 4j + 2] + x[i, 4j + 3]) / 4."""
ATOL = 1e-6
RTOL = 1e-5
N, L = 512, 1024
WINDOW = 4
BLOCK_N = 32


def make_inputs(key):
  return _blocks.normals(key, ((N, L), 1.0))


def reference(x):
  return jnp.mean(x.reshape(x.shape[0], -1, WINDOW), axis=2)


def _avg_pool1d_kernel(x_ref, o_ref):
  # Position p of every window is one strided load; summing the WINDOW loads
  # adds up each window.
  width = o_ref.shape[1]
  acc = jnp.zeros(o_ref.shape, jnp.float32)
  for p in range(WINDOW):
    acc += x_ref[:, pl.ds(p, width, stride=WINDOW)]
  o_ref[...] = acc * (1.0 / WINDOW)


def solution(x):
  n, length = x.shape
  return pl.pallas_call(
      _avg_pool1d_kernel,
      out_shape=jax.ShapeDtypeStruct((n, length // WINDOW), x.dtype),
      grid=(n // BLOCK_N,),
      in_specs=[pl.BlockSpec((BLOCK_N, length), lambda i: (i, 0))],
      out_specs=pl.BlockSpec((BLOCK_N, length // WINDOW), lambda i: (i, 0)),
  )(x)
