"""level1/row_logsumexp: log-sum-exp over the last axis."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Row log-sum-exp. Input x: float32 [1024, 512]. Output: float32 [1024],
out[i] = log(sum_j exp(x[i, j])). Rows carry offsets of up to +-100, so
subtract each row's max m first: out = m + log(sum_j exp(x - m))."""
ATOL = 1e-5
RTOL = 1e-5
N, D = 1024, 512
BLOCK_N = 32


def make_inputs(key):
  return (_blocks.row_offsets(key, (N, D), 3.0, 100.0),)


def reference(x):
  m = jnp.max(x, axis=1, keepdims=True)
  return m[:, 0] + jnp.log(jnp.sum(jnp.exp(x - m), axis=1))


def _row_logsumexp_kernel(x_ref, o_ref):
  x = x_ref[...]
  m = jnp.max(x, axis=1)
  o_ref[...] = m + jnp.log(jnp.sum(jnp.exp(x - m[:, None]), axis=1))


def solution(x):
  n, d = x.shape
  # Each program holds BLOCK_N whole rows, so a row reduces in one step.
  return pl.pallas_call(
      _row_logsumexp_kernel,
      out_shape=jax.ShapeDtypeStruct((n,), x.dtype),
      grid=(n // BLOCK_N,),
      in_specs=[pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))],
      out_specs=pl.BlockSpec((BLOCK_N,), lambda i: (i,)),
  )(x)
