"""level1/log_softmax: row-wise log-softmax."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Log-softmax over the last axis. Input x: float32 [1024, 512]. Output: float32
[1024, 512], out[i, j] = x[i, j] - log(sum_k exp(x[i, k])). Rows carry
offsets of up to +-100: subtract each row's max before exp."""
ATOL = 1e-4
RTOL = 1e-5
N, D = 1024, 512
BLOCK_N = 32


def make_inputs(key):
  return (_blocks.row_offsets(key, (N, D), 4.0, 100.0),)


def reference(x):
  m = jnp.max(x, axis=-1, keepdims=True)
  return x - m - jnp.log(jnp.sum(jnp.exp(x - m), axis=-1, keepdims=True))


def _log_softmax_kernel(x_ref, o_ref):
  x = x_ref[...]
  shifted = x - jnp.max(x, axis=1, keepdims=True)
  o_ref[...] = shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=1,
                                         keepdims=True))


def solution(x):
  n, d = x.shape
  spec = pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))
  return pl.pallas_call(
      _log_softmax_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(n // BLOCK_N,),
      in_specs=[spec],
      out_specs=spec,
  )(x)
