"""level1/max_pool1d: max pooling along the last axis, window 2, stride 2."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
1-D max pooling, window 2, stride 2, along the last axis. Input x: float32
[512, 1024]. Output: float32 [512, 512], out[i, j] = max(x[i, 2j],
x[i, 2j + 1])."""
ATOL = 1e-6
RTOL = 1e-6
N, L = 512, 1024
BLOCK_N = 32


def make_inputs(key):
  return _blocks.normals(key, ((N, L), 1.0))


def reference(x):
  return jnp.max(x.reshape(x.shape[0], -1, 2), axis=2)


def _max_pool1d_kernel(x_ref, o_ref):
  # Strided loads pick the even and the odd positions of each window.
  half = o_ref.shape[1]
  even = x_ref[:, pl.ds(0, half, stride=2)]
  odd = x_ref[:, pl.ds(1, half, stride=2)]
  o_ref[...] = jnp.maximum(even, odd)


def solution(x):
  n, length = x.shape
  return pl.pallas_call(
      _max_pool1d_kernel,
      out_shape=jax.ShapeDtypeStruct((n, length // 2), x.dtype),
      grid=(n // BLOCK_N,),
      in_specs=[pl.BlockSpec((BLOCK_N, length), lambda i: (i, 0))],
      out_specs=pl.BlockSpec((BLOCK_N, length // 2), lambda i: (i, 0)),
  )(x)
