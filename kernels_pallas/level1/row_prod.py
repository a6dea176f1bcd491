"""level1/row_prod: product over the last axis."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Row product. Input x: float32 [2048, 32], every entry in [0.5, 2).
Output: float32 [2048], out[i] = prod_j x[i, j]."""
ATOL = 1e-5
RTOL = 1e-4
N, D = 2048, 32
BLOCK_N = 128


def make_inputs(key):
  return _blocks.uniforms(key, ((N, D), 0.5, 2.0))


def reference(x):
  return jnp.prod(x, axis=1)


def _row_prod_kernel(x_ref, o_ref):
  # Entries are positive, so the product is exp of the summed logs (the
  # GPU Triton backend has no product reduction).
  o_ref[...] = jnp.exp(jnp.sum(jnp.log(x_ref[...]), axis=1))


def solution(x):
  n, d = x.shape
  # Each program holds BLOCK_N whole rows, so a row reduces in one step.
  return pl.pallas_call(
      _row_prod_kernel,
      out_shape=jax.ShapeDtypeStruct((n,), x.dtype),
      grid=(n // BLOCK_N,),
      in_specs=[pl.BlockSpec((BLOCK_N, d), lambda i: (i, 0))],
      out_specs=pl.BlockSpec((BLOCK_N,), lambda i: (i,)),
  )(x)
