"""level1/matmul_tall_skinny: many rows, a small inner and output width."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels_pallas import _blocks

DESCRIPTION = """\
Tall-skinny matrix multiply. Inputs: a float32 [8192, 64], b float32
[64, 32]. Output: float32 [8192, 32], out = a @ b."""
ATOL = _blocks.DOT_ATOL
RTOL = _blocks.DOT_RTOL
M, K, N = 8192, 64, 32
BLOCK_M = 256


def make_inputs(key):
  return _blocks.normals(key, ((M, K), 1.0), ((K, N), _blocks.fan_in(K)))


def reference(a, b):
  return a @ b


def _tall_skinny_kernel(a_ref, b_ref, o_ref):
  # K and N are small: every program keeps all of b and does one dot.
  o_ref[...] = jnp.dot(a_ref[...], b_ref[...],
                       preferred_element_type=jnp.float32)


def solution(a, b):
  m, k = a.shape
  n = b.shape[1]
  return pl.pallas_call(
      _tall_skinny_kernel,
      out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
      grid=(m // BLOCK_M,),
      in_specs=[pl.BlockSpec((BLOCK_M, k), lambda i: (i, 0)),
                pl.BlockSpec((k, n), lambda i: (0, 0))],
      out_specs=pl.BlockSpec((BLOCK_M, n), lambda i: (i, 0)),
  )(a, b)
