"""level1/elu: ELU activation."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
ELU with alpha = 1. Input x: float32 [1024, 512]. Output: float32
[1024, 512], out = x where x > 0, else exp(x) - 1."""
ATOL = 1e-5
RTOL = 1e-5
N, D = 1024, 512
BLOCK_N = 64


def make_inputs(key):
  return _blocks.normals(key, ((N, D), 2.0))


def reference(x):
  return jnp.where(x > 0, x, jnp.expm1(x))


def _elu_kernel(x_ref, o_ref):
  x = x_ref[...]
  o_ref[...] = jnp.where(x > 0, x, jnp.expm1(x))


def solution(x):
  n, d = x.shape
  # Elementwise: each program maps one strip of whole rows.
  spec = pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))
  return pl.pallas_call(
      _elu_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(n // BLOCK_N,),
      in_specs=[spec],
      out_specs=spec,
  )(x)
