"""level1/softplus: numerically stable softplus."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Softplus. Input x: float32 [512, 512]. Output: float32 [512, 512],
out = log(1 + exp(x)). Rows carry offsets of up to +-100, so exp(x)
overflows for large x: use the stable form max(x, 0) + log1p(exp(-|x|))."""
ATOL = 1e-5
RTOL = 1e-5
N, D = 512, 512
BLOCK_N = 32


def make_inputs(key):
  return (_blocks.row_offsets(key, (N, D), 4.0, 100.0),)


def reference(x):
  return jnp.maximum(x, 0.0) + jnp.log1p(jnp.exp(-jnp.abs(x)))


def _softplus_kernel(x_ref, o_ref):
  x = x_ref[...]
  # exp(-|x|) <= 1 never overflows; log1p keeps tiny values exact.
  o_ref[...] = jnp.maximum(x, 0.0) + jnp.log1p(jnp.exp(-jnp.abs(x)))


def solution(x):
  n, d = x.shape
  # Elementwise: each program maps one strip of whole rows.
  spec = pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))
  return pl.pallas_call(
      _softplus_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(n // BLOCK_N,),
      in_specs=[spec],
      out_specs=spec,
  )(x)
