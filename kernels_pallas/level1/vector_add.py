"""level1/vector_add: elementwise sum of two vectors."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

DESCRIPTION = """\
Vector add. Inputs: x, y float32 [262144]. Output: float32 [262144],
out = x + y (elementwise)."""
ATOL = 1e-6
RTOL = 1e-6
N = 1 << 18
BLOCK = 1 << 13  # 32 grid steps: interpret mode costs ~2 ms a step


def make_inputs(key):
  kx, ky = jax.random.split(key)
  return (jax.random.normal(kx, (N,), jnp.float32),
          jax.random.normal(ky, (N,), jnp.float32))


def reference(x, y):
  return x + y


def _add_kernel(x_ref, y_ref, o_ref):
  o_ref[...] = x_ref[...] + y_ref[...]


def solution(x, y):
  spec = pl.BlockSpec((BLOCK,), lambda i: (i,))
  return pl.pallas_call(
      _add_kernel,
      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      grid=(x.shape[0] // BLOCK,),
      in_specs=[spec, spec],
      out_specs=spec,
  )(x, y)
